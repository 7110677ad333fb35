"""MCP tools for agents, over stdio: ``collections``, ``search``, ``explain``, ``coverage``, ``reindex``.

A thin adapter over :class:`plait.service.Plait` built on the official MCP Python SDK
(2.x, ``MCPServer``). Each tool returns the same camelCase model the HTTP API and the
CLI's ``--json`` return, as structured content. A :class:`~plait.errors.PlaitError`
becomes a tool error carrying its one-line message (the agent can read and correct
it); anything else is reported by the SDK as a crash, with no details.

The SDK is the ``mcp`` extra: ``pip install 'plait[mcp]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from plait.errors import ConfigError, PlaitError
from plait.types import to_json

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from plait.service import Plait

__all__ = ["create_mcp_server"]

T = TypeVar("T")

_INSTRUCTIONS = (
    "plait searches a team's own knowledge (docs, ADRs, session logs) with hybrid "
    "retrieval: BM25 and dense vectors fused before the top-k cut. Every hit carries its "
    "origin (file path › heading path, or session/event), a match badge (lexical, "
    "semantic, both) and its rank in each arm: cite hits by their origin. Use the exact "
    "identifier (ERR-4012, SKU-88213-B, function names) in the query when there is one."
)


def create_mcp_server(
    engine: Plait, *, default_collection: str = "default", allow_reindex: bool = True
) -> MCPServer:
    """An MCP server whose tools call ``engine``; ``allow_reindex=False`` leaves reindex out."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise ConfigError("the MCP server needs the MCP SDK: pip install 'plait[mcp]'") from None

    server: MCPServer = MCPServer(name="plait", instructions=_INSTRUCTIONS, log_level="WARNING")

    def call(action: Callable[[], T]) -> T:
        try:
            return action()
        except PlaitError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    def collections() -> list[dict[str, Any]]:
        """List the collections with their embedding model, chunk and source counts."""
        return [to_json(info) for info in call(engine.collections)]

    @server.tool()
    def search(
        query: str,
        collection: str | None = None,
        k: int = 8,
        fusion: str | None = None,
        lexical_weight: float | str | None = None,
        scopes: list[str] | None = None,
    ) -> dict[str, Any]:
        """Hybrid search. `fusion` is 'rrf' (default) or 'weighted'; `lexical_weight` 0..1
        (0.5 weighs both arms equally, 1 is lexical only) or 'auto' (leans lexical when the
        query holds identifiers); `scopes` limits to e.g. ['adr'].
        Returns hits with content, score, match badge, ranks per arm and origin."""
        name = collection or default_collection
        result = call(
            lambda: engine.search(
                query, collection=name, k=k, fusion=fusion, lexical_weight=lexical_weight, scopes=scopes
            )
        )
        return to_json(result)

    @server.tool()
    def explain(
        query: str,
        doc: str | None = None,
        path: str | None = None,
        chunk: str | None = None,
        collection: str | None = None,
        k: int = 8,
        lexical_weight: float | str | None = None,
        scopes: list[str] | None = None,
    ) -> dict[str, Any]:
        """Why did a document (not) come back for `query`? Name it by exactly one of `doc`
        (document id), `path` (source path) or `chunk` (chunk id). Returns every stage for
        it — ingestion, lexical terms that matched or not and why, exact rank in each arm,
        fused rank and what cut it — and a one-line `diagnosis` naming the stage to fix."""
        name = collection or default_collection
        result = call(
            lambda: engine.explain(
                query, doc=doc, path=path, chunk=chunk, collection=name, k=k,
                lexical_weight=lexical_weight, scopes=scopes,
            )
        )
        return to_json(result)

    @server.tool()
    def coverage(collection: str | None = None) -> dict[str, Any]:
        """How much of the sources is indexed, per scope: sources present vs indexed,
        outdated and vanished sources, chunks without a vector, last indexed time."""
        name = collection or default_collection
        return to_json(call(lambda: engine.coverage(collection=name)))

    if allow_reindex:

        @server.tool()
        def reindex(collection: str | None = None) -> dict[str, Any]:
            """Re-read the collection's recorded sources (unchanged chunks are not
            re-embedded), delete vanished ones and backfill missing vectors."""
            name = collection or default_collection
            return to_json(call(lambda: engine.reindex(collection=name)))

    return server
