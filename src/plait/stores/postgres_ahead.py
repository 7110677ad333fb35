"""A search's first statement sent ahead: the PostgreSQL store's check in flight while the
search runs in process (issue 26).

A warm ``Plait.search`` on PostgreSQL is one statement (:data:`~plait.stores.postgres_info.INFO_SETTINGS`:
the collection, its settings and its key) and then work in this process (both arms from
the caches of that key, fusion, the page's rows). Waiting for that statement cost more
than its execution: on a busy machine the server's backend has to be woken and scheduled
(1.2 ms inside a search, 0.5 ms back to back, 0.07 ms of execution).

Inside a search scope opened with ``ahead=True`` (the service's searches), when this
store has read the collection before, :meth:`PostgresInfo.collection_with_settings` sends
the statement and answers at once with the row it read last time; the search runs on
those values while the server answers. :meth:`PostgresInfo.ahead_held` (called by the
service before it returns the result) then reads the row the statement brought back and
compares it, byte for byte, with the one the search ran with. Equal: the result is
exactly what the search would have returned had it waited (every value it read is the
same, and the caches are keyed by the same generation and revision), as of a snapshot
taken after the search began: every write committed before the search began is seen.
Different (a write, a settings change, the collection re-created or deleted meanwhile):
the service runs the search again, without sending ahead, and returns that. No
staleness window; the price of a changed collection is one more round trip.

The statement goes on a pooled connection held until its answer has arrived: the store's
:class:`~plait.stores.postgres_answers.AnswerReader` thread reads it as it arrives and
gives the connection back then, so the connection is out of the pool for one round trip
whatever the search does meanwhile (a slow query embedding, a rerank). Any other read or
write of this store on the search's thread takes the answer first
(:meth:`PostgresInfo._settle`), so a thread never holds two and a pool of one connection
still serves every search. When no connection is idle the search reads as before. The
statement is prepared once per connection (unnamed when the store's ``prepare`` is
False) and its row decoded with psycopg's own loaders (:class:`psycopg.adapt.Transformer`),
so the values are those a cursor gives.
"""

from __future__ import annotations

import logging
import selectors
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer

from plait.errors import StoreError
from plait.stores.postgres_answers import Answer, AnswerReader, receive_step
from plait.stores.postgres_info import INFO_SETTINGS, SourceCounts
from plait.stores.postgres_rows import PostgresRows
from plait.stores.postgres_scope import Seen
from plait.types import CollectionInfo

__all__ = ["STATEMENT", "PostgresInfo", "send"]

log = logging.getLogger(__name__)

#: :data:`~plait.stores.postgres_info.INFO_SETTINGS` with libpq's positional parameters.
STATEMENT = (
    INFO_SETTINGS.replace("%(name)s", "$1")
    .replace("%(cid)s", "$2")
    .replace("%(generation)s", "$3")
    .replace("%(revision)s", "$4")
)
_NAME = b"plait_info_v1"
_SOURCES = 6  # the sources column: NULL when the key sent is the row's

Raw = tuple[bytes | None, ...]

_SELECTOR: type[selectors.BaseSelector] = getattr(selectors, "PollSelector", selectors.DefaultSelector)


@dataclass(frozen=True)
class _Last:
    """The row a collection's last read brought back: its raw values (the sources column
    as NULL, as an ahead read of the same key brings it back) and what was made of them."""

    raw: Raw
    info: CollectionInfo
    settings: dict[str, Any]
    seen: tuple[int, int | None, tuple[int, int], int]  # id, dimension, key, chunks
    sent: tuple[int, int, int, int]  # the key and sources count the next read sends


@dataclass
class _Flight:
    """A statement in flight (its ``answer`` read as it arrives) for ``seen``'s scope,
    expected to bring back ``last``."""

    answer: Answer
    seen: Seen
    last: _Last


def send(conn: psycopg.Connection, params: Sequence[Any], *, prepared: bool) -> None:
    """Send :data:`STATEMENT` with ``params`` (name, id, generation, revision) on ``conn``
    (idle, autocommit) without waiting for the answer."""
    pg = conn.pgconn
    values = [str(p).encode(conn.info.encoding) for p in params]
    if prepared:
        pg.send_query_prepared(_NAME, values)
    else:
        pg.send_query_params(STATEMENT.encode(), values)
    while pg.flush():  # 1: more to write (a nonblocking connection)
        _wait(pg.socket, selectors.EVENT_WRITE)


def _wait(fd: int, event: int) -> None:
    """Wait until ``fd`` is ready for ``event``: poll (no epoll descriptor to create per
    wait) where there is one, not ``select.select``, which refuses descriptors at or above
    FD_SETSIZE (1024)."""
    with _SELECTOR() as selector:
        selector.register(fd, event)
        selector.select()


def _receive(conn: psycopg.Connection) -> pq.abc.PGresult:
    """The answer of the statement :func:`send` sent (waits for it)."""
    results: list[pq.abc.PGresult] = []
    while (result := receive_step(conn, results)) is None:
        _wait(conn.pgconn.socket, selectors.EVENT_READ)
    return result


def _take(answer: Answer) -> pq.abc.PGresult:
    """The answer of a statement sent ahead, read by the store's :class:`AnswerReader`."""
    return answer.wait()


def _raw(result: pq.abc.PGresult) -> Raw | None:
    if result.ntuples == 0:
        return None
    values = [result.get_value(0, i) for i in range(result.nfields)]
    values[_SOURCES] = None
    return tuple(None if v is None else bytes(v) for v in values)


