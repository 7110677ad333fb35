"""The round-trip counter the PostgreSQL store's tests use (:mod:`plait.testing.pg_wire`).

Regression (stop 43's CI): the counters those tests each wrote counted every thread's
statements, so a connection the pool opened and configured in its own thread during a
search was counted as the search's (``[4, 3, 1, …]`` instead of ``[1, 1, 1, …]``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from plait.testing.pg import postgres_dsn
from plait.testing.pg_wire import round_trips


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-wire-") as dsn:
        yield dsn


def test_each_statement_pipeline_and_copy_is_one_round_trip(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn, round_trips() as wire:
        conn.execute("SELECT 1")
        with conn.pipeline():
            conn.execute("SELECT 2")
            conn.execute("SELECT 3")
        with conn.cursor() as cur, cur.copy("COPY (SELECT 4) TO STDOUT") as copy:
            assert [bytes(row) for row in copy] == [b"4\n"]
    assert [trip.kind for trip in wire.made] == ["statement", "pipeline", "copy"]
    assert wire.trips == [["SELECT 1"], ["SELECT 2", "SELECT 3"], ["COPY (SELECT 4) TO STDOUT"]]
    assert wire.pipelines == [["SELECT 2", "SELECT 3"]]
    assert wire.statements == ["SELECT 1", "SELECT 2", "SELECT 3", "COPY (SELECT 4) TO STDOUT"]


def test_another_thread_s_statements_are_not_counted(pg_dsn: str) -> None:
    """As a pool's worker configuring a new connection while the block runs."""

    def configure() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute("SELECT 'pool'")
            with other.pipeline():
                other.execute("SELECT 'pool again'")

    with psycopg.connect(pg_dsn, autocommit=True) as conn, round_trips() as wire:
        worker = threading.Thread(target=configure)
        worker.start()
        worker.join()
        conn.execute("SELECT 'search'")
    assert wire.trips == [["SELECT 'search'"]]


def test_the_counter_is_taken_off_after_the_block(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with round_trips() as wire:
            conn.execute("SELECT 1")
        conn.execute("SELECT 2")
    assert wire.statements == ["SELECT 1"]
