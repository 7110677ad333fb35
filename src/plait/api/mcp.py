"""MCP tools for agents: ``collections``, ``search``, ``explain``, ``ask``, ``faq_list``,
``coverage``, ``reindex`` (unless left out) and ``usage`` (only when asked for) — served over
stdio or streamable HTTP (see ``plait mcp``).

An agent is a reader: it sees approved FAQ cards only, and provider usage — a maintainer's
figure over HTTP — is offered to it only when whoever starts the server says so
(``allow_usage=True``, ``plait mcp --usage``). ``reindex`` (a maintainer's call over HTTP)
is the one exception, offered unless ``--no-reindex``: it re-reads only the sources the
collection recorded — it reads nothing new, and deletes only the chunks of sources that
vanished — which an agent that has just edited a file needs.

A thin adapter over :class:`plait.service.Plait` built on the official MCP Python SDK
(2.x, ``MCPServer``). Each tool returns the same camelCase model the HTTP API and the
CLI's ``--json`` return, as structured content. A :class:`~plait.errors.PlaitError`
becomes a tool error carrying its one-line message (the agent can read and correct
it); anything else is reported by the SDK as a crash, with no details. Arguments are
taken as strictly as the HTTP API takes a body (:mod:`plait.api.mcp_strict`): an
unknown one, ``true`` for a number, NaN or a wrong type is a one-line tool error naming it.

The SDK is the ``mcp`` extra: ``pip install 'plait[mcp]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

from pydantic import BeforeValidator, StrictBool, WithJsonSchema

from plait.errors import ConfigError, PermissionDeniedError, PlaitError
from plait.retrieval.numbers import plain_number
from plait.retrieval.request import SearchRequest
from plait.types import to_json

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from plait.service import Plait

__all__ = ["create_mcp_server"]

T = TypeVar("T")

# Argument types: the SDK's lax model would read true as 1 and pass NaN on; these refuse
# them as the HTTP API's request models do. Ranges are the request models' (via the engine).
Integer = Annotated[int, BeforeValidator(plain_number)]
Number = Annotated[float, BeforeValidator(plain_number)]
Weight = Annotated[float | str | None, BeforeValidator(plain_number)]
"""``lexical_weight``: 0..1 or 'auto'."""


def _inlined(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with each ``$ref`` to ``defs`` replaced by its definition (no discriminator:
    its mapping names ``$defs`` a tool argument's schema does not have)."""
    if isinstance(schema, list):
        return [_inlined(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return _inlined(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    return {key: _inlined(value, defs) for key, value in schema.items() if key != "discriminator"}


def _fusion_schema() -> dict[str, Any]:
    """The HTTP API's ``fusion`` field (a method name or a fusion object), self-contained."""
    schema = SearchRequest.model_json_schema(by_alias=True)
    return cast(dict[str, Any], _inlined(schema["properties"]["fusion"], schema.get("$defs", {})))


Fusion = Annotated[Any, WithJsonSchema(_fusion_schema())]
"""``fusion``: a method name or a fusion object, as the HTTP API takes it. Its schema is the
API's; the SDK passes the value on as given and the engine's request model checks it, so a
bad one is the HTTP API's own one-line error."""

_INSTRUCTIONS = (
    "plait searches a team's own knowledge (docs, ADRs, session logs) with hybrid "
    "retrieval: BM25 and dense vectors fused before the top-k cut. Every hit carries its "
    "origin (file path › heading path, or session/event), a match badge (lexical, "
    "semantic, both) and its rank in each arm: cite hits by their origin. Use the exact "
    "identifier (ERR-4012, SKU-88213-B, function names) in the query when there is one."
)


def create_mcp_server(
    engine: Plait,
    *,
    default_collection: str = "default",
    allow_reindex: bool = True,
    allow_usage: bool = False,
) -> MCPServer:
    """An MCP server whose tools call ``engine``; ``allow_reindex=False`` leaves reindex out,
    ``allow_usage=True`` adds the (maintainer's) usage tool."""
    try:
        from mcp.server.mcpserver.exceptions import ToolError

        from plait.api.mcp_strict import StrictMCPServer
    except ImportError:
        raise ConfigError("the MCP server needs the MCP SDK: pip install 'plait[mcp]'") from None

    server = StrictMCPServer(name="plait", instructions=_INSTRUCTIONS, log_level="WARNING")

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
        k: Integer = 8,
        offset: Integer = 0,
        fusion: Fusion = None,
        lexical_weight: Weight = None,
        language_prior: StrictBool | None = None,
        scopes: list[str] | None = None,
        rerank: str | None = None,
        k_overfetch: Integer | None = None,
        qa_first: StrictBool = False,
        mode: str = "hybrid",
        max_per_source: Integer | None = None,
        group_by: str | None = None,
    ) -> dict[str, Any]:
        """Hybrid search. `fusion` is a method name — 'adaptive' (default: min-max
        normalised scores, dense weight chosen per query, echoed in `fusion.denseWeightUsed`
        / `fusionReason`), 'rrf', 'weighted', 'minmax' or 'dbsf' — or a fusion object as
        the HTTP API takes it, the method with its own knobs: {"method": "minmax" or "dbsf",
        "denseWeight": 0.8}, {"method": "adaptive", "denseWeight": 0.6 (the base),
        "languagePrior": false}, {"method": "rrf", "k": 30, "lexicalWeight": 0.7},
        {"method": "weighted", "vectorWeight": 0.6, "lexicalWeight": 0.4, "threshold": 0.2};
        without "method" ({"denseWeight": 0.8}) the knobs are for the collection's own
        method. A knob the method does not take is an error naming the knobs it takes;
        `fusionAsked` echoes what was asked, `fusionDecided` the method, where it came from
        and the knobs in effect. `lexical_weight` (with fusion 'rrf') 0..1
        (0.5 weighs both arms equally, 1 is lexical only) or 'auto' (leans lexical when the
        query holds identifiers); `language_prior` false makes 'adaptive' ignore whether the
        embedder declares the query's language (`fusion.queryLanguage`,
        `embedderCoversQuery`); with a fusion object both go inside it instead. `scopes`
        limits to e.g. ['adr']; `offset` pages (hits are
        fused positions offset+1 … offset+k); `rerank` is 'llm' or 'cross-encoder' and
        reorders the fused top max(k, `k_overfetch`) before the cut; `qa_first` answers with
        a reviewed FAQ card when one matches (`answeredBy`, `card`); `mode` is 'hybrid'
        (both arms), 'lexical' (BM25 only, no embedding) or 'vector' (dense only, no BM25);
        `max_per_source` keeps at most N chunks of one file or session (the rest counted in
        each hit's `moreFromSource`); `group_by` 'source' adds `groups`, one per source.
        Returns hits with content, score, match badge, ranks per arm and origin."""
        name = collection or default_collection
        request: dict[str, Any] = {
            "query": query, "k": k, "offset": offset, "fusion": fusion,
            "lexicalWeight": lexical_weight, "languagePrior": language_prior, "scopes": scopes, "rerank": rerank,
            "kOverfetch": k_overfetch, "qaFirst": qa_first, "mode": mode,
            "maxPerSource": max_per_source, "groupBy": group_by,
        }
        options = {key: value for key, value in request.items() if value is not None}
        # an agent is a reader: FAQ cards not yet approved stay out of its searches
        return to_json(call(lambda: engine.search_request(name, options, drafts_visible=False)))

    @server.tool()
    def explain(
        query: str,
        doc: str | None = None,
        path: str | None = None,
        chunk: str | None = None,
        collection: str | None = None,
        k: Integer = 8,
        fusion: Fusion = None,
        lexical_weight: Weight = None,
        language_prior: StrictBool | None = None,
        scopes: list[str] | None = None,
        mode: str = "hybrid",
        max_per_source: Integer | None = None,
    ) -> dict[str, Any]:
        """Why did a document (not) come back for `query`? Name it by exactly one of `doc`
        (document id), `path` (source path) or `chunk` (chunk id). Returns every stage for
        it — ingestion, lexical terms that matched or not and why, exact rank in each arm,
        fused rank and what cut it — and a one-line `diagnosis` naming the stage to fix.
        The other arguments are the traced search's, as `search` takes them: give the
        `fusion` (a method name or a fusion object such as {"method": "minmax",
        "denseWeight": 0.8}), `lexical_weight`, `language_prior`, `k`, `scopes`, `mode` and
        `max_per_source` a search used to explain that search; `fusion.settings` reports the
        fusion it ran, `fusion.rank` the document's fused rank under it."""
        name = collection or default_collection
        result = call(
            lambda: engine.explain(
                query, doc=doc, path=path, chunk=chunk, collection=name, k=k, fusion=fusion,
                lexical_weight=lexical_weight, language_prior=language_prior, scopes=scopes, mode=mode,
                max_per_source=max_per_source,
                drafts_visible=False,  # the trace of the agent's own (reader's) search
            )
        )
        return to_json(result)

    @server.tool()
    def ask(
        question: str,
        collection: str | None = None,
        k: Integer | None = None,
        qa_first: StrictBool = False,
        rerank: str | None = None,
        scopes: list[str] | None = None,
        mode: str = "hybrid",
        min_cosine: Number | None = None,
        min_term_coverage: Number | None = None,
    ) -> dict[str, Any]:
        """A grounded answer to `question` with `[n]` citations: each citation names the
        chunk, its origin (path › headings) and the quoted sentence. `mode` says how it was
        made (llm, extractive, card, not-found); `grounded` is false when nothing relevant
        was found. `qa_first` prefers a reviewed FAQ card; `mode` ('hybrid', 'lexical',
        'vector') picks the search's arms (echoed in `searchMode`). The relevance gate is
        the collection's calibrated one (`gate`, and `gateChecks` says why each hit passed
        or failed); `min_cosine` / `min_term_coverage` override it for this call. Sentences
        of an LLM answer that cite no source are dropped and listed in `dropped`. Only approved FAQ cards answer (an agent
        is a reader)."""
        name = collection or default_collection
        result = call(
            lambda: engine.ask(
                question, collection=name, k=k, qa_first=qa_first,
                include_drafts=False, rerank=rerank, scopes=scopes, mode=mode,
                min_cosine=min_cosine, min_term_coverage=min_term_coverage,
            )
        )
        return to_json(result)

    @server.tool()
    def faq_list(collection: str | None = None, status: str = "approved") -> list[dict[str, Any]]:
        """The collection's approved FAQ cards (question, answer, sources), oldest first.
        An agent is a reader: draft and rejected cards are for maintainer keys over HTTP."""
        name = collection or default_collection

        def approved() -> list[Any]:
            if status in ("draft", "rejected"):
                raise PermissionDeniedError(
                    f"FAQ cards with status {status!r} are for maintainer keys over HTTP; "
                    "an MCP agent is a reader and sees approved cards only",
                    status=403,
                )
            return list(engine.refinery.cards(name, status=status))  # an unknown status: its error

        return [to_json(card) for card in call(approved)]

    @server.tool()
    def coverage(collection: str | None = None) -> dict[str, Any]:
        """How much of the sources is indexed, per scope: sources present vs indexed,
        outdated and vanished sources, chunks without a vector, last indexed time."""
        name = collection or default_collection
        return to_json(call(lambda: engine.coverage(collection=name)))

    if allow_usage:

        @server.tool()
        def usage(collection: str | None = None, since: str | None = None) -> dict[str, Any]:
            """Provider usage of the collection: embedding calls, texts and tokens, LLM prompt
            and completion tokens, per hour (`rows`) and in total (`totals`), by purpose (index,
            query, rerank, ask, refinery), provider and model; `estimated` marks tokens the
            provider did not report. `since` is an ISO date/time or '24h' / '7d'."""
            name = collection or default_collection
            return to_json(call(lambda: engine.usage(name, since=since)))

    if allow_reindex:

        @server.tool()
        def reindex(collection: str | None = None) -> dict[str, Any]:
            """Re-read the collection's recorded sources (unchanged chunks are not
            re-embedded), delete vanished ones and backfill missing vectors."""
            name = collection or default_collection
            return to_json(call(lambda: engine.reindex(collection=name)))

    return server
