"""A consistent copy of a live store (issue 27 item 3).

SQLite: the online backup API (:meth:`sqlite3.Connection.backup`) on a connection of its
own, in one step, i.e. inside one read transaction: the copy is the store as of one
commit, while searches and a reindex go on (WAL mode: the read blocks no writer). The
copy is a complete SQLite store file (open it with ``--store FILE``); it is written to a
temporary name next to the target and renamed when complete.

PostgreSQL and Milvus are backed up with their own tools (``pg_dump``, see
``docs/postgres.md``; Milvus backup), or per collection with ``plait export``.

A backup is the whole store as it is — every collection, its vectors unchanged, nothing
embedded — so a collection or an embedder named for it (``plait backup --collection`` or
``--embedder``) has nothing to apply to and is refused (:class:`~plait.errors.ConfigError`)
before anything is read; ``PLAIT_COLLECTION`` and ``PLAIT_EMBEDDER``, defaults for every
command, are not passed here and so are never refused.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from plait.errors import ConfigError, ConflictError, StoreError
from plait.types import Model

__all__ = ["BackupReport", "backup_store"]


class BackupReport(Model):
    """What ``plait backup`` wrote."""

    store: str
    path: str
    bytes: int
    pages: int


def backup_store(
    store_url: str,
    path: str | Path,
    *,
    overwrite: bool = False,
    collection: str | None = None,
    embedder: str | None = None,
) -> BackupReport:
    """Back up the SQLite store at ``store_url`` (a path or ``sqlite:///path``) to ``path``;
    an existing ``path`` (another store, an older backup) is replaced only with ``overwrite``.

    ``collection`` and ``embedder`` are what the caller was explicitly given (``--collection``,
    ``--embedder``): a backup takes neither, so either one is a :class:`ConfigError` (see
    the module docstring)."""
    given = [
        f"--{flag} {value!r}" for flag, value in (("collection", collection), ("embedder", embedder)) if value is not None
    ]
    if given:
        raise ConfigError(
            f"{' and '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to plait backup: a backup "
            "copies the whole store as it is, every collection with its vectors, and embeds nothing; leave "
            f"{'it' if len(given) == 1 else 'them'} out (plait export -c NAME writes one collection)"
        )
    if store_url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            "plait backup copies SQLite stores; back up PostgreSQL with pg_dump "
            "(docs/postgres.md: pg_dump -Fc -n SCHEMA) or a collection with plait export"
        )
    if "://" in store_url and not store_url.startswith("sqlite:///"):
        raise ConfigError(
            f"plait backup copies SQLite stores, not {store_url.split('://')[0]}://: "
            "use the server's own backup, or plait export per collection"
        )
    source = Path(store_url.removeprefix("sqlite:///")).expanduser()
    if not source.is_file():
        raise StoreError(f"store {source} does not exist")
    target = Path(path)
    if target.resolve() == source.resolve():
        raise ConfigError("the backup file must not be the store itself")
    if target.exists() and not overwrite:
        raise ConflictError(f"{target} exists: pass --overwrite to replace it")
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
        try:
            dst = sqlite3.connect(str(partial))
            try:
                src.backup(dst, pages=-1)  # one step: one read transaction, one commit's state
                dst.execute("PRAGMA journal_mode = DELETE")  # a self-contained file, no -wal beside it
                pages = int(dst.execute("PRAGMA page_count").fetchone()[0])
            finally:
                dst.close()
        finally:
            src.close()
        os.replace(partial, target)
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        raise StoreError(f"backup of {source} failed: {exc}") from exc
    return BackupReport(store=str(source), path=str(target), bytes=target.stat().st_size, pages=pages)
