"""Settings: the only module that reads the environment.

| setting    | env              | default              |
|------------|------------------|----------------------|
| store      | ``PLAIT_STORE``    | ``./.plait/plait.db`` |
| collection | ``PLAIT_COLLECTION`` | ``default``          |
| embedder   | ``PLAIT_EMBEDDER``   | the collection's recorded embedder, else the default |
| keys       | ``PLAIT_KEYS``       | the keys kept in the store    |
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DEFAULT_COLLECTION", "DEFAULT_STORE", "Settings"]

DEFAULT_STORE = "./.plait/plait.db"
DEFAULT_COLLECTION = "default"


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Resolved settings: explicit values win over the environment, which wins over defaults."""

    store: str = DEFAULT_STORE
    collection: str = DEFAULT_COLLECTION
    embedder: str | None = None
    keys: str | None = None

    @classmethod
    def resolve(
        cls,
        *,
        store: str | None = None,
        collection: str | None = None,
        embedder: str | None = None,
        keys: str | None = None,
    ) -> Settings:
        return cls(
            store=store or os.environ.get("PLAIT_STORE") or DEFAULT_STORE,
            collection=collection or os.environ.get("PLAIT_COLLECTION") or DEFAULT_COLLECTION,
            embedder=embedder or os.environ.get("PLAIT_EMBEDDER") or None,
            keys=keys or os.environ.get("PLAIT_KEYS") or None,
        )
