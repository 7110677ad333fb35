"""What both framework retrievers share: option checking, the search call, hit metadata.

A retriever's search options are :meth:`plait.Plait.search`'s keyword options, except
``metadata`` — the chunk-metadata filter — which is called ``filter`` here, since both
frameworks use ``metadata`` for something else (LangChain's tracing metadata).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from plait.client import AsyncClient, Client
from plait.errors import ConfigError
from plait.types import FileOrigin, Hit, SearchResult, to_json

if TYPE_CHECKING:
    from plait.service import Plait

__all__ = ["asearch", "check_engine", "check_options", "hit_metadata", "search"]

_FIXED = ("self", "query", "collection", "k")


def _search_options() -> tuple[str, ...]:
    from plait.service import Plait

    names = [n for n in inspect.signature(Plait.search).parameters if n not in _FIXED]
    return tuple("filter" if n == "metadata" else n for n in names)


def check_engine(engine: object) -> None:
    """Refuse anything but a :class:`~plait.Plait`, :class:`~plait.Client` or :class:`~plait.AsyncClient`."""
    from plait.service import Plait

    if not isinstance(engine, (Plait, Client, AsyncClient)):
        raise ConfigError(
            f"engine must be a plait.Plait, plait.Client or plait.AsyncClient, got {type(engine).__name__}"
        )


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The search options, with an unknown name refused (a typo must not be ignored)."""
    allowed = _search_options()
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        hint = " (the chunk-metadata filter is 'filter')" if "metadata" in unknown else ""
        raise ConfigError(
            f"unknown search option(s) {', '.join(map(repr, unknown))}{hint}; allowed: {', '.join(allowed)}"
        )
    return dict(options)


def _call_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {("metadata" if name == "filter" else name): value for name, value in options.items()}


def search(
    engine: Plait | Client | AsyncClient, query: str, *, collection: str, k: int, options: Mapping[str, Any]
) -> SearchResult:
    """One search on a synchronous engine."""
    if isinstance(engine, AsyncClient):
        raise ConfigError("this retriever's engine is an AsyncClient: call it asynchronously (ainvoke / aretrieve)")
    return engine.search(query, collection=collection, k=k, **_call_options(options))


async def asearch(
    engine: Plait | Client | AsyncClient, query: str, *, collection: str, k: int, options: Mapping[str, Any]
) -> SearchResult:
    """One search from a coroutine: awaited on an AsyncClient, else run in a worker thread."""
    if isinstance(engine, AsyncClient):
        return await engine.search(query, collection=collection, k=k, **_call_options(options))
    return await asyncio.to_thread(search, engine, query, collection=collection, k=k, options=options)


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """A hit's citation contract as framework metadata: its camelCase JSON without
    ``content`` (the document's text), plus ``source`` — the source path of a file, the
    session id of a session — for prompts that cite by source."""
    data = to_json(hit)
    data.pop("content")
    origin = hit.origin
    data["source"] = origin.source_path if isinstance(origin, FileOrigin) else origin.session_id
    return data
