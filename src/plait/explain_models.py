"""The models of :mod:`plait.explain` and the one-line diagnosis rule.

:func:`diagnose` walks the pipeline in order and returns the first case that fits:
ingestion (never indexed / skipped), filters, absent from both arms, beyond the
over-fetch in both arms, demoted by rerank, missed by the lexical arm, fusion worked
(one arm rescued what the other ranked low), found, the weighted threshold, missed by
the dense arm, and finally the top-k cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

from pydantic import Field

from plait.search import SearchRequest
from plait.types import FusionSettings, Model

__all__ = [
    "ArmStage",
    "ChunkJourney",
    "Diagnosis",
    "DiagnosisCode",
    "ExplainResult",
    "FusionStage",
    "IngestionStage",
    "LexicalStage",
    "RerankStage",
    "Stage",
    "TermMatch",
    "diagnose",
]

class DiagnosisCode(StrEnum):
    """Which case a journey falls in; :class:`Diagnosis` says it in words."""

    NOT_INDEXED = "not-indexed"
    SKIPPED = "skipped"
    FILTERED = "filtered"
    ABSENT_BOTH = "absent-both"
    BEYOND_OVERFETCH = "beyond-overfetch"
    RERANK_DEMOTED = "rerank-demoted"
    LEXICAL_MISS = "lexical-miss"
    DENSE_MISS = "dense-miss"
    FUSION_WORKED = "fusion-worked"
    TOP_K = "top-k"
    THRESHOLD = "threshold"
    FOUND = "found"


Stage = Literal["ingestion", "filters", "lexical", "dense", "fusion", "rerank"]


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
    heading_path: list[str] = Field(default_factory=list)
    has_vector: bool
    passes_filters: bool
    lexical_rank: int | None = None
    lexical_score: float | None = None
    dense_rank: int | None = None
    cosine: float | None = None
    fused_rank: int | None = None
    fused_score: float | None = None
    rerank_rank: int | None = None
    returned: bool = False
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
    dropped_by: Literal["overfetch", "top-k", "threshold", "filters"] | None = None


class RerankStage(Model):
    """The rerank step, when the request asked for one."""

    method: str
    reranked: bool
    reason: str | None = None
    k_overfetch: int
    in_pool: bool
    rank_before: int | None = None
    rank_after: int | None = None


class ExplainResult(Model):
    """The journey of one document for one query, stage by stage, and the diagnosis."""

    query: str
    collection: str
    target: dict[str, str]
    ingestion: IngestionStage
    lexical: LexicalStage
    dense: ArmStage
    fusion: FusionStage
    rerank: RerankStage | None = None
    chunks: list[ChunkJourney] = Field(default_factory=list)
    diagnosis: Diagnosis



def _rank(value: int | None) -> str:
    return "absent" if value is None else str(value)


def diagnose(
    req: SearchRequest,
    settings: FusionSettings,
    ingestion: IngestionStage,
    journeys: Sequence[ChunkJourney],
    lexical: LexicalStage,
    dense: ArmStage,
    fusion: FusionStage,
    rerank: RerankStage | None,
) -> Diagnosis:
    """The one-line diagnosis: the first case that fits, in pipeline order."""
    if not ingestion.indexed:
        code = DiagnosisCode.SKIPPED if ingestion.skipped else DiagnosisCode.NOT_INDEXED
        return Diagnosis(code=code, stage="ingestion", message=f"ingestion: {ingestion.message}")
    if not any(j.passes_filters for j in journeys):
        return Diagnosis(
            code=DiagnosisCode.FILTERED,
            stage="filters",
            message="filters: its chunks (scope "
            + ", ".join(sorted({j.scope for j in journeys}))
            + f") are outside the requested scopes {req.scopes or 'any'} / metadata {req.metadata or {}}",
        )
    ov, cut = settings.overfetch, req.offset + req.k
    lex_rank, dense_rank, fused_rank = lexical.rank, dense.rank, fusion.rank
    ranks = f"lexical {_rank(lex_rank)}, dense {_rank(dense_rank)}, fused {_rank(fused_rank)}"
    unmatched = [t.reason for t in lexical.terms if t.reason and not t.stopword]
    if lex_rank is None and dense_rank is None:
        why = "no vector" if ingestion.chunks_with_vector == 0 else f"dense arm off: {dense.reason}"
        return Diagnosis(
            code=DiagnosisCode.ABSENT_BOTH,
            stage="ingestion",
            message=f"absent from both arms (no query term occurs in it; {why}): the problem is "
            "ingestion, not ranking — check the indexed text and that vectors were written",
        )
    if not lexical.within_overfetch and not dense.within_overfetch:
        return Diagnosis(
            code=DiagnosisCode.BEYOND_OVERFETCH,
            stage="fusion",
            message=f"beyond the over-fetch in both arms ({ranks}; over-fetch {ov}): fusion never saw "
            "it — the query does not resemble it; rephrase, or raise overfetch",
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
    if dense.within_overfetch and not lexical.within_overfetch:
        lost = "returned" if fusion.returned else "not returned"
        detail = f" ({'; '.join(unmatched[:3])})" if unmatched else ""
        return Diagnosis(
            code=DiagnosisCode.LEXICAL_MISS,
            stage="lexical",
            message=f"the lexical arm did not find it ({ranks}; {lost}): it lost places in fusion "
            f"— check the tokenisation and the indexed field{detail}",
        )
    if fusion.returned:
        if lexical.within_overfetch and (dense_rank is None or dense_rank > cut) and lex_rank <= cut:  # type: ignore[operator]
            return Diagnosis(
                code=DiagnosisCode.FUSION_WORKED,
                stage="fusion",
                message=f"fusion worked ({ranks}): the lexical arm rescued the exact term the dense "
                "arm did not see",
            )
        if dense.within_overfetch and lex_rank is not None and lex_rank > cut and dense_rank <= cut:  # type: ignore[operator]
            return Diagnosis(
                code=DiagnosisCode.FUSION_WORKED,
                stage="fusion",
                message=f"fusion worked ({ranks}): the dense arm rescued what BM25 ranked low",
            )
        return Diagnosis(
            code=DiagnosisCode.FOUND, stage=None, message=f"returned at position {fused_rank} ({ranks})"
        )
    if fused_rank is None:
        return Diagnosis(
            code=DiagnosisCode.THRESHOLD,
            stage="fusion",
            message=f"dropped by the weighted threshold {settings.threshold} ({ranks})",
        )
    if lexical.within_overfetch and not dense.within_overfetch:
        off = f"dense arm off: {dense.reason}" if not dense.ran else f"dense rank {_rank(dense_rank)}"
        return Diagnosis(
            code=DiagnosisCode.DENSE_MISS,
            stage="dense",
            message=f"the dense arm did not put it in its top {ov} ({off}); lexical alone (rank "
            f"{lex_rank}) left it at fused {fused_rank}, past the cut at {cut}",
        )
    return Diagnosis(
        code=DiagnosisCode.TOP_K,
        stage="fusion",
        message=f"both arms found it ({ranks}) but fusion ranked it past the cut at {cut}: "
        "raise k, or tilt lexical_weight towards the arm that ranks it better",
    )

