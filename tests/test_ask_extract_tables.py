"""An extractive answer quotes a table row with its column names even when the row sits
in a later chunk of a long table (:mod:`plait.ask_extract`, :attr:`plait.chunking.TextChunk.table`).

Before, a long table was cut at whitespace inside a row, and a later chunk carried no
header: on the real manage.get.gov docs, ask answered with a fragment such as
"| pool.py _maintenance_loop | | failed: all pooled EPP connections are busy | ERROR | …",
and its citation quoted raw rows run together with the header and delimiter rows."""

from __future__ import annotations

from pathlib import Path

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin

_ROWS = 24
_DOC = "# Pool settings\n\n| Setting | Default | What it does |\n|---|---|---|\n" + "".join(
    f"| `POOL_SETTING_{i:02d}` | {i * 5} | Seconds the pool waits in phase {i} before it gives up and logs it. |\n"
    for i in range(1, _ROWS + 1)
)


def test_a_row_of_a_later_chunk_is_quoted_with_its_column_names(tmp_path: Path) -> None:
    doc = SourceDocument(
        source_id="pool.md",
        scope="docs",
        parts=(SourcePart(text=_DOC, origin=FileOrigin(source_path="pool.md", title="Pool"), markdown=True),),
    )
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=64), llm="none") as engine:
        engine.index_documents([doc])
        chunks = engine.store.get_chunks("default", sorted(engine.store.chunk_ids("default")))
        later = [c for c in chunks.values() if "POOL_SETTING_20" in c.content]
        result = engine.ask("What is the default of POOL_SETTING_20?")
    assert len(chunks) >= 2 and len(later) == 1  # the table is split, its row whole in one chunk
    (chunk,) = later
    assert chunk.metadata["table"] == "| Setting | Default | What it does |\n|---|---|---|"
    assert all(line.startswith("| `POOL_SETTING_") and line.endswith(" |") for line in chunk.content.splitlines())
    assert result.mode == "extractive"
    assert result.answer.startswith(
        "Setting: POOL_SETTING_20; Default: 100; What it does: Seconds the pool waits in phase 20"
    )
    assert "|" not in result.answer
    # the citation quotes the row as written, alone (before: the sentence splitter glued
    # the end of one row to the next, the header and delimiter rows included)
    assert result.citations[0].quote == (
        "| `POOL_SETTING_20` | 100 | Seconds the pool waits in phase 20 before it gives up and logs it. |"
    )
