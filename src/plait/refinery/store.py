"""Persistence of refinery runs and FAQ cards in their own small SQLite file.

The file is separate from the chunk store (``<store dir>/refinery.db`` by default, like
the API keys' ``keys.db``), so runs and cards work with every
:class:`~plait.stores.base.Store` backend without growing its protocol. Rows are keyed
by collection. The file is opened in WAL mode with a busy timeout, so a detached
worker process can write progress while the CLI or the HTTP API reads it.

Timestamps are stored as epoch seconds (so staleness is a subtraction) and shown as
ISO 8601 UTC strings in the models.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plait.errors import ConflictError, NotFoundError, StoreError, ValidationError
from plait.refinery.models import (
    CardMode,
    CardStatus,
    FaqCard,
    RefineryRun,
    RunProgress,
    RunStatus,
)

__all__ = ["RefineryStore", "default_refinery_path", "iso"]

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS runs (
        id               TEXT PRIMARY KEY,
        collection       TEXT NOT NULL,
        status           TEXT NOT NULL,
        mode             TEXT NOT NULL,
        chunks_scanned   INTEGER NOT NULL DEFAULT 0,
        chunks_total     INTEGER NOT NULL DEFAULT 0,
        cards_made       INTEGER NOT NULL DEFAULT 0,
        cards_merged     INTEGER NOT NULL DEFAULT 0,
        llm_calls        INTEGER NOT NULL DEFAULT 0,
        groups_skipped   INTEGER NOT NULL DEFAULT 0,
        created_at       REAL NOT NULL,
        started_at       REAL,
        finished_at      REAL,
        heartbeat_at     REAL,
        pid              INTEGER,
        error            TEXT,
        note             TEXT,
        cancel_requested INTEGER NOT NULL DEFAULT 0
    )
    """,
    "CREATE INDEX IF NOT EXISTS runs_by_collection ON runs (collection, created_at)",
    """
    CREATE TABLE IF NOT EXISTS cards (
        id          TEXT PRIMARY KEY,
        collection  TEXT NOT NULL,
        question    TEXT NOT NULL,
        answer      TEXT NOT NULL,
        sources     TEXT NOT NULL,
        status      TEXT NOT NULL,
        mode        TEXT NOT NULL,
        run_id      TEXT,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS cards_by_collection ON cards (collection, status)",
)

_RUN_COLUMNS = (
    "id, collection, status, mode, chunks_scanned, chunks_total, cards_made, cards_merged, "
    "llm_calls, groups_skipped, created_at, started_at, finished_at, heartbeat_at, pid, error, "
    "note, cancel_requested"
)
_CARD_COLUMNS = "id, collection, question, answer, sources, status, mode, run_id, created_at, updated_at"


def iso(epoch: float | None) -> str | None:
    """Epoch seconds as an ISO 8601 UTC string (milliseconds), or None."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def default_refinery_path(store_path: str | Path | None) -> Path:
    """``refinery.db`` next to a file store; ``./.plait/refinery.db`` otherwise."""
    if store_path is None:
        return Path(".plait") / "refinery.db"
    text = str(store_path)
    text = text.removeprefix("sqlite:///")
    if "://" in text or text == ":memory:":
        return Path(".plait") / "refinery.db"
    return Path(text).expanduser().parent / "refinery.db"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class RefineryStore:
    """Runs and cards in one SQLite file (thread-safe; several processes may share it)."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), timeout=timeout, check_same_thread=False, isolation_level=None
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                self._db.execute(statement)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the refinery file {self.path}: {exc}") from exc
        self._lock = threading.Lock()

    @contextmanager
    def _cursor(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise StoreError(f"refinery file {self.path}: {exc}") from exc

    # runs ------------------------------------------------------------------------
    def create_run(
        self, collection: str, mode: CardMode, *, pid: int | None = None, exclusive: bool = False
    ) -> RefineryRun:
        """A new run in ``queued``. With ``exclusive``, :class:`ConflictError` when the
        collection already has a queued or running run — checked and inserted in one
        write transaction, so two processes starting runs at once cannot both succeed."""
        run_id = _new_id("run")
        with self._cursor() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                if exclusive:
                    active = db.execute(
                        "SELECT id, status FROM runs WHERE collection = ? AND status IN (?, ?) "
                        "ORDER BY created_at LIMIT 1",
                        (collection, RunStatus.QUEUED.value, RunStatus.RUNNING.value),
                    ).fetchone()
                    if active is not None:
                        raise ConflictError(
                            f"collection {collection!r} already has an active refinery run {active[0]} "
                            f"({active[1]}); cancel it or wait for it to finish"
                        )
                db.execute(
                    "INSERT INTO runs (id, collection, status, mode, created_at, pid) VALUES (?, ?, ?, ?, ?, ?)",
                    (run_id, collection, RunStatus.QUEUED.value, mode.value, time.time(), pid),
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RefineryRun:
        with self._cursor() as db:
            row = db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"refinery run {run_id!r} does not exist")
        return _run(row)

    def list_runs(self, collection: str | None = None, *, limit: int = 50) -> list[RefineryRun]:
        """Runs, newest first (of one collection when given)."""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs"
        params: list[Any] = []
        if collection is not None:
            sql += " WHERE collection = ?"
            params.append(collection)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        params.append(limit)
        with self._cursor() as db:
            rows = db.execute(sql, params).fetchall()
        return [_run(r) for r in rows]

    def active_runs(self, collection: str | None = None) -> list[RefineryRun]:
        """Runs in ``queued`` or ``running``."""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE status IN (?, ?)"
        params: list[Any] = [RunStatus.QUEUED.value, RunStatus.RUNNING.value]
        if collection is not None:
            sql += " AND collection = ?"
            params.append(collection)
        with self._cursor() as db:
            rows = db.execute(sql + " ORDER BY created_at", params).fetchall()
        return [_run(r) for r in rows]

    def claim_run(self, run_id: str, pid: int) -> bool:
        """``queued`` → ``running`` for this worker; False if the run is not queued."""
        now = time.time()
        with self._cursor() as db:
            cursor = db.execute(
                "UPDATE runs SET status = ?, started_at = ?, heartbeat_at = ?, pid = ? "
                "WHERE id = ? AND status = ?",
                (RunStatus.RUNNING.value, now, now, pid, run_id, RunStatus.QUEUED.value),
            )
        return cursor.rowcount == 1

    def update_progress(self, run_id: str, progress: RunProgress) -> None:
        """Write progress and beat the heart."""
        fields = progress.model_dump()
        with self._cursor() as db:
            db.execute(
                "UPDATE runs SET chunks_scanned = ?, chunks_total = ?, cards_made = ?, "
                "cards_merged = ?, llm_calls = ?, groups_skipped = ?, heartbeat_at = ? WHERE id = ?",
                (
                    fields["chunks_scanned"],
                    fields["chunks_total"],
                    fields["cards_made"],
                    fields["cards_merged"],
                    fields["llm_calls"],
                    fields["groups_skipped"],
                    time.time(),
                    run_id,
                ),
            )

    def heartbeat(self, run_id: str) -> None:
        with self._cursor() as db:
            db.execute(
                "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND status = ?",
                (time.time(), run_id, RunStatus.RUNNING.value),
            )

    def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        error: str | None = None,
        note: str | None = None,
        only_if: Sequence[RunStatus] = (RunStatus.QUEUED, RunStatus.RUNNING),
    ) -> bool:
        """Move an unfinished run to a final status; False if it had already finished."""
        if not status.finished:
            raise ValidationError(f"{status.value!r} is not a final run status")
        marks = ",".join("?" * len(only_if))
        with self._cursor() as db:
            cursor = db.execute(
                f"UPDATE runs SET status = ?, finished_at = ?, error = ?, note = COALESCE(?, note) "
                f"WHERE id = ? AND status IN ({marks})",
                (status.value, time.time(), error, note, run_id, *[s.value for s in only_if]),
            )
        return cursor.rowcount == 1

    def request_cancel(self, run_id: str) -> None:
        with self._cursor() as db:
            db.execute("UPDATE runs SET cancel_requested = 1 WHERE id = ?", (run_id,))

    def cancel_requested(self, run_id: str) -> bool:
        with self._cursor() as db:
            row = db.execute("SELECT cancel_requested FROM runs WHERE id = ?", (run_id,)).fetchone()
        return bool(row and row[0])

    def raw_heartbeat(self, run_id: str) -> tuple[float | None, int | None]:
        """(heartbeat epoch seconds, pid) of a run, for staleness checks."""
        with self._cursor() as db:
            row = db.execute("SELECT heartbeat_at, created_at, pid FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None, None
        return (row[0] if row[0] is not None else row[1]), row[2]

    # cards -----------------------------------------------------------------------
    def add_card(
        self,
        collection: str,
        *,
        question: str,
        answer: str,
        sources: Sequence[str],
        mode: CardMode,
        run_id: str | None = None,
        status: CardStatus = CardStatus.DRAFT,
    ) -> FaqCard:
        card_id = _new_id("card")
        now = time.time()
        with self._cursor() as db:
            db.execute(
                f"INSERT INTO cards ({_CARD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    card_id, collection, question, answer, json.dumps(list(sources)),
                    status.value, mode.value, run_id, now, now,
                ),
            )
        return self.get_card(collection, card_id)

    def get_card(self, collection: str, card_id: str) -> FaqCard:
        with self._cursor() as db:
            row = db.execute(
                f"SELECT {_CARD_COLUMNS} FROM cards WHERE id = ? AND collection = ?", (card_id, collection)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"FAQ card {card_id!r} does not exist in collection {collection!r}")
        return _card(row)

    def find_cards(self, collection: str, card_ids: Sequence[str]) -> dict[str, FaqCard]:
        """The cards with these ids that exist in the collection."""
        if not card_ids:
            return {}
        marks = ",".join("?" * len(card_ids))
        with self._cursor() as db:
            rows = db.execute(
                f"SELECT {_CARD_COLUMNS} FROM cards WHERE collection = ? AND id IN ({marks})",
                (collection, *card_ids),
            ).fetchall()
        return {row[0]: _card(row) for row in rows}

    def list_cards(
        self, collection: str, *, status: CardStatus | None = None
    ) -> list[FaqCard]:
        """Cards of a collection, oldest first (of one status when given)."""
        sql = f"SELECT {_CARD_COLUMNS} FROM cards WHERE collection = ?"
        params: list[Any] = [collection]
        if status is not None:
            sql += " AND status = ?"
            params.append(status.value)
        with self._cursor() as db:
            rows = db.execute(sql + " ORDER BY created_at, rowid", params).fetchall()
        return [_card(r) for r in rows]

    def update_card(self, collection: str, card_id: str, changes: Mapping[str, Any]) -> FaqCard:
        """Change ``question``, ``answer``, ``sources`` and/or ``status``."""
        allowed = {"question", "answer", "sources", "status"}
        unknown = set(changes) - allowed
        if unknown:
            raise ValidationError(f"cannot change {sorted(unknown)} of a card; allowed: {sorted(allowed)}")
        self.get_card(collection, card_id)  # NotFoundError first
        sets, params = [], []
        for name in sorted(changes):
            value = changes[name]
            if name == "sources":
                value = json.dumps(list(value))
            elif name == "status":
                value = CardStatus(value).value
            sets.append(f"{name} = ?")
            params.append(value)
        sets.append("updated_at = ?")
        params.append(time.time())
        with self._cursor() as db:
            db.execute(
                f"UPDATE cards SET {', '.join(sets)} WHERE id = ? AND collection = ?",
                (*params, card_id, collection),
            )
        return self.get_card(collection, card_id)

    def count_cards(self, collection: str, *, exclude: CardStatus | None = None) -> int:
        sql = "SELECT COUNT(*) FROM cards WHERE collection = ?"
        params: list[Any] = [collection]
        if exclude is not None:
            sql += " AND status != ?"
            params.append(exclude.value)
        with self._cursor() as db:
            return int(db.execute(sql, params).fetchone()[0])

    def delete_collection(self, collection: str) -> tuple[int, int]:
        """Remove every run and card of a collection; (runs, cards) removed."""
        with self._cursor() as db:
            runs = db.execute("DELETE FROM runs WHERE collection = ?", (collection,)).rowcount
            cards = db.execute("DELETE FROM cards WHERE collection = ?", (collection,)).rowcount
        return runs, cards

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _run(row: Sequence[Any]) -> RefineryRun:
    progress = RunProgress(
        chunks_scanned=row[4],
        chunks_total=row[5],
        cards_made=row[6],
        cards_merged=row[7],
        llm_calls=row[8],
        groups_skipped=row[9],
    )
    return RefineryRun(
        id=row[0],
        collection=row[1],
        status=RunStatus(row[2]),
        mode=CardMode(row[3]),
        progress=progress,
        created_at=iso(row[10]) or "",
        started_at=iso(row[11]),
        finished_at=iso(row[12]),
        heartbeat_at=iso(row[13]),
        pid=row[14],
        error=row[15],
        note=row[16],
        cancel_requested=bool(row[17]),
    )


def _card(row: Sequence[Any]) -> FaqCard:
    return FaqCard(
        id=row[0],
        collection=row[1],
        question=row[2],
        answer=row[3],
        sources=json.loads(row[4]),
        status=CardStatus(row[5]),
        mode=CardMode(row[6]),
        run_id=row[7],
        created_at=iso(row[8]) or "",
        updated_at=iso(row[9]) or "",
    )
