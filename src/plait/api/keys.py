"""API keys with a role per collection, stored hashed in their own small SQLite file.

A token is ``plait_`` followed by 32 random bytes (URL-safe base64); only its SHA-256
is stored, and a presented token is compared with every active hash in constant time
(:func:`hmac.compare_digest`), so neither the table nor the timing gives a key away.
The file is separate from the store (``<store dir>/keys.db`` by default) so keys work
with any :class:`~plait.stores.base.Store` backend.

Roles are ordered: ``reader`` (search, coverage, FAQ) < ``maintainer`` (+ reindex,
refinery runs, card review) < ``admin`` (everything). A key covers one collection, or
every collection when its collection is ``*``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from plait.errors import NotFoundError, StoreError, ValidationError
from plait.types import Model

__all__ = [
    "ALL_COLLECTIONS",
    "TOKEN_PREFIX",
    "ApiKey",
    "KeyStore",
    "Role",
    "default_keys_path",
    "hash_token",
]

TOKEN_PREFIX = "plait_"
ALL_COLLECTIONS = "*"
_MAX_TOKEN_CHARS = 256

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash  TEXT NOT NULL UNIQUE,
    hint        TEXT NOT NULL,
    role        TEXT NOT NULL,
    collection  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
)
"""


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


def hash_token(token: str) -> str:
    """The stored form of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def default_keys_path(store: str) -> Path:
    """``keys.db`` next to a file store; ``./.plait/keys.db`` for a server store URL."""
    store = store.removeprefix("sqlite:///")
    if "://" in store or store == ":memory:":
        return Path(".plait") / "keys.db"
    return Path(store).expanduser().parent / "keys.db"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class KeyStore:
    """Create, list, revoke and check API keys in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the key file {self.path}: {exc}") from exc
        self._lock = threading.Lock()

    def create(self, *, role: Role | str, collection: str) -> tuple[ApiKey, str]:
        """A new key: returns its record and the token, which is shown only this once."""
        try:
            role = Role(role)
        except ValueError:
            allowed = ", ".join(r.value for r in Role)
            raise ValidationError(f"unknown role {role!r}; use one of: {allowed}") from None
        if not collection or not collection.strip():
            raise ValidationError("a key needs a collection name, or '*' for all collections")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        hint = token[: len(TOKEN_PREFIX) + 4] + "…"
        created = _now()
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO api_keys (token_hash, hint, role, collection, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (hash_token(token), hint, role.value, collection, created),
            )
        key_id = int(cursor.lastrowid or 0)
        return ApiKey(id=key_id, hint=hint, role=role, collection=collection, created_at=created), token

    def list_keys(self, *, include_revoked: bool = True) -> list[ApiKey]:
        """Every key, oldest first."""
        sql = "SELECT id, hint, role, collection, created_at, revoked_at FROM api_keys"
        if not include_revoked:
            sql += " WHERE revoked_at IS NULL"
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id").fetchall()
        return [
            ApiKey(id=r[0], hint=r[1], role=Role(r[2]), collection=r[3], created_at=r[4], revoked_at=r[5])
            for r in rows
        ]

    def revoke(self, key_id: int) -> ApiKey:
        """Revoke a key; revoking one already revoked is a no-op."""
        with self._lock:
            self._db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
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
        with self._lock:
            ids = [
                row[0]
                for row in self._db.execute(
                    "SELECT id FROM api_keys WHERE collection = ? AND revoked_at IS NULL",
                    (collection,),
                ).fetchall()
            ]
            self._db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE collection = ? AND revoked_at IS NULL",
                (_now(), collection),
            )
        wanted = set(ids)
        return [key for key in self.list_keys() if key.id in wanted]

    def authenticate(self, token: str | None) -> ApiKey | None:
        """The active key a token belongs to, or None.

        Every active hash is compared (no early exit), each in constant time.
        """
        if not token or len(token) > _MAX_TOKEN_CHARS:
            return None
        presented = hash_token(token)
        with self._lock:
            rows = self._db.execute(
                "SELECT id, token_hash, hint, role, collection, created_at FROM api_keys "
                "WHERE revoked_at IS NULL"
            ).fetchall()
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
        with self._lock:
            self._db.close()
