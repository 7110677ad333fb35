"""Import of the former side files (``refinery.db``, ``keys.db``) into a store's records.

Before the record tables moved into the store (:mod:`plait.stores.records`), refinery
runs and FAQ cards lived in ``refinery.db`` and API keys in ``keys.db``: next to a SQLite
store, in ``./.plait/`` for PostgreSQL and Milvus. The first time a store's records are
opened, each such file that exists and was not imported before is read (read-only; the
file is left as it was) and copied in, in one transaction:

* runs and cards of the collections the store holds, by id (rows already present win);
* every API key, keeping its id when that id is free (so ``plait keys revoke ID`` still
  names it); a key already present (same token hash) only takes the file's revocation.

The file's absolute path is then recorded in the ``record_imports`` table, so a second
open (or a second server on the same database) does not import it again.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plait.errors import StoreError
from plait.stores.records import FILE_TABLES, Records, RecordsTx

__all__ = ["LEGACY_FILES", "copy_records", "import_records_file", "import_side_files", "legacy_files"]

log = logging.getLogger(__name__)

LEGACY_FILES = ("refinery.db", "keys.db")

_RUN_COLUMNS = (
    "id, collection, status, mode, chunks_scanned, chunks_total, cards_made, cards_merged, "
    "llm_calls, groups_skipped, created_at, started_at, finished_at, heartbeat_at, pid, error, "
    "note, cancel_requested"
)
_CARD_COLUMNS = "id, collection, question, answer, sources, status, mode, run_id, created_at, updated_at"
_KEY_COLUMNS = "id, token_hash, hint, role, collection, created_at, revoked_at"


def legacy_files(records: Records) -> list[Path]:
    """The former side files of this store that exist."""
    if records.legacy_dir is None:
        return []
    return [records.legacy_dir / name for name in LEGACY_FILES if (records.legacy_dir / name).is_file()]


def _read(path: Path, table: str, columns: str) -> list[tuple[Any, ...]]:
    """Rows of ``table`` in a side file opened read-only ([] when it has no such table)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the side file {path}: {exc}") from exc
    try:
        exists = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        return db.execute(f"SELECT {columns} FROM {table} ORDER BY rowid").fetchall() if exists else []
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"the side file {path} is not a readable SQLite file: {exc}") from exc
    finally:
        db.close()


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _import_keys(tx: RecordsTx, records: Records, rows: Sequence[tuple[Any, ...]]) -> int:
    t = records.tables
    added = 0
    for row in rows:
        key_id, token_hash, *rest = row
        revoked_at = row[6]
        if tx.fetch(t.sql("SELECT id FROM {keys} WHERE token_hash = ?"), (token_hash,)):
            if revoked_at is not None:
                tx.write(
                    t.sql("UPDATE {keys} SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL"),
                    (revoked_at, token_hash),
                )
            continue
        if tx.fetch(t.sql("SELECT 1 FROM {keys} WHERE id = ?"), (key_id,)):
            tx.write(
                t.sql("INSERT INTO {keys} (token_hash, hint, role, collection, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)"),
                (token_hash, *rest),
            )
        else:
            tx.write(t.sql(f"INSERT INTO {{keys}} ({_KEY_COLUMNS}) VALUES ({_marks(7)})"), row)
        added += 1
    if added and t.dialect == "postgres":  # explicit ids: move the identity past them
        tx.fetch(
            t.sql("SELECT setval(pg_get_serial_sequence('{keys}', 'id'), (SELECT max(id) FROM {keys}))")
        )
    return added


def import_side_files(records: Records, *, collections: Iterable[str], once: bool = False) -> list[Path]:
    """Import every former side file not imported yet; returns the files imported.

    ``once`` is for stores shared by processes started in different folders
    (PostgreSQL, a Milvus server), whose side files were cwd-relative: the first
    import is the migration, and after it no other folder's ``./.plait/keys.db`` may
    add keys (admin ones included) to the shared store. Runs and cards of collections
    the store does not hold are not imported, and a warning names them."""
    done: list[Path] = []
    wanted = set(collections)
    t = records.tables
    if once and records.fetch(t.sql("SELECT 1 FROM {imports}"), ()):
        return done
    for path in legacy_files(records):
        source = str(path.resolve())
        if records.fetch(t.sql("SELECT 1 FROM {imports} WHERE source = ?"), (source,)):
            continue
        all_runs = _read(path, "runs", _RUN_COLUMNS)
        all_cards = _read(path, "cards", _CARD_COLUMNS)
        runs = [r for r in all_runs if r[1] in wanted]
        cards = [r for r in all_cards if r[1] in wanted]
        left = sorted({str(r[1]) for r in (*all_runs, *all_cards)} - wanted)
        if left:
            log.warning(
                "%s: not importing the refinery runs and cards of %s (no such collection in %s)",
                path, ", ".join(left), records.label,
            )
        keys = _read(path, "api_keys", _KEY_COLUMNS)
        with records.transaction("import") as tx:
            if tx.fetch(t.sql("SELECT 1 FROM {imports} WHERE source = ?"), (source,)):
                continue  # another process imported it meanwhile
            n_runs = sum(
                tx.write(t.sql(f"INSERT INTO {{runs}} ({_RUN_COLUMNS}) VALUES ({_marks(18)}) ON CONFLICT (id) DO NOTHING"), r)
                for r in runs
            )
            n_cards = sum(
                tx.write(t.sql(f"INSERT INTO {{cards}} ({_CARD_COLUMNS}) VALUES ({_marks(10)}) ON CONFLICT (id) DO NOTHING"), r)
                for r in cards
            )
            n_keys = _import_keys(tx, records, keys)
            tx.write(
                t.sql("INSERT INTO {imports} (source, imported_at, runs, cards, keys) VALUES (?, ?, ?, ?, ?)"),
                (source, datetime.now(UTC).isoformat(timespec="seconds"), n_runs, n_cards, n_keys),
            )
        log.info("imported %s into %s: %d runs, %d cards, %d API keys", path, records.label, n_runs, n_cards, n_keys)
        admins = [k for k in keys if k[3] == "admin"]
        if admins:
            log.warning("%s: imported %d admin API key(s) into %s", path, len(admins), records.label)
        done.append(path)
    return done


