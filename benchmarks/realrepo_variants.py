"""Retrieval variants tried for issue 21 item 2 (natural questions on real docs), measured
offline on the arms one search runs.

Each variant is a function of one query's :class:`Context` that returns a ranking of
chunk ids (``chunks``) or of documents (``docs``); :func:`rankings` turns it into files /
documents. Everything here is computed with plait's own fusion (``plait.retrieval.pipeline.fuse``
with the query's settings as search resolves them), so ``default`` here equals what
``plait search`` returns (``benchmarks/realrepo.py`` checks that it does). The variants
change one thing each:

* ``rrf`` / ``minmax-W``: the fusion method, dense weight ``W`` fixed (no per-query step);
* ``adaptive-0.5``: the adaptive rule around base 0.5 instead of the collection estimate;
* ``file-top2``: documents scored by their best fused chunk + ``0.5`` × their second best
  (document-level aggregation; the default keeps the best chunk only);
* ``file-fuse``: each arm aggregated to documents first (best chunk score), then min-max
  fused with the dense weight the query resolved to;
* ``dense-prf``: Rocchio on the query vector: ``q + 0.5 · mean(top-3 dense chunk vectors)``,
  normalised, then the default fusion;
* ``dense-centred``: the dense score minus ``0.2`` × the chunk's cosine to the
  collection's mean chunk direction (a hubness correction: a generic chunk close to
  every question loses a little), then the default fusion;
* ``lexical-prf``: a second lexical pass whose stems field adds the 5 stems most
  frequent (length-normalised) in the top-3 fused chunks, found in at least 2 of them,
  not stopwords, digits or query stems; then the default fusion.

Constants were chosen on manage-get-gov (20 natural questions); teaching-vacancies is
held out. The BEIR check (``--beir-stores``) runs the same variants on CoSQA dev,
SciFact test and FaQuAD test (e5), where the default must not lose more than 0.002.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plait.analysis import analyse
from plait.fields import lexical_text
from plait.fusion_adaptive import minmax_normalise
from plait.retrieval.pipeline import fuse
from plait.retrieval.plan import lexical_terms, plan_for_text
from plait.stores.base import Store
from plait.types import FusionMethod, FusionSettings

Ranked = list[tuple[str, float]]

PRF_DOCS, PRF_TERMS, PRF_MIN_DF = 3, 5, 2
ROCCHIO_DOCS, ROCCHIO_BETA = 3, 0.5
CENTRE_ALPHA = 0.2
SECOND_CHUNK = 0.5


@dataclass
class Context:
    """What the variants of one collection share: the store, the arms, the vectors."""

    store: Store
    collection: str
    saved: FusionSettings
    languages: frozenset[str] | None
    texts: Mapping[str, str]
    lexical: Mapping[str, Ranked]
    dense: Mapping[str, Ranked]
    doc_of: dict[str, str]
    depth: int
    ids: list[str] = field(default_factory=list)
    matrix: np.ndarray | None = None
    queries: dict[str, np.ndarray] = field(default_factory=dict)
    _stems: dict[str, list[str]] = field(default_factory=dict)
    _generic: np.ndarray | None = None

    def settings(self, qid: str, settings: FusionSettings | None = None) -> FusionSettings:
        return plan_for_text(self.texts[qid], settings or self.saved, languages=self.languages).settings

    def fused(self, qid: str, *, lexical: Ranked | None = None, dense: Ranked | None = None,
              settings: FusionSettings | None = None) -> tuple[FusionSettings, list[Any]]:
        lex = self.lexical[qid] if lexical is None else lexical
        den = self.dense[qid] if dense is None else dense
        resolved, fused, _ = fuse(self.settings(qid, settings), lex[: self.depth], den[: self.depth], need=self.depth)
        return resolved, fused

    def stems(self, chunk_ids: Sequence[str]) -> list[list[str]]:
        missing = [c for c in chunk_ids if c not in self._stems]
        if missing:
            for cid, chunk in self.store.get_chunks(self.collection, missing).items():
                self._stems[cid] = analyse(lexical_text(chunk)).stems
        return [self._stems.get(c, []) for c in chunk_ids]

    def load_vectors(self, embedder: Any) -> None:
        """Every chunk's vector (by content hash) and each query's vector."""
        self.ids = self.store.chunk_ids(self.collection)
        chunks = self.store.get_chunks(self.collection, self.ids)
        self.ids = [c for c in self.ids if c in chunks]
        by_hash = self.store.vectors_by_hash(self.collection, [chunks[c].content_hash for c in self.ids])
        self.ids = [c for c in self.ids if chunks[c].content_hash in by_hash]
        self.matrix = np.stack([by_hash[chunks[c].content_hash] for c in self.ids]).astype(np.float32)
        self.doc_of.update({c: chunks[c].source_id for c in self.ids})
        self.queries = {qid: np.asarray(embedder.embed_query(t), dtype=np.float32) for qid, t in self.texts.items()}

    def dense_for(self, vector: np.ndarray, penalty: np.ndarray | None = None) -> Ranked:
        assert self.matrix is not None
        scores = self.matrix @ vector
        if penalty is not None:
            scores = scores - penalty
        top = np.argsort(-scores, kind="stable")[: self.depth]
        return [(self.ids[i], float(scores[i])) for i in top]

    def generic(self) -> np.ndarray:
        """Each chunk's cosine to the collection's mean chunk direction."""
        assert self.matrix is not None
        if self._generic is None:
            mean = self.matrix.mean(axis=0)
            self._generic = self.matrix @ (mean / np.linalg.norm(mean))
        return self._generic


Variant = Callable[[Context, str], tuple[str, list[str]]]


def _chunks(fused: Sequence[Any]) -> tuple[str, list[str]]:
    return "chunks", [item.chunk_id for item in fused]


def fixed(method: FusionMethod, weight: float | None = None) -> Variant:
    update: dict[str, Any] = {"method": method, "estimated_base": None, "estimate_reason": None}
    if weight is not None:
        update["dense_weight"] = weight
    return lambda ctx, qid: _chunks(ctx.fused(qid, settings=ctx.saved.model_copy(update=update))[1])


def default(ctx: Context, qid: str) -> tuple[str, list[str]]:
    return _chunks(ctx.fused(qid)[1])


def adaptive_base(base: float) -> Variant:
    return lambda ctx, qid: _chunks(ctx.fused(qid, settings=ctx.saved.model_copy(update={"estimated_base": base}))[1])


def file_top2(ctx: Context, qid: str) -> tuple[str, list[str]]:
    per: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    for n, item in enumerate(ctx.fused(qid)[1]):
        doc = ctx.doc_of.get(item.chunk_id)
        if doc is not None:
            per.setdefault(doc, []).append(item.score)
            first.setdefault(doc, n)
    score = {d: s[0] + SECOND_CHUNK * (s[1] if len(s) > 1 else 0.0) for d, s in per.items()}
    return "docs", sorted(score, key=lambda d: (-score[d], first[d]))


def _best_per_doc(ranked: Ranked, doc_of: Mapping[str, str]) -> Ranked:
    best: dict[str, float] = {}
    for cid, score in ranked:
        doc = doc_of.get(cid)
        if doc is not None and doc not in best:
            best[doc] = score
    return list(best.items())


def file_fuse(ctx: Context, qid: str) -> tuple[str, list[str]]:
    resolved, _ = ctx.fused(qid)
    w = resolved.dense_weight_used if resolved.dense_weight_used is not None else ctx.saved.dense_weight
    lex = minmax_normalise(_best_per_doc(ctx.lexical[qid][: ctx.depth], ctx.doc_of))
    den = minmax_normalise(_best_per_doc(ctx.dense[qid][: ctx.depth], ctx.doc_of))
    score = {d: (1 - w) * lex.get(d, 0.0) + w * den.get(d, 0.0) for d in {**lex, **den}}
    return "docs", sorted(score, key=lambda d: (-score[d], d))


def dense_prf(ctx: Context, qid: str) -> tuple[str, list[str]]:
    assert ctx.matrix is not None
    index = {c: i for i, c in enumerate(ctx.ids)}
    top = [index[c] for c, _ in ctx.dense[qid][:ROCCHIO_DOCS] if c in index]
    vector = ctx.queries[qid] + ROCCHIO_BETA * ctx.matrix[top].mean(axis=0)
    return _chunks(ctx.fused(qid, dense=ctx.dense_for(vector / np.linalg.norm(vector)))[1])


def dense_centred(ctx: Context, qid: str) -> tuple[str, list[str]]:
    return _chunks(ctx.fused(qid, dense=ctx.dense_for(ctx.queries[qid], CENTRE_ALPHA * ctx.generic()))[1])


def expansion_terms(stems_of_top: Sequence[Sequence[str]], query_stems: Sequence[str]) -> list[str]:
    """The ``PRF_TERMS`` stems most frequent (length-normalised) in the feedback chunks,
    in at least ``PRF_MIN_DF`` of them, not digits, not shorter than 3, not in the query."""
    weight: dict[str, float] = {}
    df: Counter[str] = Counter()
    for stems in stems_of_top:
        counts = Counter(stems)
        total = sum(counts.values()) or 1
        df.update(counts.keys())
        for term, tf in counts.items():
            weight[term] = weight.get(term, 0.0) + tf / total
    wanted = set(query_stems)
    kept = {t: w for t, w in weight.items() if t not in wanted and len(t) > 2 and not t.isdigit() and df[t] >= PRF_MIN_DF}
    return sorted(kept, key=lambda t: (-kept[t], t))[:PRF_TERMS]


def lexical_prf(ctx: Context, qid: str) -> tuple[str, list[str]]:
    _, fused = ctx.fused(qid)
    exact, stems = lexical_terms(ctx.texts[qid])
    extra = expansion_terms(ctx.stems([item.chunk_id for item in fused[:PRF_DOCS]]), stems)
    lexical = ctx.store.lexical_search(ctx.collection, exact, stems + extra, limit=ctx.depth)
    return _chunks(ctx.fused(qid, lexical=lexical)[1])


#: name → variant; the ones after ``default`` need chunk vectors (``Context.load_vectors``).
VARIANTS: dict[str, Variant] = {
    "default (simulated)": default,
    "rrf": fixed(FusionMethod.RRF),
    "minmax-0.3": fixed(FusionMethod.MINMAX, 0.3),
    "minmax-0.5": fixed(FusionMethod.MINMAX, 0.5),
    "minmax-0.6": fixed(FusionMethod.MINMAX, 0.6),
    "minmax-0.7": fixed(FusionMethod.MINMAX, 0.7),
    "adaptive-0.5": adaptive_base(0.5),
    "file-top2": file_top2,
    "file-fuse": file_fuse,
    "lexical-prf": lexical_prf,
    "dense-prf": dense_prf,
    "dense-centred": dense_centred,
}
#: the variants that change something a non-file corpus also sees (checked on BEIR)
BEIR_VARIANTS = ("file-top2", "lexical-prf", "dense-prf", "dense-centred")


def rankings(ctx: Context, variant: Variant, qids: Sequence[str], depth: int) -> dict[str, list[str]]:
    """Documents per query for ``variant``, each kept at its first position, cut at ``depth``."""
    out: dict[str, list[str]] = {}
    for qid in qids:
        kind, order = variant(ctx, qid)
        docs: dict[str, None] = {}
        for item in order:
            doc = item if kind == "docs" else ctx.doc_of.get(item)
            if doc is not None:
                docs.setdefault(doc, None)
            if len(docs) >= depth:
                break
        out[qid] = list(docs)
    return out


def sign_flip(deltas: Sequence[float], *, permutations: int = 10_000, seed: int = 20261130) -> float:
    """Two-sided p of the mean paired difference under random sign flips (as fusion_modes.py)."""
    d = np.asarray(deltas, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    observed = abs(d.mean())
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(permutations, d.size))
    return float((np.sum(np.abs((signs * d).mean(axis=1)) >= observed - 1e-12) + 1) / (permutations + 1))
