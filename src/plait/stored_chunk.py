"""A chunk as the indexer writes it: its lexical fields analysed, or deferred.

A store ignores the lexical fields of a chunk whose id and content hash are unchanged
unless it rewrites the row, so such a chunk is handed over with fields analysed on
first use only (:func:`stored_chunk`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from plait.analysis import analyse
from plait.fields import lexical_text
from plait.stores.base import ChunkState, StoredChunk
from plait.types import Chunk

__all__ = ["stored_chunk"]


class _Deferred:
    """A chunk's analysis, run on first use only.

    A store ignores the lexical fields of a chunk whose id and content hash are
    unchanged unless it rewrites the row (Milvus does when only metadata or the vector
    changed); deferring lets an unchanged chunk cost no analysis when nobody reads them.
    """

    __slots__ = ("_chunk", "_fields")

    def __init__(self, chunk: Chunk) -> None:
        self._chunk = chunk
        self._fields: tuple[list[str], list[str]] | None = None

    def get(self, which: int) -> list[str]:
        if self._fields is None:
            fields = analyse(lexical_text(self._chunk))
            self._fields = (list(fields.exact), list(fields.stems))
        return self._fields[which]


def stored_chunk(chunk: Chunk, state: ChunkState | None, vector: np.ndarray | None) -> StoredChunk:
    """The chunk as written; a chunk stored with the same content hash is analysed
    only if the store reads its lexical fields."""
    if state is not None and state.content_hash == chunk.content_hash:
        deferred = _Deferred(chunk)
        return StoredChunk(chunk, _LazyTokens(deferred, 0), _LazyTokens(deferred, 1), vector)
    fields = analyse(lexical_text(chunk))
    return StoredChunk(chunk, fields.exact, fields.stems, vector)


class _LazyTokens(Sequence[str]):
    """One field (0 exact, 1 stems) of a :class:`_Deferred` analysis, as a sequence."""

    __slots__ = ("_deferred", "_which")

    def __init__(self, deferred: _Deferred, which: int) -> None:
        self._deferred = deferred
        self._which = which

    def __getitem__(self, index: int | slice) -> Any:
        return self._deferred.get(self._which)[index]

    def __len__(self) -> int:
        return len(self._deferred.get(self._which))

    def __iter__(self) -> Iterator[str]:
        return iter(self._deferred.get(self._which))
