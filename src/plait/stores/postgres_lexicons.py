"""The lexical indexes one PostgreSQL store keeps, bounded in number and in bytes in all.

Each collection's :class:`~plait.stores.lexical_index.LexicalIndex` bounds its own postings
and score rows (``lexical_cache_bytes``, default 256 MiB); with up to :data:`MAX_INDEXES`
collections that alone allowed 4 GiB per store. :class:`Lexicons` also bounds the total:
every index counted as its cached postings, score rows and carried layers
(:attr:`~plait.stores.lexical_index.LexicalIndex.cached_bytes`) plus what it holds per chunk
(:func:`fixed_bytes`: row ids, lengths, chunk ids, a pair of score buffers), and past
``total_bytes`` (``lexical_total_bytes``, default :data:`DEFAULT_TOTAL`) the least
recently searched collections' indexes are dropped whole (the one searched last is kept:
each index's own budget is at most the total). A dropped collection's next search reads its
lengths and the postings of its terms again (same values, same scores).

It is an :class:`~collections.OrderedDict` (collection id -> (generation, index), least
recently searched first) whose changes go through its methods, under :attr:`Lexicons.lock`;
it also holds the epoch of the schema instance its indexes were read from
(:mod:`plait.stores.postgres_instances`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from plait.stores.lexical_index import LexicalIndex

__all__ = ["DEFAULT_TOTAL", "ID_OVERHEAD", "MAX_INDEXES", "Lexicons", "fixed_bytes"]

#: Collections whose lexical index one store keeps (least recently searched dropped).
MAX_INDEXES = 16
#: Bytes of lexical indexes one store keeps in all, by default.
DEFAULT_TOTAL = 1024 * 2**20
#: Bytes counted per chunk id besides its characters (an ASCII ``str`` and its list slot).
ID_OVERHEAD = 49 + 8

Entry = tuple[int, LexicalIndex]


def fixed_bytes(index: LexicalIndex) -> int:
    """Bytes ``index`` holds per chunk whatever is queried: its row ids and lengths, its
    chunk ids, and one pair of score buffers (8 B per chunk each)."""
    n = index.size
    return int(index.rowids.nbytes + index.lengths.nbytes + 16 * n + ID_OVERHEAD * n + index.id_chars)


class Lexicons(OrderedDict[int, Entry]):
    """Collection id -> (generation, its lexical index), bounded (see the module's docstring)."""

    def __init__(self, *, total_bytes: int = DEFAULT_TOTAL, max_entries: int = MAX_INDEXES) -> None:
        super().__init__()
        if total_bytes < 0:
            raise ValueError(f"lexical_total_bytes must be >= 0, got {total_bytes}")
        self.total_bytes = total_bytes
        self.max_entries = max_entries
        self.lock = threading.Lock()
        self.epoch = 0
        self._fixed: dict[int, tuple[LexicalIndex, int]] = {}  # collection id -> (index, its fixed bytes)

    def cached(self, cid: int) -> Entry | None:
        """``cid``'s entry, now the most recently searched."""
        with self.lock:
            found = self.get(cid)
            if found is not None:
                self.move_to_end(cid)
            return found

    def keep(self, cid: int, generation: int, index: LexicalIndex, *, epoch: int) -> None:
        """Cache ``index`` unless a newer generation's index is cached already, or it was
        read in another ``epoch``; then drop the least recently searched past the bounds."""
        with self.lock:
            known = self._fixed.get(cid)
        # O(chunks), outside the lock, once per index (a warm search keeps the same one again)
        fixed = known[1] if known is not None and known[0] is index else fixed_bytes(index)
        with self.lock:
            if epoch != self.epoch:
                return
            held = self.get(cid)
            if held is None or held[0] <= generation:
                self[cid] = (generation, index)
                self.move_to_end(cid)
                self._fixed[cid] = (index, fixed)
                self._trim()

    def drop(self, cid: int, held: Entry | None = None) -> None:
        """Forget ``cid``'s index (only if its entry is ``held``, when given)."""
        with self.lock:
            if held is None or self.get(cid) is held:
                self.pop(cid, None)
                self._fixed.pop(cid, None)

    def flush(self, epoch: int) -> None:
        """Drop every index; from now on only indexes read in ``epoch`` are kept."""
        with self.lock:
            self.clear()
            self._fixed.clear()
            self.epoch = epoch

    def trim(self) -> None:
        """Drop the least recently searched indexes past the bounds (after a query cached
        postings: the indexes grow between :meth:`keep` s)."""
        with self.lock:
            self._trim()

    @property
    def bytes(self) -> int:
        """Bytes the cached indexes count now."""
        with self.lock:
            return sum(self._count(cid, entry[1]) for cid, entry in self.items())

    def _count(self, cid: int, index: LexicalIndex) -> int:
        known = self._fixed.get(cid)
        fixed = known[1] if known is not None and known[0] is index else fixed_bytes(index)
        return fixed + index.cached_bytes

    def _trim(self) -> None:
        while len(self) > self.max_entries:
            cid, _ = self.popitem(last=False)
            self._fixed.pop(cid, None)
        total = sum(self._count(cid, entry[1]) for cid, entry in self.items())
        while total > self.total_bytes and len(self) > 1:
            cid, (_, index) = self.popitem(last=False)
            total -= self._count(cid, index)
            self._fixed.pop(cid, None)
