"""Persistence of refinery runs and FAQ cards in the store's record tables.

Runs and cards live in the store itself (:meth:`~plait.stores.base.Store.records`:
tables in SQLite and PostgreSQL, a sidecar file for Milvus), so two servers on one
database share them; rows are keyed by collection. ``RefineryStore(path)`` still opens
a stand-alone file in the former ``refinery.db`` layout. A detached worker process
writes progress while the CLI or the HTTP API reads it (WAL, busy timeout; on
PostgreSQL, ordinary transactions).

Timestamps are stored as epoch seconds (so staleness is a subtraction) and shown as
ISO 8601 UTC strings in the models.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plait.errors import ConflictError, NotFoundError, ValidationError
from plait.refinery.models import (
    CardMode,
    CardStatus,
    FaqCard,
    RefineryRun,
    RunProgress,
    RunStatus,
)
from plait.stores.records import Records, SqliteRecords, open_records_file

__all__ = ["RefineryStore", "default_refinery_path", "iso"]

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
    """Where the former ``refinery.db`` of a store was: next to a file store,
    ``./.plait/refinery.db`` otherwise (imported into the store on first open)."""
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
    """Runs and cards in a store's records, or in a stand-alone file ``path``
    (thread-safe; several processes may share them)."""

    def __init__(self, records: Records | str | Path, *, timeout: float = 30.0) -> None:
        if isinstance(records, str | Path):
            self.path: Path | None = Path(records)
            records = open_records_file(self.path, timeout=timeout)
        else:
            self.path = None
        self.records = records
        self._t = records.tables

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.records.fetch(self._t.sql(sql), params)

    def _write(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.records.write(self._t.sql(sql), params)

    # runs ------------------------------------------------------------------------
    def create_run(
        self, collection: str, mode: CardMode, *, pid: int | None = None, exclusive: bool = False
    ) -> RefineryRun:
        """A new run in ``queued``. With ``exclusive``, :class:`ConflictError` when the
        collection already has a queued or running run — checked and inserted in one
        write transaction, so two processes starting runs at once cannot both succeed."""
        run_id = _new_id("run")
        t = self._t
        with self.records.transaction(f"refinery:{collection}") as tx:
            if exclusive:
                active = tx.fetch(
                    t.sql("SELECT id, status FROM {runs} WHERE collection = ? AND status IN (?, ?) "
                          "ORDER BY created_at LIMIT 1"),
                    (collection, RunStatus.QUEUED.value, RunStatus.RUNNING.value),
                )
                if active:
                    raise ConflictError(
                        f"collection {collection!r} already has an active refinery run {active[0][0]} "
                        f"({active[0][1]}); cancel it or wait for it to finish"
                    )
            tx.write(
                t.sql("INSERT INTO {runs} (id, collection, status, mode, created_at, pid) VALUES (?, ?, ?, ?, ?, ?)"),
                (run_id, collection, RunStatus.QUEUED.value, mode.value, time.time(), pid),
            )
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RefineryRun:
        rows = self._fetch(f"SELECT {_RUN_COLUMNS} FROM {{runs}} WHERE id = ?", (run_id,))
        if not rows:
            raise NotFoundError(f"refinery run {run_id!r} does not exist")
        return _run(rows[0])

    def list_runs(self, collection: str | None = None, *, limit: int = 50) -> list[RefineryRun]:
        """Runs, newest first (of one collection when given)."""
        sql = f"SELECT {_RUN_COLUMNS} FROM {{runs}}"
        params: list[Any] = []
        if collection is not None:
            sql += " WHERE collection = ?"
            params.append(collection)
        sql += " ORDER BY created_at DESC, {seq} DESC LIMIT ?"
        params.append(limit)
        return [_run(r) for r in self._fetch(sql, params)]

    def active_runs(self, collection: str | None = None) -> list[RefineryRun]:
        """Runs in ``queued`` or ``running``."""
        sql = f"SELECT {_RUN_COLUMNS} FROM {{runs}} WHERE status IN (?, ?)"
        params: list[Any] = [RunStatus.QUEUED.value, RunStatus.RUNNING.value]
        if collection is not None:
            sql += " AND collection = ?"
            params.append(collection)
        return [_run(r) for r in self._fetch(sql + " ORDER BY created_at", params)]

    def claim_run(self, run_id: str, pid: int) -> bool:
        """``queued`` → ``running`` for this worker; False if the run is not queued."""
        now = time.time()
        changed = self._write(
            "UPDATE {runs} SET status = ?, started_at = ?, heartbeat_at = ?, pid = ? "
            "WHERE id = ? AND status = ?",
            (RunStatus.RUNNING.value, now, now, pid, run_id, RunStatus.QUEUED.value),
        )
        return changed == 1

    def update_progress(self, run_id: str, progress: RunProgress) -> None:
        """Write progress and beat the heart."""
        fields = progress.model_dump()
        self._write(
            "UPDATE {runs} SET chunks_scanned = ?, chunks_total = ?, cards_made = ?, "
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
        self._write(
            "UPDATE {runs} SET heartbeat_at = ? WHERE id = ? AND status = ?",
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
        changed = self._write(
            "UPDATE {runs} SET status = ?, finished_at = ?, error = ?, note = COALESCE(?, note) "
            f"WHERE id = ? AND status IN ({marks})",
            (status.value, time.time(), error, note, run_id, *[s.value for s in only_if]),
        )
        return changed == 1

    def request_cancel(self, run_id: str) -> None:
        self._write("UPDATE {runs} SET cancel_requested = 1 WHERE id = ?", (run_id,))

    def cancel_requested(self, run_id: str) -> bool:
        rows = self._fetch("SELECT cancel_requested FROM {runs} WHERE id = ?", (run_id,))
        return bool(rows and rows[0][0])

    def raw_heartbeat(self, run_id: str) -> tuple[float | None, int | None]:
        """(heartbeat epoch seconds, pid) of a run, for staleness checks."""
        rows = self._fetch("SELECT heartbeat_at, created_at, pid FROM {runs} WHERE id = ?", (run_id,))
        if not rows:
            return None, None
        row = rows[0]
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
        self._write(
            f"INSERT INTO {{cards}} ({_CARD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                card_id, collection, question, answer, json.dumps(list(sources)),
                status.value, mode.value, run_id, now, now,
            ),
        )
        return self.get_card(collection, card_id)

    def get_card(self, collection: str, card_id: str) -> FaqCard:
        rows = self._fetch(
            f"SELECT {_CARD_COLUMNS} FROM {{cards}} WHERE id = ? AND collection = ?", (card_id, collection)
        )
        if not rows:
            raise NotFoundError(f"FAQ card {card_id!r} does not exist in collection {collection!r}")
        return _card(rows[0])

    def find_cards(self, collection: str, card_ids: Sequence[str]) -> dict[str, FaqCard]:
        """The cards with these ids that exist in the collection."""
        if not card_ids:
            return {}
        marks = ",".join("?" * len(card_ids))
        rows = self._fetch(
            f"SELECT {_CARD_COLUMNS} FROM {{cards}} WHERE collection = ? AND id IN ({marks})",
            (collection, *card_ids),
        )
        return {row[0]: _card(row) for row in rows}

    def list_cards(
        self, collection: str, *, status: CardStatus | None = None
    ) -> list[FaqCard]:
        """Cards of a collection, oldest first (of one status when given)."""
        sql = f"SELECT {_CARD_COLUMNS} FROM {{cards}} WHERE collection = ?"
        params: list[Any] = [collection]
        if status is not None:
            sql += " AND status = ?"
            params.append(status.value)
        return [_card(r) for r in self._fetch(sql + " ORDER BY created_at, {seq}", params)]

    def update_card(
        self, collection: str, card_id: str, changes: Mapping[str, Any], *, demote_approved: bool = False
    ) -> FaqCard:
        """Change ``question``, ``answer``, ``sources`` and/or ``status``. ``demote_approved``:
        an approved card becomes a draft in the same statement (an edit of its text), so an
        approval made between a caller's read and this write cannot stay on the new text."""
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
        if demote_approved and "status" not in changes:
            sets.append("status = CASE WHEN status = ? THEN ? ELSE status END")
            params += [CardStatus.APPROVED.value, CardStatus.DRAFT.value]
        sets.append("updated_at = ?")
        params.append(time.time())
        self._write(
            f"UPDATE {{cards}} SET {', '.join(sets)} WHERE id = ? AND collection = ?",
            (*params, card_id, collection),
        )
        return self.get_card(collection, card_id)

    def count_cards(self, collection: str, *, exclude: CardStatus | None = None) -> int:
        sql = "SELECT COUNT(*) FROM {cards} WHERE collection = ?"
        params: list[Any] = [collection]
        if exclude is not None:
            sql += " AND status != ?"
            params.append(exclude.value)
        return int(self._fetch(sql, params)[0][0])

    def delete_collection(self, collection: str) -> tuple[int, int]:
        """Remove every run and card of a collection; (runs, cards) removed."""
        with self.records.transaction(f"refinery:{collection}") as tx:
            runs = tx.write(self._t.sql("DELETE FROM {runs} WHERE collection = ?"), (collection,))
            cards = tx.write(self._t.sql("DELETE FROM {cards} WHERE collection = ?"), (collection,))
        return runs, cards

    def close(self) -> None:
        """Close a stand-alone file (a store's records close with the store)."""
        if isinstance(self.records, SqliteRecords) and self.path is not None:
            self.records.close()


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
