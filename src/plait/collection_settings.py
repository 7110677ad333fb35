"""What plait remembers about a collection besides its chunks: one typed model, one place.

The store keeps a collection's settings as one JSON object
(:meth:`~plait.stores.base.Store.get_settings`); every module reads and writes it through
:func:`read_settings` / :func:`write_settings` and the :class:`CollectionSettings` model,
never by string keys. To remember something new with a collection, add one field here
(its camelCase alias is the stored key) — e.g. ``ask`` below holds the ask settings,
gate calibration included.

``settingsVersion`` is written with every change. A bag without it is version 0 (written
before the model existed; same keys); :data:`SETTINGS_VERSION` is the current one, and a
bag from a newer plait is refused rather than misread. Keys this version does not know
are kept as they are (``extra="allow"``), so an older plait never drops what a newer one
stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from plait.chunking import ChunkSettings
from plait.errors import ConfigError, ValidationError
from plait.stores.base import CollectionReadStore, Store
from plait.types import CollectionInfo

__all__ = [
    "SETTINGS_VERSION",
    "CollectionSettings",
    "chunking_record",
    "parse_settings",
    "portable_settings",
    "read_collection",
    "read_settings",
    "recorded_chunking",
    "restore_settings",
    "settings_update",
    "write_settings",
]

SETTINGS_VERSION = 1


class CollectionSettings(BaseModel):
    """A collection's stored settings (camelCase keys in the store)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True)

    settings_version: int = 0
    embedder: str | None = None
    """The embedder name recorded at the first index (``plait search`` uses it)."""
    roots: list[dict[str, Any]] = Field(default_factory=list)
    """The recorded roots (:mod:`plait.sources.roots`), one per folder / git tree / log."""
    fusion: dict[str, Any] = Field(default_factory=dict)
    """Saved fusion defaults (camelCase fields of the fusion settings)."""
    calibration: dict[str, Any] | None = None
    """The last saved calibration (:mod:`plait.calibration`)."""
    search_hidden: dict[str, list[str]] = Field(default_factory=dict)
    """Scope → chunk ids searched only when the scope is named (FAQ cards)."""
    refinery: dict[str, Any] = Field(default_factory=dict)
    """Refinery settings (:class:`plait.refinery.models.RefinerySettings`)."""
    ask: dict[str, Any] = Field(default_factory=dict)
    """Ask settings (:class:`plait.ask.AskSettings`)."""
    copy_in_progress: dict[str, Any] | None = None
    """An unfinished ``plait copy`` into this collection (:mod:`plait.copying`): a re-run
    continues it; None once the copy finished."""
    ask_gate: dict[str, Any] | None = None
    """Ask's gate calibration (:class:`plait.ask_gate.GateCalibration`, camelCase)."""
    arm_estimate: dict[str, Any] | None = None
    """The collection's arm estimate, the adaptive fusion's base (:mod:`plait.arm_estimate`)."""
    chunk_changes: int = 0
    """Chunks added, updated or deleted by the collection's index runs, ever: how stale a
    calibration is (:mod:`plait.staleness`)."""
    chunking: dict[str, Any] | None = None
    """The chunk sizes its last index run cut with (:class:`plait.chunking.ChunkSettings`:
    ``target``, ``overlap``, ``window``; :func:`recorded_chunking`); None before any run
    recorded them. Ask tells a sentence the chunker cut by them (:mod:`plait.ask_extract`)."""
    kept_versions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Source id → the older version its root's last run kept because it could not read the
    current file (:class:`plait.kept_versions.KeptVersion`, camelCase): explain says so."""


_FIELDS = {name: (info.alias or name) for name, info in CollectionSettings.model_fields.items()}
_NULLABLE = frozenset(name for name, info in CollectionSettings.model_fields.items() if info.default is None)


def parse_settings(raw: Mapping[str, Any], *, collection: str | None = None) -> CollectionSettings:
    """The model of a stored bag, upgraded from older versions; a bag this model cannot
    read (edited by hand, written by a foreign tool) is a :class:`ConfigError` naming the
    collection and the fields, not an internal error on every search."""
    version = raw.get("settingsVersion", 0)
    if not isinstance(version, int) or version > SETTINGS_VERSION:
        raise ConfigError(
            f"collection settings version {version!r} is newer than this plait understands "
            f"({SETTINGS_VERSION}): upgrade plait"
        )
    # version 0 -> 1: same keys, only the version is added
    try:
        return CollectionSettings.model_validate(raw)
    except PydanticValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        where = f"collection {collection!r}" if collection is not None else "a collection"
        raise ConfigError(f"the stored settings of {where} are invalid: " + "; ".join(parts)) from None


def read_settings(store: Store, collection: str) -> CollectionSettings:
    """The collection's settings (NotFoundError when it does not exist)."""
    return parse_settings(store.get_settings(collection), collection=collection)


