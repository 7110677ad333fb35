"""Closing a PostgreSQL store never hangs on a statement the server does not answer
(:meth:`plait.stores.postgres_answers.AnswerReader.close`).

A search's first statement is sent ahead and read by the store's reader thread; closing
the store used to join that thread without a bound, and the thread waited for every
answer in flight: a server that stopped answering (or a statement blocked by another
session's lock, up to the 60 s statement timeout) held ``close()`` as long. Both stuck
answers here are real: a lock held by another session on a real PostgreSQL, and a real
PostgreSQL connection through a TCP relay on 127.0.0.1 that stops relaying (the server,
or the network to it, gone silent).
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from plait.errors import StoreError
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_answers import CLOSE_WAIT, Answer, AnswerReader
from plait.testing.pg import postgres_dsn, throwaway_schema
from slow_queries import SlowQueries


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-close-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_close_") as name:
        yield name


def _close_within(close: Any, bound: float) -> float:
    """Seconds ``close()`` took, run on another thread so that a close that hangs fails
    the test after ``bound`` seconds instead of hanging it."""
    took: list[float] = []

    def run() -> None:
        start = time.monotonic()
        close()
        took.append(time.monotonic() - start)

    closing = threading.Thread(target=run, daemon=True)
    closing.start()
    closing.join(bound)
    assert took, f"close() had not returned after {bound} s"
    return took[0]


def test_closing_a_store_whose_statement_sent_ahead_is_blocked_returns_within_the_bound(
    pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    """Another session holds ACCESS EXCLUSIVE on ``plait_collections``: the warm search's
    statement sent ahead waits on it server-side (the statement timeout is 60 s). close()
    returns after CLOSE_WAIT seconds, the search fails instead of waiting, and the lock
    holder's release finds nothing of the store left waiting."""
    folder = tmp_path / "d"
    folder.mkdir()
    for i in range(4):
        (folder / f"d{i}.md").write_text(f"# d {i}\n\nalpha retrieval engine number {i}\n")
    store = PostgresStore(pg_dsn, schema=schema)
    embedder = SlowQueries(dimension=16, model="hash-16")
    plait = Plait(store, embedder=embedder)
    plait.index(folder, collection="c")
    plait.search("alpha retrieval", collection="c", k=3)  # the row is now this store's last: sent ahead next
    locker = psycopg.connect(pg_dsn)
    try:
        locker.execute(sql.SQL("LOCK TABLE {}.plait_collections IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema)))
        embedder.delay = 1.0
        outcome: list[BaseException | int] = []

        def search() -> None:
            try:
                outcome.append(len(plait.search("engine number", collection="c", k=3).hits))
            except BaseException as exc:
                outcome.append(exc)

        searching = threading.Thread(target=search, daemon=True)
        searching.start()
        time.sleep(0.3)  # the statement is sent and blocked on the lock; the query is being embedded
        took = _close_within(store.close, CLOSE_WAIT + 2)
        assert took >= CLOSE_WAIT - 0.5, took  # the answers in flight were waited for first
    finally:
        locker.close()  # releases the lock
    # The search's statement sent ahead failed at the close; what it read next on its own
    # (waiting on the lock like any read, under the statement timeout) ended with the lock.
    searching.join(30)
    assert not searching.is_alive() and len(outcome) == 1, outcome


class _Relay:
    """A TCP relay on 127.0.0.1 to a PostgreSQL server (its Unix socket or TCP port); after
    :meth:`stop_answering` it reads and sends nothing more, and keeps the sockets open."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        host, port = str(params.get("host") or "localhost"), int(params.get("port") or 5432)
        self._target: tuple[int, Any] = (
            (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}") if host.startswith("/") else (socket.AF_INET, (host, port))
        )
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.dsn = make_conninfo(dsn, host="127.0.0.1", port=self._listener.getsockname()[1])
        self._silent = threading.Event()
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def stop_answering(self) -> None:
        self._silent.set()

    def close(self) -> None:
        self._stopped.set()
        for s in self._sockets:
            s.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
                server = socket.socket(self._target[0], socket.SOCK_STREAM)
                self._sockets += [client, server]
                server.connect(self._target[1])
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peer = {client: server, server: client}
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(client, selectors.EVENT_READ)
                selector.register(server, selectors.EVENT_READ)
                while not self._stopped.is_set():
                    if self._silent.is_set():
                        time.sleep(0.05)
                        continue
                    for key, _ in selector.select(0.05):
                        data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                        if not data:
                            return
                        peer[key.fileobj].sendall(data)  # type: ignore[index]
        except (OSError, ValueError):  # the relay closed under it
            return


def test_closing_the_reader_with_an_answer_that_never_comes_returns_within_the_bound(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A statement sent on a pooled connection to a server that has gone silent: close()
    returns after its wait, the answer fails with a StoreError, the pool has closed the
    connection, and one warning says so."""
    relay = _Relay(pg_dsn)
    pool = ConnectionPool(relay.dsn, min_size=1, max_size=1, kwargs={"autocommit": True}, open=True)
    reader = AnswerReader(close_wait=0.5)
    try:
        conn = pool.getconn(timeout=10)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # through the relay
        relay.stop_answering()
        conn.pgconn.send_query(b"SELECT 2")
        while conn.pgconn.flush():
            time.sleep(0.01)
        answer = Answer(conn, pool.putconn)
        reader.watch(answer)
        time.sleep(0.2)
        with caplog.at_level(logging.WARNING, logger="plait.stores.postgres_answers"):
            took = _close_within(reader.close, 1.5)
        assert took >= 0.4, took
        with pytest.raises(StoreError, match="closed before the server answered"):
            answer.wait()
        assert conn.closed  # given back busy: the pool closed it
        assert [r.message for r in caplog.records if "no answer" in r.message] == [
            "closing the store: 1 statement(s) sent ahead still had no answer after 0.5 s; "
            "their connections are closed"
        ]
    finally:
        relay.close()  # a reader still waiting (the old close) sees the connection end
        pool.close(timeout=1)
