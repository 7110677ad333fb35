"""The data plait passes around and returns: chunks, origins, hits, reports.

Every model serialises to camelCase JSON (``model.model_dump(mode="json", by_alias=True)``
or :func:`to_json`), which is the contract the CLI's ``--json``, the HTTP API and the
MCP tools all share. Python code uses the snake_case attribute names.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from pydantic.alias_generators import to_camel

__all__ = [
    "CardHit",
    "CardSource",
    "Chunk",
    "CollectionInfo",
    "DeletedCollection",
    "EmbeddingReport",
    "FileOrigin",
    "FusionDecision",
    "FusionMethod",
    "FusionSettings",
    "Hit",
    "IndexReport",
    "LexicalWeightMode",
    "Match",
    "Model",
    "Origin",
    "Ranks",
    "SearchMode",
    "SearchResult",
    "SessionOrigin",
    "SkippedSource",
    "SourceGroup",
    "heading_path",
    "to_json",
]


class Model(BaseModel):
    """Base model: immutable, camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
    )


def to_json(model: BaseModel) -> dict[str, Any]:
    """The camelCase JSON form of a model: exactly what the HTTP API returns."""
    return model.model_dump(mode="json", by_alias=True)


class FileOrigin(Model):
    """A chunk cut from a file (Markdown, text, a JSONL/BEIR document)."""

    kind: Literal["file"] = "file"
    source_path: str
    heading_path: list[str] = Field(default_factory=list)
    title: str | None = None


class SessionOrigin(Model):
    """A chunk cut from one event of a chat/agent session log."""

    kind: Literal["session"] = "session"
    session_id: str
    event_id: str | None = None
    title: str | None = None


Origin = Annotated[FileOrigin | SessionOrigin, Field(discriminator="kind")]


def heading_path(origin: FileOrigin | SessionOrigin) -> list[str]:
    """The headings above a chunk: a file's heading path, nothing for a session event."""
    return list(origin.heading_path) if isinstance(origin, FileOrigin) else []


class Chunk(Model):
    """One citable piece of a source, the key both arms share.

    ``id`` is stable: the same source, heading path and content give the same id in
    every run and process. ``source_id`` names the source the chunk was cut from (a
    path relative to the indexed root, a session id, a document id) and is the unit
    that reindex replaces atomically. ``ordinal`` is the chunk's position in it.
    """

    id: str
    source_id: str
    scope: str
    content: str
    content_hash: str
    origin: Origin
    ordinal: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)


class Match(StrEnum):
    """Which arm returned a hit: the badge."""

    SEMANTIC = "semantic"
    LEXICAL = "lexical"
    BOTH = "both"


class SearchMode(StrEnum):
    """Which arms a search runs: ``hybrid`` both (fused), ``lexical`` BM25 only (the
    embedder is never called), ``vector`` the dense arm only (BM25 never runs)."""

    HYBRID = "hybrid"
    LEXICAL = "lexical"
    VECTOR = "vector"


class FusionMethod(StrEnum):
    """How the two ranked lists become one."""

    RRF = "rrf"
    WEIGHTED = "weighted"
    MINMAX = "minmax"
    DBSF = "dbsf"
    ADAPTIVE = "adaptive"


class LexicalWeightMode(StrEnum):
    """``fixed``: ``lexical_weight`` as given; ``auto``: chosen per query (identifier-aware)."""

    FIXED = "fixed"
    AUTO = "auto"


