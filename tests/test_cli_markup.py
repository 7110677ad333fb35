"""Text from the corpus is printed as text, never read as rich markup.

``plait ask``, ``plait faq`` and ``plait index-sessions`` printed answers, quotes, origins,
card questions and event types inside rich markup strings: a ``[red]`` in a document
vanished from the answer, and a ``[/blue]`` (a closing tag no one opened) ended the command
with a ``MarkupError`` traceback — after the index had been written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app

runner = CliRunner()

TAGS = "# Tags guide\n\n## What does [/blue] do?\n\nThe tag [red] makes text red; [/red] closes it in rich output.\n"


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_ask_and_faq_print_bracketed_words_as_written(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tags.md").write_text(TAGS, encoding="utf-8")
    common = ["--store", str(tmp_path / "p.db"), "--embedder", "fake", "-c", "kb"]
    _ok(["index", str(docs), *common])

    answer = _ok(["ask", "what makes text red in rich output?", *common]).splitlines()
    assert answer[:3] == [
        "The tag [red] makes text red; [/red] closes it in rich output. [1]",
        "",
        "[1] tags.md › Tags guide › What does [/blue] do?",
    ]
    assert answer[3].strip() == "“The tag [red] makes text red; [/red] closes it in rich output.”"

    _ok(["refinery", "run", "--llm", "none", *common])
    cards = _ok(["faq", "list", *common]).splitlines()
    assert cards[0].endswith(" draft (extractive) What does [/blue] do?")
    assert cards[1] == "    The tag [red] makes text red; [/red] closes it in rich output."


def test_index_sessions_and_ask_print_session_text_as_written(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    events = [
        {"id": "m1", "sessionId": "sess-[/blue]", "type": "chat.message",
         "payload": {"text": "The [bold] tag makes text bold in rich output."}},
        {"id": "m2", "sessionId": "sess-[/blue]", "type": "tool.[/red]call", "payload": {}},
    ]  # fmt: skip
    log.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    common = ["--store", str(tmp_path / "p.db"), "--embedder", "fake"]

    report = _ok(["index-sessions", str(log), *common]).splitlines()
    assert "events not indexed by type: tool.[/red]call 1" in report
    assert "added (1): sess-[/blue]" in report

    answer = _ok(["ask", "which tag makes text bold in rich output", *common]).splitlines()
    assert answer[:3] == [
        "The [bold] tag makes text bold in rich output. [1]",
        "",
        "[1] session sess-[/blue] · event m1",
    ]


def test_refinery_status_and_list_print_a_markup_collection_name_as_written(tmp_path: Path) -> None:
    """Noticed by a helper (collection names, stop 44): 'refinery status' and 'refinery list'
    printed the run's collection inside rich markup, so a collection named '[/red]' ended
    them with a MarkupError."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tags.md").write_text(TAGS, encoding="utf-8")
    common = ["--store", str(tmp_path / "p.db"), "--embedder", "fake", "-c", "[/red]"]
    _ok(["index", str(docs), *common])
    run = json.loads(_ok(["refinery", "run", "--llm", "none", *common, "--json"]))
    status = _ok(["refinery", "status", run["id"], *common])
    assert status.splitlines()[0] == f"run {run['id']} · [/red] · succeeded · mode extractive"
    listed = _ok(["refinery", "list", *common])
    assert "refinery runs of [/red]" in listed and run["id"] in listed
