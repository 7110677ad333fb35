"""The Milvus lexical arm as it was before 8f320bc, frozen for side-by-side timing.

``lexical_before`` is ``MilvusStore.lexical_search`` at b00f1f0 (8f320bc's parent): each field's
top ``limit``, then every chunk one field cut scored in that field with a search
filtered to its chunk id (``in_expr``) — milvus-lite computes BM25 over the filtered
rows, so those scores are inflated. Used only by ``milvus_lexical.py --variants``.
"""

from __future__ import annotations

from collections.abc import Sequence

from plait.stores.base import BM25Params
from plait.stores.milvus import MilvusStore
from plait.stores.milvus_base import _BATCH, MAX_TOPK, and_, visible
from plait.stores.milvus_schema import LEXICAL_FIELDS, encode_tokens, in_expr


def lexical_before(
    store: MilvusStore, collection: str, exact: Sequence[str], stems: Sequence[str], *, limit: int | None
) -> list[tuple[str, float]]:
    rec = store._record(collection)
    params = BM25Params()
    if rec.get("layout") is None or (limit is not None and limit <= 0):
        return []
    name = rec["layout"]["name"]
    base = and_(visible(rec["committed"]), "")
    fetch = MAX_TOPK if limit is None else min(limit, MAX_TOPK)
    arms = []
    for field, terms, weight in (("exact", exact, params.exact_weight), ("stems", stems, params.stems_weight)):
        terms = list(dict.fromkeys(terms))
        if weight and terms:
            arms.append((LEXICAL_FIELDS[field][1], encode_tokens(terms), weight))
    found: list[dict[str, float]] = []
    for sparse, text, _ in arms:
        found.append({cid: abs(d) for cid, d in store._search(name, text, sparse, fetch, base, {"metric_type": "BM25"})})
    union = set().union(*found) if found else set()
    for (sparse, text, _), scores in zip(arms, found, strict=True):
        missing = sorted(union - scores.keys())
        if len(scores) < fetch or not missing:
            continue
        for i in range(0, len(missing), _BATCH):
            part = missing[i : i + _BATCH]
            expr = and_(base, in_expr("chunk_id", part))
            scores.update({c: abs(d) for c, d in store._search(name, text, sparse, len(part), expr, {"metric_type": "BM25"})})
    totals = {cid: sum(w * s.get(cid, 0.0) for (_, _, w), s in zip(arms, found, strict=True)) for cid in union}
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked if limit is None else ranked[:limit]
