"""What a block of code sends to PostgreSQL, counted in round trips, for tests of the
PostgreSQL store.

Only the calling thread's statements count. The connection pool opens and configures
connections in its own threads while a search runs (search path, timeouts, pgvector's
type lookup): those statements are not the search's, and counting them made round-trip
tests fail now and then, whenever the pool grew during the block.

A round trip is one statement outside a pipeline, one pipeline (with every statement
sent in it), one ``COPY``, or the collection's read sent ahead
(:func:`plait.stores.postgres_ahead.send`)::

    with round_trips() as wire:
        store.lexical_search("c", ["alpha"], [], limit=3)
    assert len(wire.trips) == 1
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import psycopg
import pytest

import plait.stores.postgres_ahead as ahead

__all__ = ["Trip", "Wire", "round_trips"]

Kind = Literal["statement", "pipeline", "copy", "ahead"]


@dataclass
class Trip:
    """One round trip: how it went, and the statements it carried."""

    kind: Kind
    statements: list[str] = field(default_factory=list)


@dataclass
class Wire:
    """The round trips the calling thread made, in order."""

    made: list[Trip] = field(default_factory=list)

    @property
    def trips(self) -> list[list[str]]:
        """Each round trip's statements."""
        return [trip.statements for trip in self.made]

    @property
    def pipelines(self) -> list[list[str]]:
        """The statements of each pipeline."""
        return [trip.statements for trip in self.made if trip.kind == "pipeline"]

    @property
    def statements(self) -> list[str]:
        """Every statement, in order."""
        return [text for trip in self.made for text in trip.statements]


def _text(query: Any, conn: psycopg.Connection) -> str:
    return query if isinstance(query, str) else str(query.as_string(conn))


@contextmanager
def round_trips() -> Iterator[Wire]:
    """Count the calling thread's round trips to PostgreSQL while the block runs."""
    wire = Wire()
    caller = threading.get_ident()
    execute, pipeline, copy, send = (
        psycopg.Connection.execute,
        psycopg.Connection.pipeline,
        psycopg.Cursor.copy,
        ahead.send,
    )

    def ours() -> bool:
        return threading.get_ident() == caller

    def counted_execute(self: psycopg.Connection, query: Any, *args: Any, **kwargs: Any) -> Any:
        if ours():
            if self._pipeline is None or not wire.made:
                wire.made.append(Trip("statement", [_text(query, self)]))
            else:
                wire.made[-1].statements.append(_text(query, self))
        return execute(self, query, *args, **kwargs)

    def counted_pipeline(self: psycopg.Connection) -> Any:
        if ours() and self._pipeline is None:
            wire.made.append(Trip("pipeline"))
        return pipeline(self)

    def counted_copy(self: psycopg.Cursor[Any], statement: Any, *args: Any, **kwargs: Any) -> Any:
        if ours():
            wire.made.append(Trip("copy", [_text(statement, self.connection)]))
        return copy(self, statement, *args, **kwargs)

    def counted_send(conn: psycopg.Connection, params: Any, *, prepared: bool) -> None:
        if ours():
            wire.made.append(Trip("ahead", [ahead.STATEMENT]))  # sent by libpq itself
        send(conn, params, prepared=prepared)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(psycopg.Connection, "execute", counted_execute)
        mp.setattr(psycopg.Connection, "pipeline", counted_pipeline)
        mp.setattr(psycopg.Cursor, "copy", counted_copy)
        mp.setattr(ahead, "send", counted_send)
        yield wire
