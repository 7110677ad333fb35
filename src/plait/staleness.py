"""How much of a collection changed since a calibration measured it, in one counter.

Two measurements are made on a collection's own chunks after an index run: ask's gate
(:mod:`plait.ask_gate`, 64 embedded texts) and the arm estimate (:mod:`plait.arm_estimate`,
200 pseudo-queries). Measuring both again after every run that changed anything made a
one-file edit cost two calibrations (at 100,000 chunks on PostgreSQL, far more than the
edit). A few changed chunks do not move a quantile of 64 texts, nor an MRR over 200;
so each is measured again only when it is *stale*:

* the collection's setting ``chunkChanges`` counts every chunk a search can return
  (FAQ cards, hidden by ``searchHidden``, are not sampled, so not counted:
  :func:`searchable_count`) added, updated or deleted by an index, reindex or backfill run (:func:`record_changes`, called by the service at
  the end of each run: one settings write, no read of the chunks); each measurement
  stores the counter's value when it was made (``changesAt``) and the searchable chunk
  count then;
* :func:`changed_share` is the share of that chunk count changed since:
  ``(chunkChanges − changesAt) / chunks`` — when deciding, at least the share the chunk
  count itself moved by (chunks deleted outside an index run: a rejected FAQ card);
* a measurement is stale when that share exceeds :data:`RECALIBRATE_FRACTION` (0.1): one
  chunk in ten. A full reindex (``reindex(full=True)``, ``plait reindex --full``) and
  ``plait calibrate`` measure both again whatever the share; so does a first index (no
  measurement yet), and, for the gate, vectors becoming complete for a gate measured on
  the lexical arm alone, or another embedder; for the arm estimate, one an older version
  judged by chunk instead of by source (:func:`plait.arm_estimate.judged_by_source`).

Ask and explain show the share with the gate (``gate.changedSince`` next to
``calibratedAt``). The counter misses the chunks a run killed before its end had already
written (the run's end writes it); the next run, or a full reindex, counts again.
"""

from __future__ import annotations

from plait.collection_settings import SETTINGS_VERSION, CollectionSettings, parse_settings, read_settings
from plait.stores.base import Store

__all__ = ["COUNTER_KEY", "RECALIBRATE_FRACTION", "changed_share", "is_stale", "record_changes", "searchable_count"]

#: The stored key of the counter (:attr:`CollectionSettings.chunk_changes`).
COUNTER_KEY = "chunkChanges"

#: A calibration is measured again once more than this share of its chunks changed.
RECALIBRATE_FRACTION = 0.1


def record_changes(store: Store, collection: str, changed: int) -> int:
    """Add ``changed`` chunks (added, updated or deleted by one run) to the collection's
    ``chunkChanges`` counter, atomically (:meth:`~plait.stores.base.Store.increment_settings`:
    two runs ending at once on one collection both count); returns the counter."""
    if changed <= 0:
        return read_settings(store, collection).chunk_changes
    stored = store.increment_settings(
        collection, {COUNTER_KEY: changed}, settings={"settingsVersion": SETTINGS_VERSION}
    )
    return parse_settings(stored, collection=collection).chunk_changes


def searchable_count(chunks: int, settings: CollectionSettings) -> int:
    """How many of a collection's ``chunks`` a search naming no scope can return: less
    those ``searchHidden`` holds (FAQ cards: the calibrations never sample them, so they
    neither count as changes nor move the chunk count). Settings only, no chunk read.

    >>> searchable_count(10, CollectionSettings(search_hidden={"faq-card": ["a", "b"]}))
    8
    """
    hidden = {cid for ids in settings.search_hidden.values() for cid in ids}
    return max(0, chunks - len(hidden))


def changed_share(counter: int, changes_at: int | None, chunks: int | None, now: int | None = None) -> float:
    """The share of a measurement's ``chunks`` changed since it was made (the counter was
    ``changes_at`` then; None, a measurement older than the counter: 0); given the chunk
    count ``now``, at least the share it moved by (chunks deleted outside an index run,
    which the counter does not see).

    >>> changed_share(130, 100, 300), changed_share(5, None, 0), changed_share(100, 100, 300, now=100)
    (0.1, 5.0, 0.6667)
    """
    moved = max(0, counter - (changes_at or 0), abs((now if now is not None else chunks or 0) - (chunks or 0)))
    return round(moved / max(1, chunks or 0), 4)


def is_stale(share: float) -> bool:
    """Whether a measurement with ``share`` of its chunks changed is measured again.

    >>> is_stale(0.1), is_stale(0.1001)
    (False, True)
    """
    return share > RECALIBRATE_FRACTION
