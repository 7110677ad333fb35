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
``search``, ``explain`` and ``ask`` take the HTTP API's request fields (snake_case: ``rrf_k``
for ``rrfK``; ``explain`` all of search's but ``qa_first``, which a trace has no use for;
``ask`` all but ``includeDrafts``, an agent being a reader) and build the HTTP API's
request model from them (:mod:`plait.api.mcp_arguments`), so a bad value is the 422's own
one-line message.

The SDK is the ``mcp`` extra: ``pip install 'plait[mcp]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from plait.api.mcp_arguments import (
    AskK,
    Fusion,
    GroupBy,
    K,
    KOverfetch,
    LanguagePrior,
    LexicalWeight,
    MaxPerSource,
    Metadata,
    MinCosine,
    MinTermCoverage,
    Mode,
    Offset,
    Overfetch,
    QaFirst,
    Rerank,
    RrfK,
    Scopes,
    Threshold,
    request,
)
from plait.ask import AskRequest
from plait.collection_names import given_name
from plait.errors import ConfigError, PermissionDeniedError, PlaitError
from plait.retrieval.request import DEFAULT_K_OVERFETCH, SearchRequest
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
        k: K = 8,
        offset: Offset = 0,
        fusion: Fusion = None,
        lexical_weight: LexicalWeight = None,
        rrf_k: RrfK = None,
        threshold: Threshold = None,
        language_prior: LanguagePrior = None,
        overfetch: Overfetch = None,
        scopes: Scopes = None,
        metadata: Metadata = None,
        rerank: Rerank = None,
        k_overfetch: KOverfetch = DEFAULT_K_OVERFETCH,
        qa_first: QaFirst = False,
        mode: Mode = "hybrid",
        max_per_source: MaxPerSource = None,
        group_by: GroupBy = None,
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
        and the knobs in effect. With a method name, its knobs are arguments: 'rrf' takes
        `rrf_k` (the k in 1/(k + rank)) and `lexical_weight` 0..1 (0.5 weighs both arms
        equally, 1 is lexical only) or 'auto' (leans lexical when the query holds
        identifiers); 'weighted' takes `threshold` 0..1 (hits scoring less are dropped);
        'adaptive' takes `language_prior` (false: ignore whether the embedder declares the
        query's language, `fusion.queryLanguage`, `embedderCoversQuery`); with a fusion
        object they go inside it instead. `overfetch` (every method) is the candidates each
        arm fetches before fusion, beside `fusion`, never inside it. `scopes` limits to e.g.
        ['adr']; `metadata` keeps hits whose metadata has each key = value ({"lang": "en"});
        `offset` pages (hits are fused positions offset+1 … offset+k); `rerank` is 'llm' or
        'cross-encoder' and reorders the fused top max(k, `k_overfetch`) before the cut;
        `qa_first` answers with a reviewed FAQ card when one matches (`answeredBy`, `card`);
        `mode` is 'hybrid' (both arms), 'lexical' (BM25 only, no embedding) or 'vector'
        (dense only, no BM25); `max_per_source` keeps at most N chunks of one file or
        session (the rest counted in each hit's `moreFromSource`); `group_by` 'source' adds
        `groups`, one per source. Arguments are the HTTP API's search body, checked as it is.
        Returns hits with content, score, match badge, ranks per arm and origin."""
        name = call(lambda: given_name(collection, default_collection))
        arguments = {
            "query": query, "k": k, "offset": offset, "fusion": fusion, "lexical_weight": lexical_weight,
            "rrf_k": rrf_k, "threshold": threshold, "language_prior": language_prior, "overfetch": overfetch,
            "scopes": scopes, "metadata": metadata, "rerank": rerank, "k_overfetch": k_overfetch,
            "qa_first": qa_first, "mode": mode, "max_per_source": max_per_source, "group_by": group_by,
        }
        # an agent is a reader: FAQ cards not yet approved stay out of its searches
        return to_json(
            call(lambda: engine.search_request(name, request(SearchRequest, arguments), drafts_visible=False))
        )

    @server.tool()
    def explain(
        query: str,
        doc: str | None = None,
        path: str | None = None,
        chunk: str | None = None,
        collection: str | None = None,
        k: K = 8,
        offset: Offset = 0,
        fusion: Fusion = None,
        lexical_weight: LexicalWeight = None,
        rrf_k: RrfK = None,
        threshold: Threshold = None,
        language_prior: LanguagePrior = None,
        overfetch: Overfetch = None,
        scopes: Scopes = None,
        metadata: Metadata = None,
        rerank: Rerank = None,
        k_overfetch: KOverfetch = DEFAULT_K_OVERFETCH,
        mode: Mode = "hybrid",
        max_per_source: MaxPerSource = None,
        group_by: GroupBy = None,
    ) -> dict[str, Any]:
        """Why did a document (not) come back for `query`? Name it by exactly one of `doc`
        (document id), `path` (source path) or `chunk` (chunk id). Returns every stage for
        it — ingestion, lexical terms that matched or not and why, exact rank in each arm,
        fused rank, rerank and what cut it — and a one-line `diagnosis` naming the stage to
        fix. The other arguments are the traced search's, as `search` takes them: give the
        `k`, `offset` (the page), `fusion` (a method name or a fusion object such as
        {"method": "minmax", "denseWeight": 0.8}), `lexical_weight`, `rrf_k`, `threshold`,
        `language_prior`, `overfetch`, `scopes`, `metadata`, `rerank`, `k_overfetch`,
        `mode`, `max_per_source` and `group_by` a search used to explain that search;
        `fusion.settings` reports the fusion it ran, `fusion.rank` the document's fused rank
        under it, `fusion.offset` the page, `rerank` its place before and after the rerank."""
        name = call(lambda: given_name(collection, default_collection))
        arguments = {
            "query": query, "k": k, "offset": offset, "fusion": fusion, "lexical_weight": lexical_weight,
            "rrf_k": rrf_k, "threshold": threshold, "language_prior": language_prior, "overfetch": overfetch,
            "scopes": scopes, "metadata": metadata, "rerank": rerank, "k_overfetch": k_overfetch,
            "mode": mode, "max_per_source": max_per_source, "group_by": group_by,
        }

        def traced() -> Any:
            # the search options as the HTTP API's explain passes them on
            options = request(SearchRequest, arguments).model_dump(exclude={"query"}, exclude_none=True)
            return engine.explain(
                query, doc=doc, path=path, chunk=chunk, collection=name,
                drafts_visible=False,  # the trace of the agent's own (reader's) search
                **options,
            )

        return to_json(call(traced))

    @server.tool()
    def ask(
        question: str,
        collection: str | None = None,
        k: AskK = None,
        qa_first: QaFirst = False,
        rerank: Rerank = None,
        scopes: Scopes = None,
        mode: Mode = "hybrid",
        min_cosine: MinCosine = None,
        min_term_coverage: MinTermCoverage = None,
    ) -> dict[str, Any]:
        """A grounded answer to `question` with `[n]` citations: each citation names the
        chunk, its origin (path › headings) and the quoted sentence. `mode` says how it was
        made (llm, extractive, card, not-found); `grounded` is false when nothing relevant
        was found. `qa_first` prefers a reviewed FAQ card; `mode` ('hybrid', 'lexical',
        'vector') picks the search's arms (echoed in `searchMode`). The relevance gate is
        the collection's calibrated one (`gate`, and `gateChecks` says why each hit passed
        or failed); `min_cosine` / `min_term_coverage` override it for this call. Sentences
        of an LLM answer that cite no source are dropped and listed in `dropped`. Only approved FAQ cards answer (an agent
        is a reader). Arguments are the HTTP API's ask body, checked as it is."""
        name = call(lambda: given_name(collection, default_collection))
        arguments = {
            "question": question, "k": k, "qa_first": qa_first, "rerank": rerank, "scopes": scopes,
            "mode": mode, "min_cosine": min_cosine, "min_term_coverage": min_term_coverage,
            "include_drafts": False,  # an agent is a reader
        }
        return to_json(call(lambda: engine.ask_request(name, request(AskRequest, arguments))))

    @server.tool()
    def faq_list(collection: str | None = None, status: str = "approved") -> list[dict[str, Any]]:
        """The collection's approved FAQ cards (question, answer, sources), oldest first.
        An agent is a reader: draft and rejected cards are for maintainer keys over HTTP."""
        name = call(lambda: given_name(collection, default_collection))

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
        name = call(lambda: given_name(collection, default_collection))
        return to_json(call(lambda: engine.coverage(collection=name)))

    if allow_usage:

        @server.tool()
        def usage(collection: str | None = None, since: str | None = None) -> dict[str, Any]:
            """Provider usage of the collection: embedding calls, texts and tokens, LLM prompt
            and completion tokens, per hour (`rows`) and in total (`totals`), by purpose (index,
            query, rerank, ask, refinery), provider and model; `estimated` marks tokens the
            provider did not report. `since` is an ISO date/time or '24h' / '7d'."""
            name = call(lambda: given_name(collection, default_collection))
            return to_json(call(lambda: engine.usage(name, since=since)))

    if allow_reindex:

        @server.tool()
        def reindex(collection: str | None = None) -> dict[str, Any]:
            """Re-read the collection's recorded sources (unchanged chunks are not
            re-embedded), delete vanished ones and backfill missing vectors."""
            name = call(lambda: given_name(collection, default_collection))
            return to_json(call(lambda: engine.reindex(collection=name)))

    return server
