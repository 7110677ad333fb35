"""API keys with a role per collection, stored hashed in the store's record tables.

A token is ``plait_`` followed by 32 random bytes (URL-safe base64); only its SHA-256
is stored, and a presented token is compared with every active hash in constant time
(:func:`hmac.compare_digest`), so neither the table nor the timing gives a key away.
Keys live in the store itself (:meth:`~plait.stores.base.Store.records`), so two
servers on one database accept the same keys; ``KeyStore(path)`` opens a stand-alone
key file instead (``--keys`` / ``PLAIT_KEYS``; the former ``keys.db`` layout).

Roles are ordered: ``reader`` (search, coverage, FAQ) < ``maintainer`` (+ reindex,
refinery runs, card review) < ``admin`` (everything). A key covers one collection, or
every collection when its collection is ``*``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from plait.collection_names import ALL_COLLECTIONS, check_key_collection, check_name
from plait.errors import NotFoundError, ValidationError
from plait.stores.records import Records, SqliteRecords, open_records_file
from plait.types import Model

__all__ = [
    "ALL_COLLECTIONS",
    "TOKEN_PREFIX",
    "ApiKey",
    "KeyStore",
    "Role",
    "default_keys_path",
    "hash_token",
    "role_of",
    "sees_drafts",
]

TOKEN_PREFIX = "plait_"
_MAX_TOKEN_CHARS = 256

class Role(StrEnum):
    """What a key may do; each role includes the ones before it."""

    READER = "reader"
    MAINTAINER = "maintainer"
    ADMIN = "admin"

    @property
    def level(self) -> int:
        return _LEVELS[self]

    def includes(self, other: Role) -> bool:
        """True when this role may do everything ``other`` may."""
        return self.level >= other.level


_LEVELS = {Role.READER: 0, Role.MAINTAINER: 1, Role.ADMIN: 2}


class ApiKey(Model):
    """A stored key as listed: never the token, only a short hint of its start."""

    id: int
    hint: str
    role: Role
    collection: str
    created_at: str
    revoked_at: str | None = None

    def covers(self, collection: str) -> bool:
        """True when the key may see ``collection`` at all."""
        return self.collection == ALL_COLLECTIONS or self.collection == collection


def role_of(value: Role | str) -> Role:
    """The role ``value`` names, else :class:`ValidationError` listing the roles."""
    try:
        return Role(value)
    except ValueError:
        allowed = ", ".join(r.value for r in Role)
        raise ValidationError(f"unknown role {value!r}; use one of: {allowed}") from None


def hash_token(token: str) -> str:
    """The stored form of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def default_keys_path(store: str) -> Path:
    """Where the former ``keys.db`` of a store was: next to a file store,
    ``./.plait/keys.db`` for a server store URL (imported into the store on first open)."""
    store = store.removeprefix("sqlite:///")
    if "://" in store or store == ":memory:":
        return Path(".plait") / "keys.db"
    return Path(store).expanduser().parent / "keys.db"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class KeyStore:
    """Create, list, revoke and check API keys in a store's records, or in a
    stand-alone key file ``path``."""

    def __init__(self, records: Records | str | Path) -> None:
        if isinstance(records, str | Path):
            self.path: Path | None = Path(records)
            records = open_records_file(self.path)
            self._owned = True
        else:
            self.path = None
            self._owned = False
        self.records = records
        self._t = records.tables

    @property
    def where(self) -> str:
        """Where the keys are, for messages."""
        return str(self.path) if self.path is not None else f"the store ({self.records.label})"

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.records.fetch(self._t.sql(sql), params)

    def create(
        self, *, role: Role | str, collection: str, collections: Collection[str] | None = None
    ) -> tuple[ApiKey, str]:
        """A new key: returns its record and the token, which is shown only this once.

        ``collection`` is ``*`` (every collection) or a name the collection name rule
        accepts (:mod:`plait.collection_names`). With ``collections`` (the names the
        store holds) it must be one of them, or ``*``: a key for a collection that does
        not exist (a typo) is refused, naming the ones that do; a name the rule would
        refuse is accepted when the store holds it (a collection made before the rule)."""
        role = role_of(role)
        if not collection or not collection.strip():
            raise ValidationError("a key needs a collection name, or '*' for all collections")
        if collections is not None:
            check_key_collection(collection, collections)
        elif collection != ALL_COLLECTIONS:
            check_name(collection)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        hint = token[: len(TOKEN_PREFIX) + 4] + "…"
        created = _now()
        rows = self._fetch(
            "INSERT INTO {keys} (token_hash, hint, role, collection, created_at) "
            "VALUES (?, ?, ?, ?, ?) RETURNING id",
            (hash_token(token), hint, role.value, collection, created),
        )
        key_id = int(rows[0][0])
        return ApiKey(id=key_id, hint=hint, role=role, collection=collection, created_at=created), token

    def list_keys(self, *, include_revoked: bool = True) -> list[ApiKey]:
        """Every key, oldest first."""
        sql = "SELECT id, hint, role, collection, created_at, revoked_at FROM {keys}"
        if not include_revoked:
            sql += " WHERE revoked_at IS NULL"
        rows = self._fetch(sql + " ORDER BY id")
        return [
            ApiKey(id=r[0], hint=r[1], role=Role(r[2]), collection=r[3], created_at=r[4], revoked_at=r[5])
            for r in rows
        ]

    def revoke(self, key_id: int) -> ApiKey:
        """Revoke a key; revoking one already revoked is a no-op."""
        self.records.write(
            self._t.sql("UPDATE {keys} SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"),
            (_now(), key_id),
        )
        for key in self.list_keys():
            if key.id == key_id:
                return key
        raise NotFoundError(f"API key {key_id} does not exist")

    def revoke_collection(self, collection: str) -> list[ApiKey]:
        """Revoke every active key scoped to exactly ``collection``; the keys revoked.

        Keys for ``*`` (all collections) are kept. Called when a collection is deleted,
        so that a later collection of the same name does not inherit old grants.
        """
        with self.records.transaction("keys") as tx:
            ids = [
                row[0]
                for row in tx.fetch(
                    self._t.sql("SELECT id FROM {keys} WHERE collection = ? AND revoked_at IS NULL"),
                    (collection,),
                )
            ]
            tx.write(
                self._t.sql("UPDATE {keys} SET revoked_at = ? WHERE collection = ? AND revoked_at IS NULL"),
                (_now(), collection),
            )
        wanted = set(ids)
        return [key for key in self.list_keys() if key.id in wanted]

    def token_hashes(self, key_ids: Sequence[int]) -> set[str]:
        """The stored hashes of these keys (to tell the same key in two places apart)."""
        if not key_ids:
            return set()
        marks = ",".join("?" * len(key_ids))
        return {r[0] for r in self._fetch(f"SELECT token_hash FROM {{keys}} WHERE id IN ({marks})", list(key_ids))}

    def authenticate(self, token: str | None) -> ApiKey | None:
        """The active key a token belongs to, or None.

        Every active hash is compared (no early exit), each in constant time.
        """
        if not token or len(token) > _MAX_TOKEN_CHARS:
            return None
        presented = hash_token(token)
        rows = self._fetch(
            "SELECT id, token_hash, hint, role, collection, created_at FROM {keys} WHERE revoked_at IS NULL"
        )
        found = None
        for row in rows:
            if hmac.compare_digest(presented, row[1]):
                found = row
        if found is None:
            return None
        return ApiKey(
            id=found[0], hint=found[2], role=Role(found[3]), collection=found[4], created_at=found[5]
        )

    def close(self) -> None:
        """Close a stand-alone key file (a store's records close with the store)."""
        if self._owned and isinstance(self.records, SqliteRecords):
            self.records.close()


def sees_drafts(key: ApiKey | None) -> bool:
    """Whether a caller sees FAQ cards nobody approved yet: maintainers and admins (who
    review them) and a server without auth do; a reader key does not, on any route."""
    return key is None or key.role.includes(Role.MAINTAINER)
