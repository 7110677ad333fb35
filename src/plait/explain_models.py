"""The models of :mod:`plait.explain` and the one-line diagnosis rule.

:func:`diagnose` walks the pipeline in order and returns the first case that fits:
ingestion (never indexed / skipped), filters, absent from both arms, beyond the
over-fetch in both arms, demoted by rerank, missed by the lexical arm, fusion worked
(one arm rescued what the other ranked low) or fusion demoted it (the other arm pulled
it further from the first arm's rank than it lifted it), found, the weighted threshold,
missed by the dense arm, and finally the top-k cut. A diagnosis never credits or blames
an arm that did not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

from pydantic import Field

from plait.ask_gate import Gate, GateVerdict
from plait.kept_versions import KeptVersion
from plait.retrieval.request import MAX_K, SearchRequest
from plait.types import FusionMethod, FusionSettings, Model, SearchMode

__all__ = [
    "ArmStage",
    "AskGateStage",
    "ChunkJourney",
    "Diagnosis",
    "DiagnosisCode",
    "DroppedBy",
    "ExplainResult",
    "FusionStage",
    "IngestionStage",
    "LexicalStage",
    "RerankStage",
    "Stage",
    "TermMatch",
    "diagnose",
    "tilt_advice",
]

class DiagnosisCode(StrEnum):
    """Which case a journey falls in; :class:`Diagnosis` says it in words."""

    NOT_INDEXED = "not-indexed"
    SKIPPED = "skipped"
    FILTERED = "filtered"
    HIDDEN = "hidden"
    ABSENT_BOTH = "absent-both"
    BEYOND_OVERFETCH = "beyond-overfetch"
    RERANK_DEMOTED = "rerank-demoted"
    LEXICAL_MISS = "lexical-miss"
    DENSE_MISS = "dense-miss"
    FUSION_WORKED = "fusion-worked"
    FUSION_DEMOTED = "fusion-demoted"
    TOP_K = "top-k"
    THRESHOLD = "threshold"
    MAX_PER_SOURCE = "max-per-source"
    FOUND = "found"


Stage = Literal["ingestion", "filters", "lexical", "dense", "fusion", "rerank"]
#: The stage that kept a document out of the page (see :func:`plait.explain.dropped_by`).
DroppedBy = Literal["filters", "hidden", "overfetch", "threshold", "max-per-source", "top-k", "rerank"]


class Diagnosis(Model):
    """One line: the case, the stage to look at, and why."""

    code: DiagnosisCode
    stage: Stage | None
    message: str


class TermMatch(Model):
    """One query token against one chunk's two lexical fields."""

    raw: str
    exact: str | None
    stems: list[str]
    identifier: bool
    stopword: bool
    matched_exact: bool
    matched_stems: list[str]
    reason: str | None = None
    """Why it did not match (None when it did)."""


class ChunkJourney(Model):
    """Where one chunk of the document went in every stage (ranks 1-based, exact)."""

    chunk_id: str
    source_id: str
    scope: str
    ordinal: int
    """Its position in its source, from 0."""
    source_chunks: int | None = None
    """How many chunks its source has (ordinals 0 to this − 1): "chunk 3 of 7" (None from a
    server that predates the field)."""
    heading_path: list[str] = Field(default_factory=list)
    has_vector: bool
    passes_filters: bool
    hidden: bool = False
    """Left out of this search: its scope is searched only when named (``searchHidden``),
    or it is a draft FAQ card and the caller a reader."""
    lexical_rank: int | None = None
    lexical_score: float | None = None
    dense_rank: int | None = None
    cosine: float | None = None
    fused_rank: int | None = None
    fused_score: float | None = None
    rerank_rank: int | None = None
    cut_by_max_per_source: bool = False
    """Fused, but left out by ``maxPerSource``: its source had that many chunks fused above it."""
    returned: bool = False
    dropped_by: DroppedBy | None = None
    """The stage that kept this chunk out of the page, as :attr:`FusionStage.dropped_by`
    says it for the whole document (None: returned)."""
    terms: list[TermMatch] = Field(default_factory=list)