class PostgresInfo(PostgresRows):
    """:meth:`collection_with_settings` and :meth:`get_collection` of
    :class:`~plait.stores.postgres.PostgresStore`, sent ahead inside a search scope."""

    def __init__(self, dsn: str, **options: Any) -> None:
        self._source_counts = SourceCounts()
        self._last: dict[str, _Last] = {}
        self._flights = threading.local()
        self._prepared: weakref.WeakKeyDictionary[psycopg.Connection, bool] = weakref.WeakKeyDictionary()
        self._answers = AnswerReader()
        super().__init__(dsn, **options)

    def close(self) -> None:
        self._answers.close()
        super().close()

    # scopes ------------------------------------------------------------------------
    @contextmanager
    def search_scope(self, collection: str, *, ahead: bool = False) -> Iterator[None]:
        """One read of ``collection``'s state for this thread's search
        (:mod:`plait.stores.postgres_scope`); ``ahead``: that read may be answered from
        the last one while it is in flight (see the module docstring)."""
        with self._scopes.scope(collection, ahead=ahead) as seen:
            try:
                yield
            finally:
                if seen.sent:
                    self._settle()

    def ahead_held(self, collection: str) -> bool:
        """False when this thread's open scope of ``collection`` answered its first read
        ahead and the statement brought back something else (run the search again)."""
        seen = self._scopes.get(collection)
        if seen is None:
            return True
        if seen.sent:
            self._settle()
        return seen.held is not False

    def _settle(self) -> None:
        """Take the answer of this thread's statement in flight, if any (its connection is
        given back by the reader as soon as it has arrived)."""
        flight: _Flight | None = getattr(self._flights, "flight", None)
        if flight is None:
            return
        self._flights.flight = None
        flight.seen.sent = False
        try:
            with self._errors():
                result = _take(flight.answer)
            flight.seen.held = _raw(result) == flight.last.raw
            if not flight.seen.held:
                self._last.pop(flight.last.info.name, None)
        except Exception as exc:  # noqa: BLE001 - any failure: the search runs again, and reads (and reports) it itself
            log.debug("the statement sent ahead failed: %s", exc)
            flight.seen.held = False

    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection]:
        self._settle()  # one connection per thread at a time
        with super()._read() as conn:
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        self._settle()
        with super()._tx() as conn:
            yield conn

    # collections -------------------------------------------------------------------
    def get_collection(self, name: str) -> CollectionInfo | None:
        last = self._read_info(name)
        return None if last is None else last.info

    def collection_with_settings(self, name: str) -> tuple[CollectionInfo, dict[str, Any]] | None:
        """The collection and its settings in one statement (a search's first read; its
        key is what the rest of an open search scope answers from)."""
        seen = self._scopes.get(name)
        last = self._last.get(name)
        ahead = seen is not None and seen.ahead and not seen.sent and seen.held is None
        if ahead and seen is not None and last is not None and self._send_ahead(seen, last):
            self._saw(name, *last.seen)
            return last.info.model_copy(), dict(last.settings)
        read = self._read_info(name)
        if read is None:
            return None
        self._saw(name, *read.seen)
        return read.info, dict(read.settings)

    def _send_ahead(self, seen: Seen, last: _Last) -> bool:
        """Send the statement for ``seen``'s scope on an idle pooled connection (False:
        none idle, or the statement could not be sent)."""
        if getattr(self._flights, "flight", None) is not None:
            return False
        try:
            conn = self._pool.getconn(timeout=0.001)
        except psycopg.Error:  # none idle (PoolTimeout), the pool closed (PoolClosed), ...:
            return False  # read as before, which reports the error as a StoreError
        try:
            prepared = self._prepare_on(conn)
            send(conn, (last.info.name, *last.sent[:3]), prepared=prepared)
            answer = Answer(conn, self._pool.putconn)
            self._answers.watch(answer)  # the connection back in the pool once answered
        except (psycopg.Error, StoreError) as exc:
            log.debug("could not send the collection read ahead: %s", exc)
            self._pool.putconn(conn)
            return False
        self._flights.flight = _Flight(answer, seen, last)
        seen.sent = True
        return True

    def _prepare_on(self, conn: psycopg.Connection) -> bool:
        """Prepare :data:`STATEMENT` on ``conn`` once (False: the store prepares nothing)."""
        if not self._prepare:
            return False
        if not self._prepared.get(conn):
            result = conn.pgconn.prepare(_NAME, STATEMENT.encode())
            if result.status != pq.ExecStatus.COMMAND_OK:
                raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
            self._prepared[conn] = True
        return True

    def _flush(self, epoch: int) -> None:
        super()._flush(epoch)
        self._source_counts.clear()
        self._last.clear()

    def _read_info(self, name: str) -> _Last | None:
        """:data:`STATEMENT`'s row of ``name``, waited for (None: no such collection)."""
        epoch = self._instances.epoch
        params, sent = self._source_counts.params(name)
        with self._read() as conn:
            send(conn, (name, params["cid"], params["generation"], params["revision"]), prepared=self._prepare_on(conn))
            result = _receive(conn)
            raw = _raw(result)
            row = None
            if raw is not None:
                loader = Transformer.from_context(conn)
                loader.set_pgresult(result)
                row = loader.load_row(0, tuple)
        if raw is None or row is None:
            self._source_counts.forget(name)
            self._last.pop(name, None)
            return None
        if self._instances.observe((int(row[13]), row[14])) != epoch and row[6] is None:
            return self._read_info(name)  # another schema instance: count its sources
        info = self._source_counts.info(name, row, sent)
        cid, key = int(row[10]), (int(row[11]), int(row[12]))
        last = _Last(raw, info, dict(row[9]), (cid, row[3], key, int(row[4])), (cid, *key, info.sources))
        self._last[name] = last
        return last
