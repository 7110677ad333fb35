"""The exact top ``k`` of a weighted sum of per-field ranked lists (threshold stop).

Milvus scores each BM25 field separately, and a search can only return a field's own
top ``n`` (never a given chunk's score: a search filtered to some chunk ids computes
BM25 over that subset, with inflated scores). :func:`merge_fields` therefore sums only
what the unfiltered per-field lists say and reports whether that sum is provably the
exact top ``k`` — the "no random access" threshold algorithm (Fagin et al.):

* a field whose list came back shorter than asked is *complete*: a chunk absent from it
  scores 0 there;
* a chunk present in every incomplete field has its exact total;
* a chunk absent from an incomplete field scores at most that field's last listed score
  there, and a chunk absent from every list at most the sum of those last scores.

The answer is exact once ``k`` chunks with exact totals rank (by ``(-total, id)``)
ahead of every other chunk's upper bound; otherwise the caller fetches deeper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FieldList", "Merged", "merge_fields"]


@dataclass(frozen=True, slots=True)
class FieldList:
    """One field's unfiltered top list: chunk id → score (unweighted), best first or not."""

    scores: Mapping[str, float]
    weight: float
    complete: bool
    """True when the search returned fewer hits than asked: every match is listed."""


@dataclass(frozen=True, slots=True)
class Merged:
    ranked: list[tuple[str, float]]
    """``(chunk id, total)`` by ``(-total, id)``; the first ``limit`` are exact when ``exact``."""
    exact: bool


def _floor(field: FieldList) -> float:
    """The most an unlisted chunk can score in ``field`` (weighted)."""
    if field.complete or not field.scores:
        return 0.0
    return field.weight * min(field.scores.values())


def merge_fields(fields: Sequence[FieldList], limit: int | None) -> Merged:
    """Sum the fields' weighted scores; ``exact`` says whether the first ``limit``
    (every chunk when ``limit`` is None) are provably the true top with true totals."""
    floors = [_floor(f) for f in fields]
    union: set[str] = set().union(*(f.scores for f in fields)) if fields else set()
    totals: dict[str, float] = {}
    bounds: dict[str, float] = {}
    for cid in union:
        total = 0.0
        gap = 0.0
        for field, floor in zip(fields, floors, strict=True):
            score = field.scores.get(cid)
            if score is not None:
                total += field.weight * score
            elif not field.complete:
                gap += floor
        totals[cid] = total
        if gap:
            bounds[cid] = total + gap
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    if not bounds and all(f.complete for f in fields):
        return Merged(ranked, True)
    if limit is None:
        return Merged(ranked, False)
    known = sorted(
        ((c, t) for c, t in totals.items() if c not in bounds), key=lambda kv: (-kv[1], kv[0])
    )
    if len(known) < limit:
        return Merged(ranked, False)
    kth_id, kth = known[limit - 1]
    # every chunk not yet exact must rank after the k-th exact one even at its bound
    if any((-ub, cid) < (-kth, kth_id) for cid, ub in bounds.items()):
        return Merged(ranked, False)
    # a chunk in no list: strictly below, since its id is unknown
    if sum(floors) >= kth:
        return Merged(ranked, False)
    # (a chunk not yet exact has total < bound, so it ranks after the k-th here too)
    return Merged(ranked, True)
