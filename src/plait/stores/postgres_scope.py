"""One search, one read of the collection's key: the PostgreSQL store's search scope.

A warm ``Plait.search`` needs three reads of the collection: its info and settings (the
first statement), then the arms and the page's chunk rows, each of which checks the
collection's ``(generation, revision)`` before answering from the in-process caches.
Inside :meth:`SearchScopes.scope` (opened by the service around one search, for the
current thread only) the first statement's read of the key is remembered, and the arms
and the chunk rows answer from caches of *that* key without checking it again: a warm
search is one round trip. What it sees is the collection as it was at the search's first
statement — every write committed before the search began (by any process) is seen, one
committed while it runs is seen by the next search; before, the arms and the chunk rows
could each see a different moment. A search that needs anything the caches lack (a term's
postings, a filter's row ids, a matrix of another key) reads it as before, with the
check, and the scope then remembers the key that check read.

A scope holds four integers per collection, lives as long as the ``with`` block, and is
never shared between threads (``threading.local``).

A scope opened with ``ahead=True`` (the service's searches) may also answer that first
statement from the last one while it is in flight (:mod:`plait.stores.postgres_ahead`):
``ahead`` allows it, ``sent`` is set while it is in flight, and ``held`` records whether
the row it brought back was the one the search ran with.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["SearchScopes", "Seen"]


@dataclass
class Seen:
    """What the scope's reads last found of the collection (None until the first read)."""

    cid: int | None = None
    dimension: int | None = None
    key: tuple[int, int] | None = None
    chunks: int = 0
    #: The first read may be answered ahead (:mod:`plait.stores.postgres_ahead`).
    ahead: bool = False
    #: A read answered ahead is in flight.
    sent: bool = False
    #: Whether the read answered ahead found what the search ran with (None: none settled).
    held: bool | None = None

    def saw(self, cid: int, dimension: int | None, key: tuple[int, int], chunks: int) -> None:
        self.cid, self.dimension, self.key, self.chunks = cid, dimension, key, chunks


class SearchScopes:
    """The open search scopes of each thread, by collection name."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _open(self) -> dict[str, Seen]:
        scopes: dict[str, Seen] | None = getattr(self._local, "scopes", None)
        if scopes is None:
            scopes = self._local.scopes = {}
        return scopes

    @contextmanager
    def scope(self, collection: str, *, ahead: bool = False) -> Iterator[Seen]:
        """Reads of ``collection`` in this thread share one key until the block ends."""
        scopes = self._open()
        outer = scopes.get(collection)
        scopes[collection] = seen = Seen(ahead=ahead)
        try:
            yield seen
        finally:
            if outer is None:
                scopes.pop(collection, None)
            else:
                scopes[collection] = outer

    def get(self, collection: str) -> Seen | None:
        """The open scope's record of ``collection`` in this thread, if any."""
        return self._open().get(collection)
