"""The record tables (:mod:`plait.stores.records`) of a PostgreSQL store, on its pool."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from plait.stores.records import RecordsTx, Tables

__all__ = ["POSTGRES_TABLES", "PgRecords"]

POSTGRES_TABLES = Tables(
    runs="plait_refinery_runs",
    cards="plait_refinery_cards",
    keys="plait_api_keys",
    imports="plait_record_imports",
    seq="seq",
    dialect="postgres",
)


def _q(text: str) -> LiteralString:
    """``?`` placeholders as psycopg's ``%s`` (the record SQL is plait's own text)."""
    return text.replace("?", "%s")


@dataclass(frozen=True, slots=True)
class _Tx:
    conn: psycopg.Connection

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(_q(sql), tuple(params)).fetchall()

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.conn.execute(_q(sql), tuple(params)).rowcount


@dataclass(eq=False)
class PgRecords:
    """Records in the store's database: ``tx`` is the store's pooled transaction
    (committed on success, driver errors mapped to :class:`~plait.errors.StoreError`)."""

    tx: Callable[[], AbstractContextManager[psycopg.Connection]]
    label: str
    tables: Tables = POSTGRES_TABLES
    legacy_dir: Path | None = None

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.tx() as conn:
            return _Tx(conn).fetch(sql, params)

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self.tx() as conn:
            return _Tx(conn).write(sql, params)

    @contextmanager
    def transaction(self, lock: str) -> Iterator[RecordsTx]:
        with self.tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"plait.records:{lock}",))
            yield _Tx(conn)