class FusionSettings(Model):
    """The knobs of fusion; the response echoes the ones actually used.

    ``lexical_weight`` is in 0..1: 0.5 weighs both arms equally, 1.0 is lexical only,
    0.0 dense only. For RRF the lexical list's contributions are multiplied by
    ``2 * lexical_weight`` and the dense list's by ``2 * (1 - lexical_weight)``, so the
    default 0.5 is the textbook unweighted RRF. ``weighted`` uses ``vector_weight``
    and ``lexical_score_weight`` (the ADR's 0.6 / 0.4) and drops hits under
    ``threshold`` (0.2).

    ``lexical_weight_mode`` ``auto`` (see :mod:`plait.autoweight`) picks
    ``auto_identifier_weight`` for queries with identifier-like tokens and
    ``auto_default_weight`` otherwise; the response then echoes the weight used in
    ``lexical_weight`` and why in ``lexical_weight_reason``.

    ``minmax`` and ``dbsf`` (see :mod:`plait.fusion_adaptive`) normalise each arm's
    scores to 0..1 (min–max; mean ± 3σ) and add them as ``(1 − dense_weight) ·
    lexical + dense_weight · dense``. ``adaptive`` is ``minmax`` with the dense weight
    chosen per query from each arm's confidence around ``dense_weight``. The response
    echoes the weight actually used in ``dense_weight_used`` and why in
    ``fusion_reason`` (None for rrf / weighted).

    ``language_prior`` (adaptive only): when the embedder declares the language the
    query's stopwords vote for, arms that disagree at the top do not lower the dense
    weight. The response echoes that language in ``query_language`` (``en``, ``pt``,
    None when undetermined) and the embedder's answer in ``embedder_covers_query``
    (None when either side is unknown). Only when the embedder declares languages and
    not the query's does disagreement lower the weight (an undetermined language does
    not).

    ``estimated_base`` (adaptive only) is the collection's own estimate of the base
    (:mod:`plait.arm_estimate`, made when indexing), used instead of ``dense_weight``
    unless the request or the collection's settings name a ``denseWeight``;
    ``estimate_reason`` says how it was measured. ``query_has_identifier`` (set per
    query) keeps the lexical-leaning rule for identifier queries of undetermined language.

    ``identifier_precedence`` (every method): among the first fused candidates, those
    holding every identifier of the query move ahead of those that do not
    (:mod:`plait.retrieval.identifier_first`); ``identifier_reason`` says what moved.
    """

    method: FusionMethod = FusionMethod.ADAPTIVE
    rrf_k: int = Field(default=60, ge=1, le=10_000)
    lexical_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    overfetch: int = Field(default=50, ge=1, le=10_000)
    vector_weight: float = Field(default=0.6, ge=0.0, le=1.0)
    lexical_score_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    threshold: float = Field(default=0.2, ge=0.0, le=1.0)
    lexical_weight_mode: LexicalWeightMode = LexicalWeightMode.FIXED
    auto_identifier_weight: float = Field(default=0.7, ge=0.0, le=1.0)
    auto_default_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    lexical_weight_reason: str | None = None
    dense_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    dense_weight_used: float | None = None
    fusion_reason: str | None = None
    language_prior: bool = True
    estimated_base: float | None = Field(default=None, ge=0.0, le=1.0)
    query_has_identifier: bool | None = None
    estimate_reason: str | None = None
    query_language: str | None = None
    embedder_covers_query: bool | None = None
    identifier_precedence: bool = True
    identifier_reason: str | None = None


class FusionDecision(Model):
    """What fusion used for one query, apart from what the request asked (``fusionAsked``).

    ``method_from`` says where the method came from (the request, the collection's saved
    settings, or the default); ``parameters`` holds only the knobs that method takes,
    with the values in effect (``rrf``: ``k``, ``lexicalWeight`` — the weight chosen when
    ``auto``; ``weighted``: ``vectorWeight``, ``lexicalWeight``, ``threshold``;
    ``minmax``/``dbsf``: ``denseWeight``; ``adaptive``: ``denseWeight`` (the base),
    ``languagePrior``) plus ``overfetch``. The rest are this query's decisions: the
    dense weight the linear fusions used and why, the auto lexical weight's reason, the
    query's language and whether the embedder declares it.
    """

    method: FusionMethod
    method_from: Literal["request", "collection", "default"]
    parameters: dict[str, Any] = Field(default_factory=dict)
    dense_weight_used: float | None = None
    reason: str | None = None
    lexical_weight_reason: str | None = None
    query_language: str | None = None
    embedder_covers_query: bool | None = None
    identifier_reason: str | None = None


class Ranks(Model):
    """1-based position of a hit in each stage; None where the stage did not return it."""

    dense: int | None = None
    lexical: int | None = None
    fused: int | None = None
    rerank: int | None = None


class Hit(Model):
    """A search hit with the citation contract.

    ``vector_score`` and ``lexical_score`` are None — never 0 — when that arm did not
    return the chunk. ``vector_score`` is the cosine similarity; ``lexical_score`` the
    BM25 score (summed over the exact and stemmed fields).

    ``score_normalised`` is ``score`` divided by the highest fused score the settings
    allow over the arms that ran: for RRF ``w_lex / (k + 1) + w_dense / (k + 1)``
    (rank 1 in both arms), for the weighted sum ``vector_weight + lexical_score_weight``
    (cosine 1 and the best BM25 score). 1.0 means "as good as these settings can
    score"; it is comparable between hits of one result, not between collections.

    ``snippet`` is plain text around the chunk's best passage for the query, and
    ``highlights`` the ``[start, end)`` offsets in it of the words that matched a query
    term in either lexical field (:mod:`plait.snippets`); ``content`` is the raw chunk.
    """

    chunk_id: str
    content: str
    score: float
    vector_score: float | None
    lexical_score: float | None
    match: Match
    scope: str
    ranks: Ranks
    origin: Origin
    metadata: dict[str, Any] = Field(default_factory=dict)
    score_normalised: float | None = None
    snippet: str = ""
    highlights: list[list[int]] = Field(default_factory=list)
    more_from_source: int | None = None
    """With ``maxPerSource``: how many fused candidates of this hit's source were left out
    by it (0: none); None when the request set no ``maxPerSource``."""


