"""The PostgreSQL store's collection row, as a search reads it first (issue 26).

:data:`INFO` is one collection as :class:`~plait.types.CollectionInfo` reports it: the
chunk count the statistics triggers keep (``n_chunks``), the chunks without a vector (from
their partial index), the sources and the latest index time of its scopes.
:data:`INFO_SETTINGS` adds the settings and the collection's id and key
``(generation, revision)``: every ``Plait.search`` starts with it, so it is the one
statement of a warm search.

Counting the sources is the costly part of that statement: their rows, one per source
(0.55 ms of the statement's 0.58 ms for SciFact's 5,183 sources). A source row exists
exactly while the source holds chunks (:func:`~plait.stores.postgres_write.write_sources`
inserts it with its first chunk rows and deletes it with its last), so the number can
only change in a transaction that inserts or deletes chunk rows (which moves the
generation) or moves a chunk to another source in place (which moves the revision).
:class:`SourceCounts` therefore remembers the count read under each collection's
``(id, generation, revision)``; the statement takes that key and counts again only when
the row it reads has another one (a ``CASE`` whose other branch is never evaluated), so a
write by any process is counted by the next read. The chunks without a vector and the
scopes' latest index time are read every time (an index probe each: ``set_vectors`` and
``mark_scope_indexed`` change them, and cost nothing to read).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from plait.stores.postgres_keys import CHUNKS, GENERATION_OF, INSTANCE, REVISION
from plait.types import CollectionInfo

__all__ = ["INFO", "INFO_SETTINGS", "SourceCounts", "info_of"]

_COLUMNS = (
    f"SELECT p.name, p.provider, p.model, p.dimension, {CHUNKS}, "
    "(SELECT count(*) FROM plait_chunks c WHERE c.collection_id = p.id AND c.vector IS NULL), "
    "{sources}, p.created_at, "
    "(SELECT max(s.last_indexed_at) FROM plait_scopes s WHERE s.collection_id = p.id)"
)
_COUNT = "(SELECT count(*) FROM plait_sources s WHERE s.collection_id = p.id)"

#: Every column of :func:`info_of`; append ``WHERE`` / ``ORDER BY``.
INFO = _COLUMNS.format(sources=_COUNT) + " FROM plait_collections p"

#: :data:`INFO` of collection ``%(name)s`` with its settings, id, generation and revision
#: (columns 9-12; the revision as :data:`~plait.stores.postgres_keys.REVISION`) and the
#: schema instance (13-14, :data:`~plait.stores.postgres_keys.INSTANCE`); the sources
#: column is NULL when the row's id and key are ``%(cid)s``, ``%(generation)s``,
#: ``%(revision)s`` (the count is then the one :class:`SourceCounts` holds for them).
INFO_SETTINGS = (
    _COLUMNS.format(
        sources="CASE WHEN p.id = %(cid)s::int8 AND k.generation = %(generation)s::int8 "
        f"AND k.revision = %(revision)s::int8 THEN NULL ELSE {_COUNT} END"
    )
    + f", p.settings, p.id, k.generation, k.revision, {INSTANCE} FROM plait_collections p "
    f"CROSS JOIN LATERAL (SELECT {GENERATION_OF} AS generation, {REVISION} AS revision) AS k WHERE p.name = %(name)s"
)

#: The key no collection has: count the sources.
_UNKNOWN = (-1, -1, -1, 0)


def info_of(row: Sequence[Any], sources: int | None = None) -> CollectionInfo:
    """The :class:`CollectionInfo` of an :data:`INFO` row (``sources`` instead of its
    sources column when given)."""
    return CollectionInfo(
        name=row[0],
        embedder_provider=row[1],
        embedder_model=row[2],
        dimension=row[3],
        chunks=int(row[4]),
        chunks_without_vector=int(row[5]),
        sources=int(row[6]) if sources is None else sources,
        created_at=row[7],
        last_indexed_at=row[8],
    )


class SourceCounts:
    """Collection name -> (id, generation, revision, sources) as :data:`INFO_SETTINGS` last
    counted them. Thread-safe: a read passes the entry it was sent with to :meth:`info`."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[int, int, int, int]] = {}
        self._lock = threading.Lock()

    def params(self, name: str) -> tuple[dict[str, Any], tuple[int, int, int, int]]:
        """:data:`INFO_SETTINGS`'s parameters for ``name`` and the entry they name."""
        with self._lock:
            held = self._held.get(name, _UNKNOWN)
        return {"name": name, "cid": held[0], "generation": held[1], "revision": held[2]}, held

    def info(self, name: str, row: Sequence[Any], sent: tuple[int, int, int, int]) -> CollectionInfo:
        """The collection of :data:`INFO_SETTINGS`'s ``row``, read with the parameters of
        ``sent``: the count ``sent`` holds when the row left it out, else the row's (kept)."""
        if row[6] is None:
            return info_of(row, sent[3])
        entry = (int(row[10]), int(row[11]), int(row[12]), int(row[6]))
        with self._lock:
            self._held[name] = entry
        return info_of(row)

    def forget(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)

    def clear(self) -> None:
        """Forget every count (the schema was re-created or restored: the keys start again)."""
        with self._lock:
            self._held.clear()