class IngestionStage(Model):
    """Was the source seen and indexed, and with how many chunks and vectors."""

    indexed: bool
    source_ids: list[str] = Field(default_factory=list)
    chunks: int = 0
    chunks_with_vector: int = 0
    skipped: bool = False
    skip_reason: str | None = None
    root: str | None = None
    kept_versions: dict[str, KeptVersion] = Field(default_factory=dict)
    """Its sources whose chunks are an older version, kept because the last run of their
    root could not read the current file (:mod:`plait.kept_versions`), by source id."""
    message: str


class ArmStage(Model):
    """One arm for the document's best chunk in that arm."""

    ran: bool
    reason: str | None = None
    candidates: int = 0
    """Chunks the arm ranks at all (every match / every chunk with a vector)."""
    overfetch: int
    chunk_id: str | None = None
    rank: int | None = None
    score: float | None = None
    within_overfetch: bool = False


class LexicalStage(ArmStage):
    """The lexical arm, with the terms it searched and how they met the chunk."""

    exact_terms: list[str] = Field(default_factory=list)
    stem_terms: list[str] = Field(default_factory=list)
    terms: list[TermMatch] = Field(default_factory=list)
    terms_chunk_id: str | None = None
    """The chunk ``terms`` are held against: ``chunkId``, else (no chunk ranked lexically)
    the chunk the fusion stage is about, else the best dense one, else the first."""


class FusionStage(Model):
    """The fused position of the document's best chunk and what cut it, if anything."""

    settings: FusionSettings
    chunk_id: str | None = None
    rank: int | None = None
    score: float | None = None
    score_normalised: float | None = None
    k: int
    offset: int = 0
    returned: bool = False
    dropped_by: DroppedBy | None = None


class RerankStage(Model):
    """The rerank step, when the request asked for one."""

    method: str
    reranked: bool
    reason: str | None = None
    k_overfetch: int
    in_pool: bool
    chunk_id: str | None = None
    """The chunk the ranks are about: the document's best fused chunk in the rerank pool."""
    rank_before: int | None = None
    rank_after: int | None = None


class AskGateStage(Model):
    """Whether each of the document's chunks would pass ``ask``'s relevance gate for this
    query, and why (:mod:`plait.ask_gate`)."""

    gate: Gate
    checks: list[GateVerdict] = Field(default_factory=list)
    verdict: GateVerdict | None = None
    """The one check a one-line summary reports, of ``checks``: the first chunk that passes
    (ask could answer from the document), else the explained chunk's (the best fused, else
    best lexical, else best dense one: the chunk explain's fusion line is about); its
    ``chunkId`` says which."""


class ExplainResult(Model):
    """The journey of one document for one query, stage by stage, and the diagnosis."""

    query: str
    collection: str
    target: dict[str, str]
    mode: SearchMode = SearchMode.HYBRID
    """The arms the traced search ran (see :class:`~plait.types.SearchMode`)."""
    ingestion: IngestionStage
    lexical: LexicalStage
    dense: ArmStage
    fusion: FusionStage
    rerank: RerankStage | None = None
    chunks: list[ChunkJourney] = Field(default_factory=list)
    diagnosis: Diagnosis
    ask_gate: AskGateStage | None = None



#: How far :func:`tilt_advice` moves a weight (0..1) towards the arm asked for.
TILT_STEP = 0.2


def _moved(value: float, towards: int) -> float | None:
    """``value`` moved :data:`TILT_STEP` up (``towards`` 1) or down (-1) within 0..1; None
    when it is already at that end."""
    moved = round(min(1.0, max(0.0, value + towards * TILT_STEP)), 4)
    return None if moved == round(value, 4) else moved


