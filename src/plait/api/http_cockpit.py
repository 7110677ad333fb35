"""HTTP routes for the web page's debug views (added to the app by ``create_app``).

=================================================  ======  ==========================
route                                              role    → response
=================================================  ======  ==========================
``POST /v1/collections/{c}/arms?limit=``           reader  SearchRequest → ArmLists
``GET  /v1/collections/{c}/sources?prefix=&limit=`` reader  → [SourceEntry]
``GET  /v1/collections/{c}/chunks/{id}``           reader  → ChunkView
=================================================  ======  ==========================

Thin adapters over :meth:`Plait.arms`, :meth:`Plait.sources` and :meth:`Plait.chunk`
(:mod:`plait.cockpit`); a reader never sees draft FAQ cards here either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plait.api.keys import ApiKey, Role, sees_drafts
from plait.cockpit import (
    ARM_LIMIT,
    MAX_ARM_LIMIT,
    MAX_SOURCE_LIMIT,
    ArmLists,
    ChunkView,
    SourceEntry,
)
from plait.search import SearchRequest

if TYPE_CHECKING:
    from fastapi import FastAPI

    from plait.service import Plait

__all__ = ["add_cockpit_routes"]

Allow = Callable[[ApiKey | None, str, Role, str], None]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "no or unknown API key"},
    404: {"description": "no such collection or chunk (or not covered by the key)"},
    422: {"description": "invalid request"},
}


def add_cockpit_routes(app: FastAPI, engine: Plait, allow: Allow, caller: Any) -> None:
    from fastapi import Query

    @app.post(
        "/v1/collections/{collection}/arms", response_model=ArmLists, tags=["search"], responses=_ERRORS
    )
    def arms(
        collection: str,
        body: SearchRequest,
        limit: int = Query(ARM_LIMIT, ge=1, le=MAX_ARM_LIMIT),
        key: ApiKey | None = caller,
    ) -> ArmLists:
        """Each arm's own ranking and the fused order of one search, the top ``limit`` of each."""
        allow(key, collection, Role.READER, "search")
        return engine.arms(collection, body, limit=limit, drafts_visible=sees_drafts(key))

    @app.get(
        "/v1/collections/{collection}/sources",
        response_model=list[SourceEntry],
        tags=["collections"],
        responses=_ERRORS,
    )
    def sources(
        collection: str,
        prefix: str = Query("", max_length=4096),
        limit: int = Query(100, ge=1, le=MAX_SOURCE_LIMIT),
        key: ApiKey | None = caller,
    ) -> list[SourceEntry]:
        """The collection's sources (by id, those starting with ``prefix``) and how explain names each."""
        allow(key, collection, Role.READER, "sources")
        return engine.sources(collection=collection, prefix=prefix, limit=limit, drafts_visible=sees_drafts(key))

    @app.get(
        "/v1/collections/{collection}/chunks/{chunk_id}",
        response_model=ChunkView,
        tags=["collections"],
        responses=_ERRORS,
    )
    def chunk(collection: str, chunk_id: str, key: ApiKey | None = caller) -> ChunkView:
        """One chunk, its raw content and its content as sanitised HTML."""
        allow(key, collection, Role.READER, "chunk")
        return engine.chunk(chunk_id, collection=collection, drafts_visible=sees_drafts(key))
