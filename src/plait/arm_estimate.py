"""A collection-level estimate of how good each arm is, made when indexing (no labels).

The adaptive fusion (:mod:`plait.fusion_adaptive`) moves the dense weight per query
around a *base*. Per-query signals alone cannot tell a corpus where BM25 is weak
(web questions against code: CoSQA) from one where both arms are good (SciFact): the
lists look alike query by query (``benchmarks/results/fusion_estimate.md``). The
collection can tell: :func:`plait.calibration.calibrate` asks both arms for the
source chunk of ``samples`` pseudo-queries (masked sentences of the collection's own
chunks) and measures each arm's MRR@10. Pseudo-queries copy the chunk's words, so
BM25 always wins them; how close the dense arm comes is what carries over. The ratio
``dense MRR / lexical MRR`` measured (e5 and MiniLM, 2026-12-01): FaQuAD 0.58 / 0.55,
SciFact 0.72, CoSQA 0.91 / 0.86.

:func:`base_from_ratio` maps the ratio to the adaptive base:
``min(BASE_MAX, BASE_FLOOR + BASE_SLOPE · max(0, ratio − RATIO_KNEE))`` —
0.45 up to a ratio of 0.75, then 4 per unit, at most 0.9. The constants were chosen
on the dev/train splits only (CoSQA dev, SciFact train, FaQuAD dev) by the maximin
of each run's margin over its better arm − 0.005 and equal RRF; test splits are
reported separately in ``benchmarks/results/fusion_modes.md``.

The estimate is made by :func:`plait.calibration.estimate_arms` after an index, reindex or backfill that
leaves every chunk with a vector and finds it stale (more than a tenth of its chunks changed
since, a full reindex, ``plait calibrate``: :mod:`plait.staleness`), for collections of at least ``MIN_CHUNKS`` chunks
(fewer give too few pseudo-queries to measure anything), and saved in the
collection's settings under ``armEstimate``. An explicit ``denseWeight`` (in the
request's fusion object, or saved by ``plait calibrate``) takes precedence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plait.collection_settings import CollectionSettings

__all__ = [
    "BASE_FLOOR",
    "BASE_MAX",
    "BASE_SLOPE",
    "ESTIMATE_KEY",
    "MIN_CHUNKS",
    "RATIO_KNEE",
    "SAMPLES",
    "base_from_ratio",
    "estimate_record",
    "saved_estimate",
]

ESTIMATE_KEY = "armEstimate"
MIN_CHUNKS = 200
SAMPLES = 200
BASE_FLOOR = 0.45
BASE_SLOPE = 4.0
RATIO_KNEE = 0.75
BASE_MAX = 0.9


def base_from_ratio(lexical_mrr: float, dense_mrr: float) -> float:
    """The adaptive base dense weight for arms that found their own chunk with these MRRs.

    >>> base_from_ratio(0.9, 0.5), base_from_ratio(0.95, 0.817), base_from_ratio(0.95, 0.95)
    (0.45, 0.89, 0.9)
    >>> base_from_ratio(0.0, 0.4)
    0.45
    """
    if lexical_mrr <= 0:
        return BASE_FLOOR
    ratio = dense_mrr / lexical_mrr
    return round(min(BASE_MAX, BASE_FLOOR + BASE_SLOPE * max(0.0, ratio - RATIO_KNEE)), 4)


def estimate_record(calibration: Mapping[str, Any], chunks: int) -> dict[str, Any]:
    """What is saved under ``armEstimate``: the calibration's figures (camelCase, as
    :func:`plait.types.to_json` gives them), the ratio, the base and a sentence saying why.

    >>> r = estimate_record({"samples": 200, "lexicalMrr": 0.951, "denseMrr": 0.865}, 6267)
    >>> r["ratio"], r["base"]
    (0.9096, 0.9)
    """
    lexical, dense = float(calibration["lexicalMrr"]), float(calibration["denseMrr"])
    ratio = dense / lexical if lexical > 0 else 0.0
    base = base_from_ratio(lexical, dense)
    reason = (
        f"collection estimate: {calibration['samples']} pseudo-queries of its {chunks} chunks found their chunk "
        f"with MRR@10 lexical {lexical:.3f}, dense {dense:.3f} (ratio {ratio:.3f}) "
        f"→ base {base:g} ({BASE_FLOOR:g} + {BASE_SLOPE:g}·max(0, ratio − {RATIO_KNEE:g}), at most {BASE_MAX:g})"
    )
    return {**calibration, "chunks": chunks, "ratio": round(ratio, 4), "base": base, "reason": reason}


def saved_estimate(saved_settings: CollectionSettings) -> tuple[float, str] | None:
    """(base, reason) of the collection's saved estimate, or None when there is none or
    the collection's fusion settings name their own ``denseWeight``."""
    record = saved_settings.arm_estimate
    fusion = saved_settings.fusion
    if record is None or "denseWeight" in fusion or "dense_weight" in fusion:
        return None
    try:
        return float(record["base"]), str(record["reason"])
    except (KeyError, TypeError, ValueError):
        return None