def import_records_file(records: Records, path: Path, *, collections: Iterable[str] | None = None) -> bool:
    """Copy every run, card and API key of another records file (tables as
    :func:`~plait.stores.records.open_records_file` makes them: a Milvus sidecar once named
    from its path or address as typed) into ``records``, once: read-only, the file left as
    it was, rows already present (same id / token hash) kept, its absolute path recorded in
    the imports table. With ``collections``, only the runs and cards of those collections
    (a warning names the others; every API key is imported). False when there is nothing
    to do (no such file, imported before); the caller makes sure ``path`` is not
    ``records``' own file."""
    if not path.is_file():
        return False
    source = str(path.resolve())
    t = records.tables
    if records.fetch(t.sql("SELECT 1 FROM {imports} WHERE source = ?"), (source,)):
        return False
    rows: dict[str, list[list[Any]]] = {
        "runs": [list(r) for r in _read(path, FILE_TABLES.runs, _RUN_COLUMNS)],
        "cards": [list(r) for r in _read(path, FILE_TABLES.cards, _CARD_COLUMNS)],
        "keys": [list(r) for r in _read(path, FILE_TABLES.keys, _KEY_COLUMNS)],
    }
    if collections is not None:
        wanted = set(collections)
        left = sorted({str(r[1]) for r in (*rows["runs"], *rows["cards"])} - wanted)
        if left:
            log.warning(
                "%s: not importing the refinery runs and cards of %s (no such collection in %s)",
                path, ", ".join(left), records.label,
            )
        rows["runs"] = [r for r in rows["runs"] if r[1] in wanted]
        rows["cards"] = [r for r in rows["cards"] if r[1] in wanted]
    with records.transaction("import") as tx:
        if tx.fetch(t.sql("SELECT 1 FROM {imports} WHERE source = ?"), (source,)):
            return False  # another process imported it meanwhile
        n_runs, n_cards, n_keys = write_records(records, rows, tx)
        tx.write(
            t.sql("INSERT INTO {imports} (source, imported_at, runs, cards, keys) VALUES (?, ?, ?, ?, ?)"),
            (source, datetime.now(UTC).isoformat(timespec="seconds"), n_runs, n_cards, n_keys),
        )
    log.info("imported %s into %s: %d runs, %d cards, %d API keys", path, records.label, n_runs, n_cards, n_keys)
    return True


def copy_records(source: Records, target: Records, collection: str) -> tuple[int, int, int]:
    """Copy a collection's refinery runs and cards, and the API keys that cover it (its
    own and ``*`` keys), from one store's records to another's, in one transaction.
    Rows already in the target (same id / token hash) are kept: re-running adds nothing.
    Returns (runs, cards, keys) added."""
    return write_records(target, collection_records(source, collection))


def collection_records(records: Records, collection: str) -> dict[str, list[list[Any]]]:
    """A collection's runs, cards and keys as plain rows (column order of this module)."""
    t = records.tables
    return {
        "runs": [list(r) for r in records.fetch(t.sql(f"SELECT {_RUN_COLUMNS} FROM {{runs}} WHERE collection = ? ORDER BY {{seq}}"), (collection,))],
        "cards": [list(r) for r in records.fetch(t.sql(f"SELECT {_CARD_COLUMNS} FROM {{cards}} WHERE collection = ? ORDER BY {{seq}}"), (collection,))],
        "keys": [list(r) for r in records.fetch(t.sql(f"SELECT {_KEY_COLUMNS} FROM {{keys}} WHERE collection IN (?, '*') ORDER BY id"), (collection,))],
    }


def write_records(target: Records, rows: dict[str, list[list[Any]]], tx: RecordsTx | None = None) -> tuple[int, int, int]:
    """Insert rows as :func:`collection_records` returns them (existing ids kept)."""
    t = target.tables

    def run(into: RecordsTx) -> tuple[int, int, int]:
        n_runs = sum(
            into.write(t.sql(f"INSERT INTO {{runs}} ({_RUN_COLUMNS}) VALUES ({_marks(18)}) ON CONFLICT (id) DO NOTHING"), r)
            for r in rows.get("runs", [])
        )
        n_cards = sum(
            into.write(t.sql(f"INSERT INTO {{cards}} ({_CARD_COLUMNS}) VALUES ({_marks(10)}) ON CONFLICT (id) DO NOTHING"), r)
            for r in rows.get("cards", [])
        )
        return n_runs, n_cards, _import_keys(into, target, [tuple(r) for r in rows.get("keys", [])])

    if tx is not None:
        return run(tx)
    with target.transaction("import") as own:
        return run(own)
