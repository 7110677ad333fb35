"""The older versions an index keeps: files a run saw but could not read.

An index run of a recorded root that sees a file it cannot read this time (a byte that is
not UTF-8, grown past the size limit, a read error: :attr:`plait.sources.base.Scan.unread`)
keeps the chunks of the version it indexed before instead of deleting them, and its report
says so. So that ``explain`` can say it later too — what is searched is that older version,
and why the current file is not — the collection's settings remember each such source
(``keptVersions``, one :class:`KeptVersion` per source id): its root, why the run skipped
the current file, when, and when the version kept was indexed. A later run of the root that
reads the file, or deletes its source, forgets it.

A record is believed only while the source the store holds is still the one it describes
(same root, same ``indexedAt``), so a source written since by any other means is never
said to be an older version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from pydantic import ValidationError as PydanticValidationError

from plait.collection_settings import read_settings, write_settings
from plait.stores.base import SourceInfo, Store
from plait.types import Model, SkippedSource

__all__ = ["KeptVersion", "kept_message", "kept_versions", "remember_kept"]


class KeptVersion(Model):
    """An indexed source whose current file the last run of its root could not read."""

    root: str
    """The key of the recorded root whose run kept it."""
    reason: str
    """Why that run skipped the current file (``not valid UTF-8 (byte 42)``)."""
    skipped_at: str
    """When that run ran (ISO 8601, UTC)."""
    indexed_at: str
    """When the version the index holds was indexed (the source's ``indexedAt``)."""


def remember_kept(
    store: Store,
    collection: str,
    root: str,
    *,
    held: AbstractSet[str],
    skipped: Sequence[SkippedSource],
    sources: Mapping[str, SourceInfo],
    read: AbstractSet[str],
    at: str,
) -> None:
    """After a run of ``root`` at ``at``: remember the sources it ``held`` (kept, the
    current file unread; their reasons from ``skipped``, their ``indexedAt`` from
    ``sources``, the store's sources before the run) and forget those it ``read`` or
    deleted. Writes the settings only when that changes them."""
    saved = read_settings(store, collection).kept_versions
    kept = {source_id: record for source_id, record in saved.items() if source_id not in read}
    reasons = {item.path: item.reason for item in skipped}
    for source_id in sorted(held):
        info = sources.get(source_id)
        if info is None:
            continue
        kept[source_id] = KeptVersion(
            root=root,
            reason=reasons.get(source_id, "unreadable"),
            skipped_at=at,
            indexed_at=info.indexed_at,
        ).model_dump(mode="json", by_alias=True)
    if kept != saved:
        write_settings(store, collection, kept_versions=kept)


def kept_versions(store: Store, collection: str, source_ids: Iterable[str]) -> dict[str, KeptVersion]:
    """Of ``source_ids``, those whose chunks are an older version kept (see the module
    docstring), by source id."""
    saved = read_settings(store, collection).kept_versions
    out: dict[str, KeptVersion] = {}
    for source_id in source_ids:
        if source_id not in saved:
            continue
        try:
            record = KeptVersion.model_validate(saved[source_id])
        except PydanticValidationError:  # edited by hand: said nothing of rather than misread
            continue
        held = {s.source_id: s for s in store.list_sources(collection, root=record.root)}.get(source_id)
        if held is not None and held.indexed_at == record.indexed_at:
            out[source_id] = record
    return out


def kept_message(source_id: str, record: KeptVersion) -> str:
    """What explain says of a kept version."""
    return (
        f"the index holds the version of {source_id} indexed {record.indexed_at}: the index run of "
        f"{record.skipped_at} could not read the current file ({record.reason}) and kept that "
        "version — fix the file and reindex"
    )
