"""What a :class:`~plait.stores.lexical_index.LexicalIndex` carries into the next generation.

:meth:`LexicalIndex.apply` makes the next generation's index without touching the terms
the old one cached: it adds one :class:`Layer` — the old index's row ids, a shallow copy
of its cached terms (positions into those row ids, term frequencies) and of the terms it
knew to hold no postings, and the rows the change added (:class:`Added`) — in front of
the old index's own layers. A term is *merged* on its first use in the new index
(:func:`merge`): the layers are walked newest first, each contributing the postings of
its added rows, until one holds the term (or knows it held none); its positions are
then mapped to the new generation's through the layer's :func:`position_map` (made once
per layer and holding index: each old row's new position, -1 for a removed one; row ids
are never reused) and sorted. So applying a change costs nothing per cached term, and
each term costs O(postings) once, when it is next queried. Only the newest
:data:`MAX_LAYERS` layers hold a position map (keeping a map current costs O(chunks) per
change); an older layer's terms are looked up by row id (O(postings · log chunks)), so
a term left unqueried for many changes is still carried, not read again, until
:data:`MAX_DEPTH` changes or the budget drop its layer.

A merged term is taken out of its layer (another index sharing the layer then reads it
again: the same postings, never others), and layers count against the index's budget
(their live terms, their row ids and their added rows), oldest dropped first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from plait.stores.base import BM25Params
from plait.stores.lexical_whole import WholePostings

__all__ = ["ENTRY_OVERHEAD", "MAX_DEPTH", "MAX_LAYERS", "Added", "Key", "Layer", "ScoreRow", "Term", "merge", "position_map"]

#: Bytes counted per cached term on top of its arrays (dict entry, tuple, array headers).
ENTRY_OVERHEAD = 400
#: Layers (the newest changes applied) one index keeps a position map of.
MAX_LAYERS = 8
#: Layers (changes applied and not yet dropped) one index keeps at most (the budget may
#: drop them sooner). Past :data:`MAX_LAYERS` a layer costs its row ids and live terms
#: (counted against the budget) and each term a query asks for that no newer layer
#: holds a few dictionary lookups per layer.
MAX_DEPTH = 64

Key = tuple[int, str]


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One term's precomputed contribution: ``scores[i]`` goes to chunk position ``positions[i]``."""

    positions: np.ndarray
    scores: np.ndarray


@dataclass(slots=True)
class Term:
    """One cached term: its postings (positions, tfs) and score rows per parameter set."""

    positions: np.ndarray
    tfs: np.ndarray
    rows: dict[BM25Params, ScoreRow] = field(default_factory=dict)
    nbytes: int = 0


class Added(Protocol):
    """The chunk rows one change added, as a layer asks about them."""

    @property
    def nbytes(self) -> int:
        """Bytes they hold (counted against the budget)."""

    def postings(self, field: int, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The term's (ascending row ids, term frequencies) among the added rows, None if none."""


class Layer:
    """One applied change: what the index before it held (see the module docstring)."""

    def __init__(
        self,
        base: np.ndarray,
        terms: dict[Key, Term],
        terms_bytes: int,
        misses: frozenset[Key],
        added: Added | None,
        *,
        whole: WholePostings | None = None,
    ) -> None:
        self.base = base
        self.terms = terms  # a copy: merged terms are taken out of it
        self.misses = misses
        self.added = added
        #: Every posting of the index before the change (:mod:`plait.stores.lexical_whole`), or
        #: None; never changed, so it answers for every term, merged elsewhere or not.
        self.whole = whole
        self._lock = threading.Lock()
        # terms_bytes counts the whole postings of the index before (its _bytes)
        self.nbytes = base.nbytes + terms_bytes + (added.nbytes if added is not None else 0)

    def take(self, key: Key) -> Term | None:
        """The term's entry, removed from the layer (None if it holds none)."""
        with self._lock:
            entry = self.terms.pop(key, None)
            if entry is not None:
                self.nbytes -= entry.nbytes
            return entry


def position_map(base: np.ndarray, rowids: np.ndarray) -> np.ndarray:
    """For each row id of ``base`` (ascending), its position among ``rowids`` (ascending),
    -1 where it is not there (removed); then one more -1, so that mapping a -1 through
    the next map (``step[m]``) gives -1 again (:func:`~plait.stores.lexical_index.compose`)."""
    if rowids.size == 0:
        return np.full(base.size + 1, -1, dtype=np.intp)
    positions = np.empty(base.size + 1, dtype=np.intp)
    positions[:-1] = np.searchsorted(rowids, base)
    positions[-1] = -1
    gone = rowids[np.minimum(positions[:-1], rowids.size - 1)] != base
    positions[:-1][gone] = -1
    return positions


def _mapped(
    layer: Layer, positions: np.ndarray, rowids: np.ndarray, mapping: Callable[[Layer], np.ndarray | None]
) -> np.ndarray:
    """``positions`` (into ``layer.base``) as positions into ``rowids`` (-1: removed since):
    through the layer's position map, or, for a layer without one, by row id."""
    mapped = mapping(layer)
    if mapped is not None:
        return np.asarray(mapped[positions], dtype=np.intp)
    return position_map(layer.base[positions], rowids)[:-1]  # without the sentinel


def merge(
    layers: Sequence[Layer], key: Key, rowids: np.ndarray, mapping: Callable[[Layer], np.ndarray | None]
) -> tuple[np.ndarray, np.ndarray] | None:
    """The term's (ascending positions among ``rowids``, term frequencies) from ``layers``
    (newest first), None when no layer knew the term (it must be read). ``mapping(layer)``
    is :func:`position_map` of the layer's row ids into ``rowids`` (cached by the caller),
    or None for a layer it keeps no map of (its positions are then looked up by row id)."""
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for layer in layers:
        if layer.added is not None:
            hit = layer.added.postings(*key)
            if hit is not None:
                ids = hit[0]
                positions = np.searchsorted(rowids, ids).astype(np.intp, copy=False)
                if rowids.size:
                    kept = rowids[np.minimum(positions, rowids.size - 1)] == ids
                    parts.append((positions[kept], np.asarray(hit[1], dtype=np.float64)[kept]))
        entry = layer.take(key)
        if entry is not None:
            positions = _mapped(layer, entry.positions, rowids, mapping)
            kept = positions >= 0
            parts.append((positions, entry.tfs) if kept.all() else (positions[kept], entry.tfs[kept]))
            break
        if key in layer.misses:
            break
        if layer.whole is not None:  # the index before held every posting: none if not there
            held = layer.whole.get(key)
            if held is not None:
                positions = _mapped(layer, held[0], rowids, mapping)
                kept = positions >= 0
                parts.append((positions, held[1]) if kept.all() else (positions[kept], held[1][kept]))
            break
    else:
        return None
    if not parts:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float64)
    if len(parts) == 1:
        return parts[0]
    positions = np.concatenate([p for p, _ in parts])
    tfs = np.concatenate([t for _, t in parts])
    order = np.argsort(positions, kind="stable")
    return positions[order], tfs[order]
