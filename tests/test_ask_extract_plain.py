"""Ask reads a chunk as it was indexed (:func:`plait.fields.reads_as_markdown`): a JSONL
record was cut as plain text, so it is read as plain text, not as Markdown.

Regression (stop 43's noticed list, teaching-vacancies as ``corpus.jsonl``, ids 10 and
20): a record holding a long fenced code block was cut by size inside the block, as plain
text is. Read as Markdown, the second chunk's closing ``` opened a fence: the answer after
the block became code and ask said "The closest passage holds no sentence to quote".
"""

from __future__ import annotations

import json
from pathlib import Path

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait

_CODE = "\n".join(f"deploy_step_{i:02d} --target production --retries {i}" for i in range(40))
_TEXT = (
    "Deploys run every night from the release branch.\n\n```sh\n" + _CODE + "\n```\n\n"
    "The rollback command restores the previous release within five minutes.\n"
)


def _engine(tmp_path: Path) -> Plait:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "ops", "title": "Operations", "text": _TEXT}) + "\n", encoding="utf-8")
    engine = Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=64), llm="none")
    engine.index(corpus)
    return engine


def test_a_jsonl_record_cut_inside_its_code_block_is_read_as_plain_text(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        chunks = engine.store.get_chunks("default", sorted(engine.store.chunk_ids("default")))
        (second,) = [c for c in chunks.values() if c.metadata["charStart"] > 0]
        assert second.content.startswith("--retries 20\ndeploy_step_21")  # cut inside the block
        assert "\n```\n\nThe rollback command" in second.content and "fence" not in second.metadata
        result = engine.ask("How long does the rollback command take to restore the previous release?")
    assert result.mode == "extractive"
    assert result.answer == "The rollback command restores the previous release within five minutes. [1]"


def test_the_chunk_view_shows_a_jsonl_record_as_text(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        first = min(engine.store.chunk_ids("default"))
        view = engine.chunk(first)
    assert view.rendered_as == "text" and view.html.startswith("<pre>")
