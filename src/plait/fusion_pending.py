"""Fusion while vectors are still being backfilled: no chunk pays for lacking one.

A chunk the backfill has not reached yet cannot be in the dense arm, so an ordinary
fusion would score it on its lexical contribution alone and rank it under a chunk that
the lexical arm ranks the same but that has a vector. :func:`not_penalised` wraps a
fuser so that such a chunk (lexical only, and known to have no vector) is scored as if
the dense arm had agreed with the lexical one: its lexical contribution is divided by
the lexical arm's share of the weights.

* RRF ``w_l / (k + r)`` → ``(w_l + w_d) / (k + r)`` (its dense rank taken = its lexical rank);
* minmax / dbsf / adaptive ``(1 − w) · lex`` → ``lex`` (its normalised dense score = lexical);
* weighted ``lw · lex / best`` → ``(lw + vw) · lex / best``, then the threshold, so a
  chunk the threshold dropped for lacking a cosine comes back.

A chunk that has a vector and was not in the dense arm's candidates keeps its score:
the dense arm judged it. Order ties break as in :mod:`plait.fusion`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from plait.fusion import Fused, arm_weights
from plait.types import FusionMethod, FusionSettings

__all__ = ["arm_shares", "not_penalised"]

Ranked = Sequence[tuple[str, float]]
Fuser = Callable[[FusionSettings, Ranked, Ranked], list[Fused]]

_NO_RANK = 1 << 62


def arm_shares(settings: FusionSettings) -> tuple[float, float]:
    """The (lexical, dense) weights the method adds the arms' contributions with."""
    if settings.method == FusionMethod.RRF:
        return arm_weights(settings.lexical_weight)
    if settings.method == FusionMethod.WEIGHTED:
        return settings.lexical_score_weight, settings.vector_weight
    used = settings.dense_weight_used if settings.dense_weight_used is not None else settings.dense_weight
    return 1.0 - used, used


def _key(item: Fused) -> tuple[float, int, str]:
    best = min(
        item.lexical_rank if item.lexical_rank is not None else _NO_RANK,
        item.dense_rank if item.dense_rank is not None else _NO_RANK,
    )
    return (-item.score, best, item.chunk_id)


def not_penalised(fuser: Fuser, pending: Collection[str]) -> Fuser:
    """``fuser`` with the chunks in ``pending`` (no vector yet) scored as if the dense
    arm agreed with the lexical one; ``fuser`` itself when nothing is pending."""
    if not pending:
        return fuser
    waiting = frozenset(pending)

    def fuse(settings: FusionSettings, lexical: Ranked, dense: Ranked) -> list[Fused]:
        fused = fuser(settings, lexical, dense)
        if not dense:  # lexical only: every chunk is scored alike
            return fused
        w_lex, w_dense = arm_shares(settings)
        if w_lex <= 0:
            return fused
        in_dense = {cid for cid, _ in dense}
        out: dict[str, Fused] = {f.chunk_id: f for f in fused}
        if settings.method == FusionMethod.WEIGHTED:
            best = max((s for _, s in lexical), default=0.0)
            seen: set[str] = set()
            for rank, (cid, score) in enumerate(lexical, start=1):
                if cid in seen or cid not in waiting or cid in in_dense or best <= 0:
                    continue
                seen.add(cid)
                total = (w_lex + w_dense) * score / best
                if total >= settings.threshold:
                    out[cid] = Fused(cid, total, rank, None, score, None)
        else:
            scale = (w_lex + w_dense) / w_lex
            for cid, item in out.items():
                if cid in waiting and item.dense_rank is None and item.lexical_rank is not None:
                    out[cid] = item._replace(score=item.score * scale)
        return sorted(out.values(), key=_key)

    return fuse
