"""The refinery and faq commands as a user runs them: a waited run, a detached worker
process followed with ``status``, card review, and search --qa-first."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import documents
from plait.testing.wire import WireServer

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> str:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    path = str(tmp_path / "plait.db")
    result = runner.invoke(app, ["index", str(folder), "--store", path, "--embedder", "fake", "-c", "kb", "--json"])
    assert result.exit_code == 0, result.output
    return path


def _json(args: list[str]) -> Any:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_run_review_and_qa_first_from_the_cli(store: str) -> None:
    common = ["--store", store, "-c", "kb", "--json"]
    run = _json(["refinery", "run", "--llm", "none", *common])
    assert run["status"] == "succeeded" and run["mode"] == "extractive"
    assert run["progress"]["cardsMade"] == 16
    assert _json(["refinery", "status", run["id"], *common]) == run

    cards = _json(["faq", "list", "--status", "draft", *common])
    assert len(cards) == 16
    rotate = next(c for c in cards if c["question"] == "How do I rotate an API key?")
    approved = _json(["faq", "approve", rotate["id"], *common])
    assert approved["status"] == "approved"
    edited = _json(["faq", "edit", rotate["id"], "--answer", "Roll it in Developers › API keys.", *common])
    assert edited["answer"] == "Roll it in Developers › API keys." and edited["status"] == "draft"
    assert edited["note"] == AGAIN
    assert _json(["faq", "approve", rotate["id"], *common])["status"] == "approved"

    hit = _json(["search", "rotate my API keys", "--qa-first", *common])
    assert hit["answeredBy"] == "card" and hit["card"]["cardId"] == rotate["id"]
    text = runner.invoke(app, ["search", "rotate my API keys", "--qa-first", "--store", store, "-c", "kb"])
    assert text.exit_code == 0 and "FAQ card" in text.stdout and "Roll it in Developers" in text.stdout

    settings = _json(["refinery", "settings", "--max-cards", "50", "--qa-drafts", *common])
    assert settings["maxCards"] == 50 and settings["qaIncludeDrafts"] is True
    rejected = _json(["faq", "reject", rotate["id"], *common])
    assert rejected["status"] == "rejected"
    bad = runner.invoke(app, ["faq", "approve", "card_nope", "--store", store, "-c", "kb"])
    assert bad.exit_code == 1 and "FAQ card 'card_nope' does not exist" in bad.output


AGAIN = (
    "the card was approved; its answer changed, so it is a draft again until it is approved anew "
    "(the approval was of the old text)"
)


def test_editing_an_approved_card_says_it_is_a_draft_again_and_ask_is_not_grounded(store: str) -> None:
    """'plait faq edit' of an approved card printed it still approved, and 'plait ask
    --qa-first' answered with the new text, grounded: true, quoting a sentence that does
    not back it."""
    common = ["--store", store, "-c", "kb"]
    _json(["refinery", "run", "--llm", "none", *common, "--json"])
    card = next(c for c in _json(["faq", "list", *common, "--json"]) if c["question"] == "How do I rotate an API key?")
    _json(["faq", "approve", card["id"], *common, "--json"])
    edited = runner.invoke(app, ["faq", "edit", card["id"], "--answer", "Call the hotline at 555-0199.", *common])
    assert edited.exit_code == 0, edited.output
    assert edited.stdout.splitlines()[0] == f"{card['id']} draft (extractive) How do I rotate an API key?"
    unbacked = "the card's answer is not grounded: it shares no content word with the card's source chunks"
    assert " ".join(" ".join(edited.stdout.splitlines()[3:]).split()) == f"note: {AGAIN}; {unbacked}"  # wrapped
    question = ["ask", "How do I rotate API keys?", "--qa-first", "--llm", "none", *common, "--json"]
    assert _json(question)["answeredBy"] == "search"  # a draft is not served
    _json(["faq", "approve", card["id"], *common, "--json"])
    asked = _json(question)
    assert (asked["mode"], asked["grounded"], asked["citations"], asked["note"]) == ("card", False, [], unbacked)


def test_a_detached_run_is_followed_with_status(store: str) -> None:
    common = ["--store", store, "-c", "kb", "--json"]
    run = _json(["refinery", "run", "--detach", "--llm", "none", "--embedder", "fake", *common])
    assert run["status"] in ("queued", "running", "succeeded")
    deadline = time.monotonic() + 60
    while True:
        status = _json(["refinery", "status", run["id"], *common])
        if status["status"] not in ("queued", "running") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status["status"] == "succeeded", status
    assert status["pid"] is not None and status["progress"]["cardsMade"] == 16
    listed = _json(["refinery", "list", *common])
    assert [r["id"] for r in listed] == [run["id"]]


def test_cancel_of_a_running_run_says_the_cancel_was_requested(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # 'plait refinery cancel' printed the run as it stood ("running") and nothing else, so a
    # cancel looked like it had not been taken; --json said cancelRequested: true
    monkeypatch.setenv("COLUMNS", "200")  # lines are counted: none may wrap (xdist workers have COLUMNS=80)
    with Plait(store, embedder=FakeEmbedder()) as engine, subprocess.Popen(["sleep", "60"]) as worker:
        run = engine.refinery.create_run("kb", mode="extractive")
        assert engine.refinery.store.claim_run(run.id, worker.pid)  # running, in a live process
        try:
            text = runner.invoke(app, ["refinery", "cancel", run.id, "--store", store, "-c", "kb"])
            status = _json(["refinery", "status", run.id, "--store", store, "-c", "kb", "--json"])
        finally:
            worker.kill()
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0] == f"run {run.id} · kb · running · mode extractive"
    assert lines[3] == "cancel requested: the run stops after its current group of chunks"
    assert (status["status"], status["cancelRequested"]) == ("running", True)


def test_status_and_cancel_with_another_collection_neither_show_nor_cancel_the_run(store: str) -> None:
    """'-c' was ignored: status showed, and cancel cancelled, collection kb's run asked for
    under collection other (HTTP answered 404)."""
    with Plait(store, embedder=FakeEmbedder()) as engine:
        engine.index_documents(documents({"o-1": "Another collection."}), collection="other")
        run = engine.refinery.create_run("kb", mode="extractive")
    message = f"refinery run '{run.id}' does not exist in collection 'other'"
    for command in ("status", "cancel"):
        result = runner.invoke(app, ["refinery", command, run.id, "--store", store, "-c", "other"])
        assert result.exit_code == 1 and " ".join(result.output.split()) == f"error: {message}"
    queued = _json(["refinery", "status", run.id, "--store", store, "--json"])  # no -c: any collection
    assert (queued["status"], queued["cancelRequested"]) == ("queued", False)
    cancelled = _json(["refinery", "cancel", run.id, "--store", store, "-c", "kb", "--json"])
    assert cancelled["status"] == "cancelled"


def test_a_run_whose_every_llm_reply_is_unreadable_reads_failed(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It ended 'succeeded' with 0 cards and no note; only 'groups skipped' told."""
    with WireServer(chat=lambda messages: "Sorry, I can't help with that.") as server:
        monkeypatch.setenv("PLAIT_OLLAMA_URL", server.url)
        monkeypatch.setenv("PLAIT_LLM_MODEL", "m")
        ran = runner.invoke(app, ["refinery", "run", "--llm", "ollama", "--store", store, "-c", "kb"])
    assert ran.exit_code == 1, ran.output
    lines = ran.stdout.splitlines()
    run_id = lines[0].split()[1]
    assert lines[0] == f"run {run_id} · kb · failed · mode llm"
    # faq.md is 12 chunks, read in groups of 4
    assert lines[1] == "chunks 12/12 · cards made 0 · merged 0 · LLM calls 3 · groups skipped 3"
    error = "all 3 groups of chunks failed: the LLM's replies held no JSON array of cards, so no card was made"
    assert " ".join(" ".join(lines[3:]).split()) == f"error: {error}"
    status = runner.invoke(app, ["refinery", "status", run_id, "--store", store, "-c", "kb"])
    assert status.exit_code == 0 and status.stdout == ran.stdout
