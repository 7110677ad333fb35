"""The copy's same-collection probe (:func:`plait.store_identity.is_one_collection`) leaves
no trace in the target collection's settings: the token's key is deleted, not set to null,
whether the probe answers or fails. Real SQLite and PostgreSQL (pgserver) targets.

The probe runs when a copy finds a target collection of the source's name that may be the
source's own (no creation times recorded, or equal ones): a resumed copy, a restored
backup. Here the source's creation time is set to the target's, as a restore would carry it.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from plait.collection_settings import write_settings
from plait.copying import copy_collection
from plait.errors import StoreUnavailableError
from plait.store_identity import PROBE_KEY
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk

from .conftest import StoreFactory

_PROBED = "of the target is not collection 'kb' of the source"


def _source(path: Path, kind: type[SQLiteStore] = SQLiteStore) -> SQLiteStore:
    store = kind(path)
    store.ensure_collection("kb")
    store.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
    return store


def _same_creation_time(source: SQLiteStore, path: Path, target: Any) -> None:
    """Give the source's collection the target's creation time (as a restore carries it)."""
    created = target.get_collection("kb").created_at
    with sqlite3.connect(path) as db:
        db.execute("UPDATE collections SET created_at = ? WHERE name = 'kb'", (created,))
    db.close()
    assert source.get_collection("kb").created_at == created  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_resumed_copy_leaves_no_probe_key(
    kind: str, make_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = _source(tmp_path / "source.db")
    target = make_store(kind)
    copy_collection(source, target, "kb")
    write_settings(target, "kb", copy_in_progress={"collection": "kb", "startedAt": "2026-01-01T00:00:00+00:00"})
    _same_creation_time(source, tmp_path / "source.db", target)
    with caplog.at_level(logging.INFO, logger="plait.store_identity"):
        report = copy_collection(source, target, "kb")  # resumes: the target's collection may be the source's
    assert any(_PROBED in r.getMessage() for r in caplog.records)  # the probe ran
    assert report.verification is not None and report.verification.ok
    assert PROBE_KEY not in target.get_settings("kb")
    assert PROBE_KEY not in source.get_settings("kb")


class _SourceGoneAtTheProbe(SQLiteStore):
    """A real SQLite source whose settings cannot be read: the connection to it lost just
    as the probe reads its token back."""

    def get_settings(self, name: str) -> dict[str, Any]:
        raise StoreUnavailableError("the source went away")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_failed_probe_leaves_no_probe_key(kind: str, make_store: StoreFactory, tmp_path: Path) -> None:
    source = _source(tmp_path / "source.db", _SourceGoneAtTheProbe)
    target = make_store(kind)
    target.ensure_collection("kb")
    target.update_settings("kb", {"mine": 1})
    _same_creation_time(source, tmp_path / "source.db", target)
    with pytest.raises(StoreUnavailableError, match="went away"):
        copy_collection(source, target, "kb", replace=True)
    assert target.get_settings("kb") == {"mine": 1}  # as it was: no probe key, nothing deleted