class SourceGroup(Model):
    """``groupBy: "source"``: one source (file or session) and its best chunks in the page.

    ``chunk_ids`` are its hits in the result's ``hits``, best first; ``score`` the best
    one's; ``more_from_source`` its fused candidates left out by ``maxPerSource``."""

    source_id: str
    origin: Origin
    scope: str
    score: float
    chunk_ids: list[str]
    more_from_source: int = 0


class CardSource(Model):
    """A chunk a FAQ card cites; ``origin`` and ``content`` are None when it is gone."""

    chunk_id: str
    origin: Origin | None = None
    content: str | None = None


class CardHit(Model):
    """A reviewed (or draft) FAQ card that matched a query (``qa_first``).

    ``overlap`` is the Jaccard similarity of the query's and the card question's
    content-word stems; ``vector_score`` the cosine of the two (None without vectors);
    ``score`` the larger of the two. ``mode`` says how the card was made (``llm``,
    ``extractive`` or ``manual``) and ``status`` its review state.
    """

    card_id: str
    question: str
    answer: str
    status: str
    mode: str
    score: float
    overlap: float
    vector_score: float | None = None
    sources: list[CardSource] = Field(default_factory=list)


class SearchResult(Model):
    """What a search returns, in every interface.

    ``rerank`` echoes the rerank method asked for (None: no rerank) and ``k_overfetch``
    how many fused candidates it was given. ``reranked`` is None when no rerank was
    asked, true when the hits are in the reranker's order, false when the fused order
    was kept; ``rerank_reason`` says why not, or what was repaired in the model's
    ordering. ``offset`` is the number of fused positions skipped (paging: the hits
    are positions ``offset + 1 … offset + k``); ``notes`` says what the service
    adjusted on its own (e.g. fusing deeper than the over-fetch to reach an offset).
    ``answered_by`` is set when ``qa_first`` was asked: ``card`` (then ``card`` holds
    the matching FAQ card with its sources and ``hits`` is empty) or ``search`` (no
    card matched; ``hits`` are the hybrid search's). ``vector_coverage`` is the share of
    the collection's chunks that have a vector (0..1): below 1 while the backfill is
    still embedding, when the dense arm ranks only the chunks that have one and a chunk
    without one is scored as if the dense arm agreed with the lexical one (never
    penalised for it, see :mod:`plait.fusion_pending`).
    """

    query: str
    collection: str
    hits: list[Hit]
    vector_available: bool
    mode: SearchMode = SearchMode.HYBRID
    """The arms this search ran (see :class:`SearchMode`)."""
    vector_unavailable_reason: str | None = None
    vector_coverage: float = Field(default=0.0, ge=0.0, le=1.0)
    fusion: FusionSettings
    k: int
    timings_ms: dict[str, float] = Field(default_factory=dict)
    rerank: Literal["llm", "cross-encoder"] | None = None
    k_overfetch: int | None = None
    reranked: bool | None = None
    rerank_reason: str | None = None
    offset: int = 0
    notes: list[str] = Field(default_factory=list)
    answered_by: Literal["card", "search"] | None = None
    card: CardHit | None = None
    fusion_asked: dict[str, Any] = Field(default_factory=dict)
    """The fusion fields exactly as the request gave them (camelCase; unset ones left out)."""
    fusion_decided: FusionDecision | None = None
    """What fusion used for this query (see :class:`FusionDecision`); ``fusion`` is the
    full settings record, kept for compatibility."""
    max_per_source: int | None = None
    """At most this many chunks of one source in the hits (None: no limit); the chunks
    left out are counted in each hit's ``more_from_source``."""
    group_by: Literal["source"] | None = None
    groups: list[SourceGroup] | None = None
    """``groupBy: "source"``: one entry per source in the order of its best hit; ``k``
    and ``offset`` then count sources, and ``hits`` holds every group's chunks."""