def tilt_advice(settings: FusionSettings, arm: Literal["lexical", "dense"]) -> str | None:
    """A change that leans this search's fusion towards ``arm``, in knobs its method takes
    (a knob of another method is refused: ``lexicalWeight does not apply to fusion
    'adaptive'``), each said as the request field and, where the CLI has one, its flag; or
    None when the method's weight is already at that end and nothing can lean further.

    ``rrf`` takes ``lexicalWeight`` (``--lexical-weight``); ``minmax``, ``dbsf`` and
    ``adaptive`` a ``denseWeight`` in a fusion object (``--fusion METHOD --dense-weight``;
    adaptive: the base its per-query weight moves around, in place of the collection's
    estimate); ``weighted`` its fusion object's ``vectorWeight``/``lexicalWeight``, which
    the CLI has no flag for, so its advice also names RRF with the lexical weight
    (``--fusion rrf --lexical-weight``), as does the advice for a ``denseWeight`` already
    at the end it would move towards.

    >>> tilt_advice(FusionSettings(method="rrf"), "lexical")
    'lexicalWeight 0.7 (now 0.5; CLI: --lexical-weight 0.7)'
    >>> tilt_advice(FusionSettings(method="minmax", dense_weight=0.4), "dense")
    'fusion {"method": "minmax", "denseWeight": 0.6} (now 0.4; CLI: --fusion minmax --dense-weight 0.6)'
    """
    towards = 1 if arm == "lexical" else -1  # the direction of the lexical weight
    method = settings.method
    if method == FusionMethod.RRF:
        now = settings.lexical_weight
        to = _moved(now, towards)
        return None if to is None else f"lexicalWeight {to:g} (now {now:g}; CLI: --lexical-weight {to:g})"
    rrf_to = 0.5 + towards * TILT_STEP
    rrf = f"fusion rrf with lexicalWeight {rrf_to:g} (CLI: --fusion rrf --lexical-weight {rrf_to:g})"
    if method == FusionMethod.WEIGHTED:
        vector, lexical = settings.vector_weight, settings.lexical_score_weight
        new_lexical, new_vector = _moved(lexical, towards), _moved(vector, -towards)
        if new_lexical is None and new_vector is None:
            return rrf
        return (
            f'fusion {{"method": "weighted", "vectorWeight": {new_vector if new_vector is not None else vector:g}, '
            f'"lexicalWeight": {new_lexical if new_lexical is not None else lexical:g}}} '
            f"(now {vector:g} / {lexical:g}), or {rrf}"
        )
    base = settings.estimated_base if method == FusionMethod.ADAPTIVE and settings.estimated_base is not None else (
        settings.dense_weight
    )
    to = _moved(base, -towards)
    if to is None:
        return rrf  # the weight is at its end: another method
    what = "the base, now" if method == FusionMethod.ADAPTIVE else "now"
    return (
        f'fusion {{"method": "{method.value}", "denseWeight": {to:g}}} '
        f"({what} {base:g}; CLI: --fusion {method.value} --dense-weight {to:g})"
    )


def _rank(value: int | None) -> str:
    return "absent" if value is None else str(value)


def _ranks(
    lexical: int | None, dense: int | None, fused: int | None, *, dense_ran: bool, lexical_ran: bool = True
) -> str:
    if not lexical_ran:
        return f"dense {_rank(dense)}, fused {_rank(fused)}; no lexical arm (mode 'vector')"
    if not dense_ran:
        return f"lexical {_rank(lexical)}, fused {_rank(fused)}; no dense arm"
    return f"lexical {_rank(lexical)}, dense {_rank(dense)}, fused {_rank(fused)}"


