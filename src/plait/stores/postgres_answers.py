"""The answers of statements sent ahead, read as they arrive (review-7 #3).

A search sends its first statement ahead (:mod:`plait.stores.postgres_ahead`) and runs in
process meanwhile: the query embedding (a provider call: 100 ms to seconds for a remote
one, up to the guard's deadline when it hangs), the arms, a rerank. Had the search read
the answer only when it next read the store, the pooled connection would have stayed
checked out all that time, although the answer is there after about a millisecond: with
a few slow searches every connection of the pool is out, and indexing, ``ping`` and other
searches wait for one and time out.

An :class:`AnswerReader` (one thread per store, started with the first statement sent
ahead, ended after two idle seconds) waits for every connection in flight at once (a selector: epoll or poll, no limit
on descriptor numbers) and, as each answer completes, keeps it and gives the connection
back to the pool. The search then takes the answer (:meth:`Answer.wait`), already there
or soon. A connection is therefore out of the pool for the statement's round trip only,
whatever the search does meanwhile.

Closing the store (:meth:`AnswerReader.close`) reads the answers still in flight for at
most :data:`CLOSE_WAIT` seconds. A statement still unanswered then (the server, or the
network to it, stopped answering; a lock another session holds) fails with a
:class:`~plait.errors.StoreError` for the search waiting on it, its connection is closed
(the pool discards it) and one warning is logged: closing never hangs on the server.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable

import psycopg
from psycopg import pq

from plait.errors import StoreError

__all__ = ["CLOSE_WAIT", "Answer", "AnswerReader", "receive_step"]

log = logging.getLogger(__name__)

_IDLE = 2.0  # seconds without a statement in flight before the thread ends

#: Seconds :meth:`AnswerReader.close` waits for the answers still in flight; those not
#: complete then fail and their connections are closed.
CLOSE_WAIT = 5.0

_JOIN_MARGIN = 1.0  # seconds past the wait the thread gets to fail and give back what is left


def receive_step(conn: psycopg.Connection, results: list[pq.abc.PGresult]) -> pq.abc.PGresult | None:
    """Read what has arrived of the answer of the one statement sent on ``conn``
    (without waiting): the result once the answer is complete, else None (wait for the
    socket to be readable and call again). Raises the statement's error."""
    pg = conn.pgconn
    pg.consume_input()
    while not pg.is_busy():
        result = pg.get_result()
        if result is None:
            if len(results) != 1:  # pragma: no cover - one statement, one result
                raise StoreError(f"expected one result, got {len(results)}")
            if results[0].status != pq.ExecStatus.TUPLES_OK:
                raise psycopg.errors.error_from_result(results[0], encoding=conn.info.encoding)
            return results[0]
        results.append(result)
    return None


class Answer:
    """One statement's answer, read by the :class:`AnswerReader` (its connection given
    back as soon as it is complete)."""

    def __init__(self, conn: psycopg.Connection, give_back: Callable[[psycopg.Connection], None]) -> None:
        self.conn = conn
        self._give_back = give_back
        self._results: list[pq.abc.PGresult] = []
        self._done = threading.Event()
        self._result: pq.abc.PGresult | None = None
        self._error: BaseException | None = None

    def _step(self) -> bool:
        """Read what has arrived; True once complete (the connection then given back)."""
        try:
            result = receive_step(self.conn, self._results)
            if result is None:
                return False
            self._result = result
        except Exception as exc:  # noqa: BLE001 - handed to the search, which reads again and reports its own
            self._error = exc
        self._finish()
        return True

    def _finish(self) -> None:
        try:
            self._give_back(self.conn)
        except Exception as exc:  # noqa: BLE001 - a closed pool: the connection is gone with it
            log.debug("could not give back the connection of a statement sent ahead: %s", exc)
        self._done.set()

    def wait(self) -> pq.abc.PGresult:
        """The answer (waits for it); raises the statement's error."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        if self._result is None:  # pragma: no cover - set with _done
            raise StoreError("the statement sent ahead has no answer")
        return self._result


class AnswerReader:
    """A thread that reads the answers of this store's statements in flight."""

    def __init__(self, *, close_wait: float = CLOSE_WAIT) -> None:
        self._lock = threading.Lock()
        self._queued: list[Answer] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self._close_wait = close_wait
        self._deadline = float("inf")  # monotonic time the answers in flight are given up at
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def watch(self, answer: Answer) -> None:
        """Read ``answer`` as it arrives, and give its connection back then."""
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            self._queued.append(answer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="plait-pg-answers", daemon=True)
                self._thread.start()
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except BlockingIOError:  # already woken, not yet drained
            pass
        except OSError:  # pragma: no cover - closed
            pass

    def close(self) -> None:
        """Stop the thread. Answers still in flight are read first, for at most
        ``close_wait`` seconds (:data:`CLOSE_WAIT`): those not complete then fail with a
        :class:`~plait.errors.StoreError` and their connections are closed. Returns
        within about ``close_wait`` + 1 s whatever the server does."""
        with self._lock:
            self._closed = True
            self._deadline = min(self._deadline, time.monotonic() + self._close_wait)
            thread = self._thread
        self._wake()
        if thread is not None:
            thread.join(self._close_wait + _JOIN_MARGIN)
            if thread.is_alive():  # pragma: no cover - the thread gives up at the deadline
                log.warning(
                    "the reader of statements sent ahead did not stop within %.1f s; left running", self._close_wait
                )
                return  # its wake-up sockets stay open while it may still use them
        self._wake_r.close()
        self._wake_w.close()

    def _give_up(self, pending: dict[int, Answer], selector: selectors.BaseSelector) -> None:
        """Fail the answers still in flight at the close's deadline; their connections,
        given back busy, are closed by the pool."""
        log.warning(
            "closing the store: %d statement(s) sent ahead still had no answer after %.1f s; "
            "their connections are closed",
            len(pending), self._close_wait,
        )
        for fd, answer in list(pending.items()):
            selector.unregister(fd)
            del pending[fd]
            answer._error = StoreError(
                f"the store was closed before the server answered (waited {self._close_wait:.1f} s)"
            )
            answer._finish()

    def _run(self) -> None:
        pending: dict[int, Answer] = {}
        try:
            self._loop(pending)
        except BaseException as exc:  # never leave a search waiting for an answer
            log.warning("the reader of statements sent ahead stopped: %s", exc)
            with self._lock:
                self._closed = True
                left, self._queued = [*pending.values(), *self._queued], []
            for answer in left:
                answer._error = StoreError(f"the reader of statements sent ahead stopped: {exc}")
                answer._finish()
            raise

    def _loop(self, pending: dict[int, Answer]) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                with self._lock:
                    queued, self._queued = self._queued, []
                    closed, deadline = self._closed, self._deadline
                for answer in queued:
                    if not answer._step():
                        fd = answer.conn.pgconn.socket
                        pending[fd] = answer
                        selector.register(fd, selectors.EVENT_READ)
                if closed and not pending:
                    return
                timeout = None if pending else _IDLE
                if closed:  # answers in flight: read them until the close's deadline
                    timeout = deadline - time.monotonic()
                    if timeout <= 0:
                        self._give_up(pending, selector)
                        return
                events = selector.select(timeout)
                if not events and not pending:
                    with self._lock:
                        if not self._queued:  # idle: the next watch starts a thread again
                            self._thread = None
                            return
                for key, _ in events:
                    if key.fileobj is self._wake_r:
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except BlockingIOError:
                            pass
                        continue
                    fd = int(key.fd)
                    answer = pending[fd]
                    if answer._step():
                        selector.unregister(fd)
                        del pending[fd]
