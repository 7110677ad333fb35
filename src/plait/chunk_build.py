"""A source document's chunks: cut by :mod:`plait.chunking`, with stable ids and origins.

A chunk id is built from the source id, the part key, the heading path (the headings'
source titles) and the chunk's position under it, so an edit elsewhere in a document
keeps the ids of the chunks whose text did not change (ADR 0080's chunk rules).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

from plait.chunking import ChunkSettings, TextChunk, chunk_markdown, chunk_text
from plait.fields import hash_text
from plait.sources.base import SourceDocument
from plait.types import Chunk, FileOrigin

__all__ = ["build_chunks", "chunk_id", "content_hash", "index_text"]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def chunk_id(source_id: str, key: str, heading_path: Sequence[str], n: int) -> str:
    """Stable id: the source, the part key, the heading path and the position within it."""
    raw = "\x1f".join((source_id, key, "\x1e".join(heading_path), str(n)))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


def index_text(content: str, heading_path: Sequence[str]) -> str:
    """What both arms index for a chunk: its heading path, then its content.

    A section's later chunks do not repeat the headings above them; prepending the
    path lets "ERR-4012" find the "What it means" chunk under "## ERR-4012 — …", and
    gives the embedder the same context a reader has.
    """
    if not heading_path:
        return content
    return "\n".join(heading_path) + "\n\n" + content


def _bare_parent_heading(pieces: Sequence[TextChunk], index: int) -> bool:
    """A section that is only its heading, followed by its own subsections.

    Its words are indexed with every subsection (through their heading paths), so a
    chunk of its own would only be a citation with nothing in it.
    """
    piece = pieces[index]
    if not piece.bare or index + 1 >= len(pieces):
        return False
    following = pieces[index + 1].heading_path
    return len(following) > len(piece.heading_path) and following[: len(piece.heading_path)] == piece.heading_path


def build_chunks(doc: SourceDocument, settings: ChunkSettings) -> list[Chunk]:
    """Cut a document's parts into chunks with stable ids and inherited origins."""
    chunks: list[Chunk] = []
    seen: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for part in doc.parts:
        pieces = chunk_markdown(part.text, settings) if part.markdown else chunk_text(part.text, settings)
        for index, piece in enumerate(pieces):
            text = piece.text.strip()
            if not text or _bare_parent_heading(pieces, index):
                continue
            heading = tuple(piece.heading_path)
            # Ids are built from the headings' source titles: unchanged where the source is.
            key = piece.heading_key
            n = seen[(part.key, key)]
            seen[(part.key, key)] += 1
            origin = part.origin
            if isinstance(origin, FileOrigin):
                origin = origin.model_copy(update={"heading_path": list(heading)})
            chunk = Chunk(
                id=chunk_id(doc.source_id, part.key, key, n),
                source_id=doc.source_id,
                scope=doc.scope,
                content=text,
                content_hash="",
                origin=origin,
                ordinal=len(chunks),
                metadata={
                    **doc.metadata,
                    "charStart": piece.start,
                    "charEnd": piece.end,
                    **({"fence": piece.fence} if piece.fence else {}),
                    **({"table": piece.table} if piece.table else {}),
                },
            )
            chunks.append(chunk.model_copy(update={"content_hash": content_hash(hash_text(chunk))}))
    return chunks
