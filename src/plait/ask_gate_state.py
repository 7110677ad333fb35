"""When ask's gate (:mod:`plait.ask_gate`) is measured again, and the collection read once.

:func:`ensure_gate_read` decides from counts and settings alone (no chunk id): a stored
calibration of this ``GATE_VERSION`` is kept while its fingerprint (chunk count, chunks
without a vector, ``chunkChanges``) is unchanged or it is not stale
(:mod:`plait.staleness`); otherwise it is measured again and stored. It returns the
collection and its settings as they are afterwards, and takes the ones its caller just
read, so an ask reads its collection once (one statement on PostgreSQL,
:func:`plait.collection_settings.read_collection`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from plait.ask_gate import GATE_VERSION, GateCalibration, Trigger, calibrate_gate
from plait.collection_settings import CollectionSettings, read_collection, read_settings, write_settings
from plait.embeddings.base import Embedder
from plait.errors import PlaitError
from plait.staleness import changed_share, is_stale, searchable_count
from plait.stores.base import Store, is_read_only
from plait.types import CollectionInfo

__all__ = ["GateRead", "ensure_gate", "ensure_gate_read", "fingerprint"]

logger = logging.getLogger(__name__)


def fingerprint(store: Store, collection: str) -> str | None:
    """What the collection holds, in a few characters, read without touching a chunk: its
    chunk count, how many lack a vector, and its ``chunkChanges`` counter
    (:mod:`plait.staleness`). An unchanged fingerprint needs no new calibration."""
    info = store.get_collection(collection)
    if info is None or info.chunks == 0:
        return None
    return _fingerprint(info.chunks, info.chunks_without_vector, read_settings(store, collection).chunk_changes)


def _fingerprint(chunks: int, without_vector: int, changes: int) -> str:
    return f"{chunks}-{without_vector}-c{changes}"


def _stale(
    calibration: GateCalibration, settings: CollectionSettings, embedder: Embedder | None, chunks: int, complete: bool
) -> bool:
    """Whether a stored calibration of this method version is measured again: more than
    :data:`~plait.staleness.RECALIBRATE_FRACTION` of its chunks changed since, or its
    dense half can be measured now (vectors complete) with another model than it was."""
    if is_stale(changed_share(settings.chunk_changes, calibration.changes_at, calibration.chunks, now=chunks)):
        return True
    name = f"{embedder.provider}/{embedder.model}" if embedder is not None else None
    return complete and calibration.embedder != name


@dataclass(frozen=True, slots=True)
class GateRead:
    """What :func:`ensure_gate_read` found: the calibration (None: none could be made, or
    the collection is empty or missing), the collection and its settings after it (None:
    the collection does not exist)."""

    calibration: GateCalibration | None
    info: CollectionInfo | None
    settings: CollectionSettings | None


def ensure_gate(
    store: Store,
    collection: str,
    embedder: Embedder | None,
    *,
    samples: int = 32,
    trigger: Trigger = "ask",
    force: bool = False,
) -> GateCalibration | None:
    """:func:`ensure_gate_read`'s calibration alone (see there)."""
    return ensure_gate_read(store, collection, embedder, samples=samples, trigger=trigger, force=force).calibration


def ensure_gate_read(
    store: Store,
    collection: str,
    embedder: Embedder | None,
    *,
    samples: int = 32,
    trigger: Trigger = "ask",
    force: bool = False,
    known: tuple[CollectionInfo, CollectionSettings] | None = None,
) -> GateRead:
    """The collection's calibration, measured again (and stored, setting ``askGate``,
    ``calibratedBy`` ``trigger``) when none is stored, it was measured by another
    ``GATE_VERSION``, it is stale (:func:`_stale`, :mod:`plait.staleness`) or ``force``
    (a full reindex, ``plait calibrate``); deciding reads counts and settings, no chunk id.

    The service calls this at the end of every index, reindex or backfill run that left
    the collection complete (``trigger`` ``index``); ask and explain call it too, so a
    collection calibrated by neither (indexed by an older version, or its vectors pending)
    is measured by its first question. The dense half is measured only on a fully embedded collection (vectors pending: the
    lexical half alone, the cosine gate left to the default until the backfill ends). A
    calibration that cannot run (too small a collection, the embedder failing) is logged
    and leaves the stored one in place.

    Returns it with the collection and its settings as they are after it (the stored
    calibration included): ``known``, the collection and settings the caller just read
    (:func:`~plait.collection_settings.read_collection`), is used instead of reading
    them again, so an ask reads its collection once.
    """
    read = known if known is not None else read_collection(store, collection)
    if read is None:
        return GateRead(None, None, None)
    info, settings = read
    if info.chunks == 0:
        return GateRead(None, info, settings)
    current = _fingerprint(info.chunks, info.chunks_without_vector, settings.chunk_changes)
    saved = settings.ask_gate
    complete = embedder is not None and info.chunks_without_vector == 0
    if not force and saved and saved.get("version") == GATE_VERSION:
        stored = GateCalibration.model_validate(saved)
        if saved.get("fingerprint") == current or not _stale(
            stored, settings, embedder, searchable_count(info.chunks, settings), complete
        ):
            return GateRead(stored, info, settings)
    if is_read_only(store):
        # A read replica cannot store a calibration, and measuring one for every question
        # would cost a sample run each: the one replayed from the primary, even stale,
        # else the defaults (the primary calibrates at the end of its index runs).
        kept = GateCalibration.model_validate(saved) if saved and saved.get("version") == GATE_VERSION else None
        return GateRead(kept, info, settings)
    try:
        result = calibrate_gate(store, collection, embedder if complete else None, samples=samples)
    except PlaitError as exc:
        logger.warning("ask gate of %r not calibrated: %s", collection, exc)
        return GateRead(None, info, settings)
    result = result.model_copy(
        update={
            "fingerprint": current,
            "calibrated_by": trigger,
            "version": GATE_VERSION,
            "changes_at": settings.chunk_changes,
        }
    )
    settings = write_settings(store, collection, ask_gate=result.model_dump(mode="json", by_alias=True))
    logger.info(
        "ask gate of %r (%s): cosine %s, term coverage %.2f (%d samples)",
        collection, trigger, result.min_cosine, result.min_term_coverage, result.samples,
    )
    return GateRead(result, info, settings)
