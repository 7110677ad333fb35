"""A collection-level estimate of how good each arm is, made when indexing (no labels).

The adaptive fusion (:mod:`plait.fusion_adaptive`) moves the dense weight per query
around a *base*. Per-query signals alone cannot tell a corpus where BM25 is weak
(web questions against code: CoSQA) from one where both arms are good (SciFact): the
lists look alike query by query (``benchmarks/results/fusion_estimate.md``). The
collection can tell: :func:`plait.calibration.calibrate` asks both arms for the source
of ``samples`` pseudo-queries (masked sentences of the collection's own chunks) and
measures each arm's MRR@10 over distinct sources — any chunk of the pseudo-query's file
or document counts, as it does for a reader and for every judged dataset. Pseudo-queries
copy the chunk's words, so BM25 always wins them; how close the dense arm comes is what
carries over. The ratio ``dense MRR / lexical MRR`` measured (e5 / MiniLM / e5-minilm,
2026-12-05): FaQuAD 0.593 / 0.561 / 0.588, SciFact 0.751 / 0.675 / 0.709, CoSQA
0.911 / 0.864 / 0.885; the two real documentation repositories of ``realrepo`` 0.772 /
0.751 / 0.787 (manage-get-gov) and 0.825 / 0.858 / 0.870 (teaching-vacancies).

Until 2026-12-05 the estimate judged the exact source *chunk*. On the tuning splits
that changes little (documents of one or two chunks: SciFact 0.719 / 0.623 / 0.665 by
chunk, CoSQA and FaQuAD within 0.01), but on real documentation, where a file's chunks
share their vocabulary, the dense arm often returned the right file through a sibling
chunk and was scored 0: manage-get-gov measured 0.651 / 0.648 / 0.680 by chunk, as low
as SciFact, and its natural questions were fused with the base of a corpus where BM25
is as good as the dense arm. An estimate saved before then (no ``lexicalSourceMrr``)
is read by its chunk MRRs until the next index run of the collection measures it
again (:func:`judged_by_source`; an unchanged reindex does too).

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
    "judged_by_source",
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

    The ratio is the source-level one (``lexicalSourceMrr``, ``denseSourceMrr``); a
    calibration without them (saved before they existed) falls back to the chunk MRRs.

    >>> r = estimate_record({"samples": 200, "lexicalMrr": 0.865, "denseMrr": 0.589,
    ...                      "lexicalSourceMrr": 0.966, "denseSourceMrr": 0.761}, 659)
    >>> r["ratio"], r["base"]
    (0.7878, 0.6011)
    >>> estimate_record({"samples": 200, "lexicalMrr": 0.951, "denseMrr": 0.865}, 6267)["ratio"]
    0.9096
    """
    unit = "source" if judged_by_source(calibration) else "chunk"
    prefix = "" if unit == "chunk" else "Source"
    lexical = float(calibration[f"lexical{prefix}Mrr"])
    dense = float(calibration[f"dense{prefix}Mrr"])
    ratio = dense / lexical if lexical > 0 else 0.0
    base = base_from_ratio(lexical, dense)
    reason = (
        f"collection estimate: {calibration['samples']} pseudo-queries of its {chunks} chunks found their {unit} "
        f"with MRR@10 lexical {lexical:.3f}, dense {dense:.3f} (ratio {ratio:.3f}) "
        f"→ base {base:g} ({BASE_FLOOR:g} + {BASE_SLOPE:g}·max(0, ratio − {RATIO_KNEE:g}), at most {BASE_MAX:g})"
    )
    return {**calibration, "chunks": chunks, "ratio": round(ratio, 4), "base": base, "reason": reason}


def judged_by_source(record: Mapping[str, Any]) -> bool:
    """Whether a saved estimate was measured by source (this version); one made by chunk
    is measured again by the next index run, whatever changed since.

    >>> judged_by_source({"lexicalMrr": 0.9, "denseMrr": 0.6}), judged_by_source(
    ...     {"lexicalMrr": 0.9, "denseMrr": 0.6, "lexicalSourceMrr": 0.95, "denseSourceMrr": 0.75})
    (False, True)
    """
    return "lexicalSourceMrr" in record and "denseSourceMrr" in record


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