def diagnose(
    req: SearchRequest,
    settings: FusionSettings,
    ingestion: IngestionStage,
    journeys: Sequence[ChunkJourney],
    lexical: LexicalStage,
    dense: ArmStage,
    fusion: FusionStage,
    rerank: RerankStage | None,
    *,
    depth: int | None = None,
) -> Diagnosis:
    """The one-line diagnosis: the first case that fits, in pipeline order.

    ``depth`` is how deep each arm was fetched (default: the over-fetch)."""
    if not ingestion.indexed:
        code = DiagnosisCode.SKIPPED if ingestion.skipped else DiagnosisCode.NOT_INDEXED
        return Diagnosis(code=code, stage="ingestion", message=f"ingestion: {ingestion.message}")
    if not any(j.passes_filters for j in journeys):
        given = [f"scopes {', '.join(req.scopes)}"] if req.scopes else []
        if req.metadata:
            given.append("metadata " + ", ".join(f"{key}={value}" for key, value in req.metadata.items()))
        return Diagnosis(
            code=DiagnosisCode.FILTERED,
            stage="filters",
            message="filters: its chunks (scope "
            + ", ".join(sorted({j.scope for j in journeys}))
            + f") do not pass the request's filters ({'; '.join(given) or 'none given'})",
        )
    if all(j.hidden for j in journeys if j.passes_filters):
        named = {j.scope for j in journeys if j.hidden}
        scopes = ", ".join(sorted(named))
        if req.scopes and named <= set(req.scopes):  # its scope is named: hidden from this caller
            return Diagnosis(
                code=DiagnosisCode.HIDDEN,
                stage="filters",
                message="hidden: a FAQ card not yet approved (a draft), which only maintainer keys "
                "see; approve it to publish it",
            )
        return Diagnosis(
            code=DiagnosisCode.HIDDEN,
            stage="filters",
            message=f"hidden: its chunks (scope {scopes}) are searched only when the request names "
            f"their scope (the collection's searchHidden, e.g. FAQ cards): pass scopes [{scopes}]",
        )
    ov, cut = settings.overfetch, req.offset + req.k
    depth = depth or ov
    lex_rank, dense_rank, fused_rank = lexical.rank, dense.rank, fusion.rank
    ranks = _ranks(lex_rank, dense_rank, fused_rank, dense_ran=dense.ran, lexical_ran=lexical.ran)
    unmatched = [t.reason for t in lexical.terms if t.reason and not t.stopword]
    if lex_rank is None and dense_rank is None and not lexical.ran:
        why = "no vector" if ingestion.chunks_with_vector == 0 else (
            f"no dense arm: {dense.reason}" if not dense.ran else "the dense arm did not return it"
        )
        return Diagnosis(
            code=DiagnosisCode.ABSENT_BOTH,
            stage="dense",
            message=f"absent from the dense arm, the only arm mode 'vector' runs ({why}): "
            "mode 'hybrid' or 'lexical' also asks the lexical index",
        )
    if lex_rank is None and dense_rank is None:
        if ingestion.chunks_with_vector == 0:
            why = "no vector"
        elif not dense.ran:
            why = f"no dense arm: {dense.reason}"
        else:
            why = "the dense arm did not return it"
        return Diagnosis(
            code=DiagnosisCode.ABSENT_BOTH,
            stage="ingestion",
            message=f"absent from both arms (no query term occurs in it; {why}): the problem is "
            "ingestion, not ranking — check the indexed text and that vectors were written",
        )
    if not lexical.within_overfetch and not dense.within_overfetch:
        arms = (
            "both arms" if dense.ran and lexical.ran
            else "the dense arm (no lexical arm ran)" if dense.ran
            else "the lexical arm (no dense arm ran)"
        )
        return Diagnosis(
            code=DiagnosisCode.BEYOND_OVERFETCH,
            stage="fusion",
            message=f"beyond the over-fetch in {arms} ({ranks}; over-fetch {ov}): fusion never saw "
            "it — the query does not resemble it; rephrase, or raise overfetch",
        )
    if fusion.dropped_by == "max-per-source":
        cut_chunks = [j for j in journeys if j.cut_by_max_per_source]
        best = min(cut_chunks, key=lambda j: j.fused_rank or 0)
        return Diagnosis(
            code=DiagnosisCode.MAX_PER_SOURCE,
            stage="fusion",
            message=f"cut by maxPerSource {req.max_per_source or 'default'} ({ranks}): source "
            f"{best.source_id!r} already had that many chunks fused above it (this one fused "
            f"{best.fused_rank}); raise maxPerSource, or leave it out, to see it",
        )
    if (
        rerank is not None
        and rerank.reranked
        and rerank.rank_before is not None
        and rerank.rank_before <= cut
        and not fusion.returned
    ):
        return Diagnosis(
            code=DiagnosisCode.RERANK_DEMOTED,
            stage="rerank",
            message=f"demoted by rerank: fused {rerank.rank_before} (within the top {cut}), "
            f"{rerank.method} rerank {rerank.rank_after}: the reranker preferred other candidates — "
            "either it is right, or the chunk is badly cut and does not read as an answer",
        )
    if lexical.ran and dense.within_overfetch and not lexical.within_overfetch:
        lost = "returned" if fusion.returned else "not returned"
        detail = f" ({'; '.join(unmatched[:3])})" if unmatched else ""
        within = "" if lex_rank is None else f" in its top {depth}"  # ranked, past what fusion saw
        return Diagnosis(
            code=DiagnosisCode.LEXICAL_MISS,
            stage="lexical",
            message=f"the lexical arm did not find it{within} ({ranks}; {lost}): it lost places in fusion "
            f"— check the tokenisation and the indexed field{detail}",
        )
    if fusion.returned:
        found = Diagnosis(
            code=DiagnosisCode.FOUND, stage=None, message=f"returned at position {fused_rank} ({ranks})"
        )
        if not dense.ran or not lexical.ran or fused_rank is None:
            return found  # one arm ran: there was nothing for fusion to rescue or demote
        if lex_rank is not None and lex_rank <= cut and (dense_rank is None or dense_rank > cut):
            strong, strong_rank, weak, weak_rank = "lexical", lex_rank, "dense", dense_rank
        elif dense_rank is not None and dense_rank <= cut and (lex_rank is None or lex_rank > cut):
            strong, strong_rank, weak, weak_rank = "dense", dense_rank, "lexical", lex_rank
        else:
            return found
        # Absent from the weak arm: past everything it returned.
        low = weak_rank if weak_rank is not None else depth + 1
        if fused_rank - strong_rank > low - fused_rank:
            where = f"rank {weak_rank}" if weak_rank is not None else "leaving it out"
            advice = tilt_advice(settings, "lexical" if strong == "lexical" else "dense")
            lean = (
                f"lean fusion towards the {strong} arm: {advice}" if advice
                else f"fusion already weighs the {strong} arm alone"
            )
            return Diagnosis(
                code=DiagnosisCode.FUSION_DEMOTED,
                stage="fusion",
                message=f"fusion demoted it ({ranks}): the {strong} arm had it at {strong_rank}, and "
                f"the {weak} arm ({where}) pulled it down further than the {strong} arm held it up "
                f"— if it should rank higher, {lean}",
            )
        rescue = (
            "the lexical arm rescued the exact term the dense arm did not see"
            if strong == "lexical"
            else "the dense arm rescued what BM25 ranked low"
        )
        return Diagnosis(
            code=DiagnosisCode.FUSION_WORKED, stage="fusion", message=f"fusion worked ({ranks}): {rescue}"
        )
    if fused_rank is None:
        return Diagnosis(
            code=DiagnosisCode.THRESHOLD,
            stage="fusion",
            message=f"dropped by the weighted threshold {settings.threshold} ({ranks})",
        )
    if not lexical.ran:
        return Diagnosis(
            code=DiagnosisCode.TOP_K,
            stage="fusion",
            message=f"dense only ({ranks}): dense rank {dense_rank} left it at fused {fused_rank}, "
            f"past the cut at {cut}: raise k, or try mode 'hybrid'",
        )
    if not dense.ran:
        return Diagnosis(
            code=DiagnosisCode.TOP_K,
            stage="fusion",
            message=f"lexical only ({ranks}): lexical rank {lex_rank} left it at fused {fused_rank}, "
            f"past the cut at {cut}: raise k, or rephrase with the document's own terms",
        )
    if lexical.within_overfetch and not dense.within_overfetch:
        return Diagnosis(
            code=DiagnosisCode.DENSE_MISS,
            stage="dense",
            message=f"the dense arm did not put it in its top {depth} (dense rank {_rank(dense_rank)}); "
            f"lexical alone (rank {lex_rank}) left it at fused {fused_rank}, past the cut at {cut}",
        )
    # Fusion's order is prefix-stable (tiered), so a k reaching its fused rank returns it.
    wanted = fused_rank - req.offset
    raise_k = f"raise k to {wanted}" if wanted <= MAX_K else "raise k"
    if lex_rank is not None and dense_rank is not None and min(lex_rank, dense_rank) > cut:
        # No arm to lean towards: all the way to one gives that arm's own rank, past the cut too.
        return Diagnosis(
            code=DiagnosisCode.TOP_K,
            stage="fusion",
            message=f"both arms found it ({ranks}) but ranked it past the cut at {cut}, and so did "
            f"fusion: {raise_k}",
        )
    better: Literal["lexical", "dense"] | None = None
    if lex_rank is not None and dense_rank is not None and lex_rank != dense_rank:
        better = "lexical" if lex_rank < dense_rank else "dense"
    advice = tilt_advice(settings, better) if better else None
    lean = f", or lean fusion towards the {better} arm, which ranks it better: {advice}" if advice else ""
    return Diagnosis(
        code=DiagnosisCode.TOP_K,
        stage="fusion",
        message=f"both arms found it ({ranks}) but fusion ranked it past the cut at {cut}: {raise_k}{lean}",
    )