class EmbeddingReport(Model):
    """What indexing did with vectors: never claims more than it did.

    ``embedded`` counts texts sent to the embedder, ``reused`` chunks given a vector
    already stored for the same text, ``deduplicated`` chunks given the vector embedded
    in this run for an equal text of another chunk; on a fresh store they add up to
    the chunks that got a vector.
    """

    available: bool
    embedded: int = 0
    reused: int = 0
    deduplicated: int = 0
    skipped: int = 0
    reason: str | None = None
    calls: int = 0


class SkippedSource(Model):
    """A source that was seen and not indexed, with the reason."""

    path: str
    reason: str


class IndexReport(Model):
    """The outcome of an index or reindex run.

    ``complete`` is true only when every seen source was indexed and every chunk got
    a vector (or the collection has no embedder). ``sources_deleted`` counts sources a
    recorded root no longer yields, whose chunks were removed; ``skipped_by_type``
    counts session events left out on purpose by their type (tool calls, statuses,
    errors) — they do not make a run incomplete. ``adr_folders`` names each folder
    whose files were made scope ``adr`` by convention (no scope rules given), with how
    many sources under it (:mod:`plait.sources.conventions`). ``untracked`` lists a git
    working tree's files that match the globs but that git neither tracks nor ignores: a
    git root reads tracked files only, so they were not indexed (``git add`` them); they
    do not make a run incomplete either. ``part_of_root`` and ``nested_roots_left`` say
    how the run applied the rule that a file is indexed once, under one recorded root
    (:mod:`plait.sources.nesting`).
    """

    collection: str
    sources_seen: int = 0
    sources_indexed: int = 0
    sources_deleted: int = 0
    skipped: list[SkippedSource] = Field(default_factory=list)
    skipped_by_type: dict[str, int] = Field(default_factory=dict)
    adr_folders: dict[str, int] = Field(default_factory=dict)
    untracked: list[str] = Field(default_factory=list)
    """Files of a git root that git does not track (not indexed; see above)."""
    part_of_root: str | None = None
    """The recorded root the indexed folder lies inside, which this run indexed it as part
    of (that root's options and source ids; no root recorded for the folder)."""
    nested_roots_left: list[str] = Field(default_factory=list)
    """Recorded roots inside the run's root whose files this run left to them (neither
    indexed again nor deleted)."""
    added_sources: list[str] = Field(default_factory=list)
    """Sources this run wrote for the first time."""
    changed_sources: list[str] = Field(default_factory=list)
    """Sources already stored whose chunks this run added, changed or removed."""
    deleted_sources: list[str] = Field(default_factory=list)
    """Sources a recorded root no longer yields, removed by this run."""
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_unchanged: int = 0
    chunks_deleted: int = 0
    embedding: EmbeddingReport
    complete: bool
    elapsed_ms: float = 0.0
    _hidden_changes: int = PrivateAttr(default=0)

    @property
    def vectors_complete(self) -> bool:
        """Whether every chunk of the collection has a vector after the run (sources the
        run skipped aside): what the calibrations at the end of a run need, unlike
        ``complete``, which a skipped file also makes false."""
        return self.embedding.skipped == 0

    @property
    def search_changes(self) -> int:
        """The chunks this run added, updated or deleted that a search naming no scope can
        return: FAQ cards (scopes hidden by ``searchHidden``) not counted. What
        :mod:`plait.staleness` counts (calibrations sample only those chunks)."""
        return max(0, self.chunks_added + self.chunks_updated + self.chunks_deleted - self._hidden_changes)

    @property
    def hidden_changes(self) -> int:
        """The chunk changes of this run in scopes hidden from search (FAQ cards)."""
        return self._hidden_changes

    def with_hidden_changes(self, changes: int) -> IndexReport:
        """This report, of which ``changes`` chunk changes were of hidden scopes."""
        report = self.model_copy()
        report._hidden_changes = changes
        return report


class DeletedCollection(Model):
    """What deleting a collection did: whether it existed, and the API keys revoked."""

    name: str
    deleted: bool
    revoked_keys: list[int] = Field(default_factory=list)


class CollectionInfo(Model):
    """A collection's identity: the embedding model is fixed when first indexed."""

    name: str
    embedder_provider: str | None = None
    embedder_model: str | None = None
    dimension: int | None = None
    chunks: int = 0
    chunks_without_vector: int = 0
    sources: int = 0
    created_at: str | None = None
    last_indexed_at: str | None = None

