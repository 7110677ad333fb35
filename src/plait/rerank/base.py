"""The reranker protocol: reorder the fused candidates for one query.

A reranker gets the query and the fused top candidates as ``(chunk_id, text)`` pairs
in fused order, and returns a :class:`RerankOutcome` whose ``order`` is always a
permutation of every candidate id — so the caller can cut to ``k`` from it whether or
not the rerank worked. ``reranked`` says whether the order came from the model;
``reason`` says why not (a failed or timed-out call, an unparseable reply), or what
had to be repaired in the model's ordering.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["Candidate", "RerankOutcome", "Reranker", "complete_order", "fused_order"]

#: One candidate: its chunk id and the text the reranker reads.
Candidate = tuple[str, str]


@dataclass(frozen=True)
class RerankOutcome:
    """The reranked order of the candidate ids, whether the model produced it, and why not."""

    order: list[str]
    reranked: bool
    reason: str | None = None
    scores: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class Reranker(Protocol):
    """Reorders candidates for a query; ``name`` is ``llm`` or ``cross-encoder``."""

    name: str

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> RerankOutcome:
        """Reorder ``candidates`` (given in fused order) for ``query``."""
        ...


def fused_order(candidates: Sequence[Candidate], reason: str) -> RerankOutcome:
    """The fallback: the fused order unchanged, ``reranked`` false, with ``reason``."""
    return RerankOutcome(order=[cid for cid, _ in candidates], reranked=False, reason=reason)


def complete_order(
    candidates: Sequence[Candidate], proposed: Iterable[str]
) -> tuple[list[str], int, int]:
    """``proposed`` made into a full permutation of the candidate ids.

    Unknown ids are dropped, repeats keep their first place, and candidates missing
    from ``proposed`` follow in their fused order. Returns the order, how many
    proposed ids were unknown and how many were repeats.
    """
    known = {cid for cid, _ in candidates}
    seen: set[str] = set()
    order: list[str] = []
    unknown = repeated = 0
    for cid in proposed:
        if cid not in known:
            unknown += 1
        elif cid in seen:
            repeated += 1
        else:
            seen.add(cid)
            order.append(cid)
    order.extend(cid for cid, _ in candidates if cid not in seen)
    return order, unknown, repeated