def read_collection(store: Store, collection: str) -> tuple[CollectionInfo, CollectionSettings] | None:
    """The collection and its settings (None when it does not exist): one statement on a
    store that reads both at once (:class:`~plait.stores.base.CollectionReadStore`,
    PostgreSQL), else ``get_collection`` then ``get_settings``."""
    if isinstance(store, CollectionReadStore):
        both = store.collection_with_settings(collection)
        return None if both is None else (both[0], parse_settings(both[1], collection=collection))
    info = store.get_collection(collection)
    return None if info is None else (info, read_settings(store, collection))


def chunking_record(chunking: ChunkSettings) -> dict[str, int]:
    """The ``chunking`` setting recording ``chunking``."""
    return {"target": chunking.target, "overlap": chunking.overlap, "window": chunking.window}


def recorded_chunking(saved: CollectionSettings, *, collection: str) -> ChunkSettings:
    """The chunk settings the collection's chunks were cut with (setting ``chunking``); the
    chunker's defaults for a collection no run recorded them for (indexed before they were
    recorded, with the defaults unless a library caller chose others). A recorded value the
    chunker refuses (edited by hand) is a :class:`ConfigError` naming the collection."""
    if saved.chunking is None:
        return ChunkSettings()
    known = {key: saved.chunking[key] for key in ("target", "overlap", "window") if key in saved.chunking}
    try:
        return ChunkSettings(**known)
    except ConfigError as exc:
        raise ConfigError(f"the stored settings of collection {collection!r} are invalid: chunking: {exc}") from None


def write_settings(store: Store, collection: str, **changes: Any) -> CollectionSettings:
    """Change some fields (snake_case names of :class:`CollectionSettings`); the others,
    and keys this version does not know, are kept. A field whose default is None and that
    is set to None is deleted from the stored bag (read back as None all the same), so a
    finished copy or a cleared calibration leaves no ``null`` behind. Returns the settings
    as stored."""
    update = settings_update(**changes)
    cleared = [
        _FIELDS[name] for name, value in changes.items()
        if value is None and name in _NULLABLE
    ]
    for key in cleared:
        del update[key]
    stored = store.update_settings(collection, update, remove=cleared)
    return parse_settings(stored, collection=collection)


def settings_update(**changes: Any) -> dict[str, Any]:
    """The stored bag's keys :func:`write_settings` would merge for ``changes`` (checked
    first): for a store call that merges them with another write in one transaction
    (``Store.add_usage(..., settings=...)``)."""
    unknown = sorted(set(changes) - set(_FIELDS) - {"settings_version"})
    if unknown:
        raise ValidationError(f"unknown collection setting(s) {unknown}; known: {sorted(_FIELDS)}")
    try:  # types checked before anything is written
        checked = CollectionSettings.model_validate(changes)
    except PydanticValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ValidationError("invalid collection settings: " + "; ".join(parts)) from None
    update = {_FIELDS[name]: getattr(checked, name) for name in changes}
    update["settingsVersion"] = SETTINGS_VERSION
    return update


def portable_settings(store: Store, collection: str) -> dict[str, Any]:
    """The stored bag as it travels with the collection (``plait copy``, ``plait export``):
    every key, those this version does not know included, as stored — less the marker of
    an unfinished copy into it and the copy's identity probe, which belong to this store only."""
    local = {_FIELDS["copy_in_progress"], "copyIdentityProbe"}  # the latter: plait.store_identity.PROBE_KEY
    return {key: value for key, value in store.get_settings(collection).items() if key not in local}


def restore_settings(store: Store, collection: str, bag: Mapping[str, Any]) -> None:
    """Write a bag :func:`portable_settings` gave (from another store or an archive) as it is."""
    store.update_settings(collection, bag)
