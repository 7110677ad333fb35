"""A grid of fusion variants with HELD-OUT selection: are the adaptive constants overfitted?

Run from the repository root (10–30 minutes on 2 cores, nearly all of it indexing and query
embedding; the embedding cache in ``~/.cache/plait`` must hold the corpus vectors;
``--arms-cache`` keeps the collected arms so a rerun takes about 2 minutes)::

    PYTHONPATH=src .venv/bin/python benchmarks/fusion_grid.py
    PYTHONPATH=src .venv/bin/python benchmarks/fusion_grid.py --arms-cache /tmp/grid-arms

Runs: ``scifact:minilm``, ``scifact:e5``, ``faquad-pt:e5``, ``faquad-pt:minilm`` (the
first ``scifact:e5`` run embeds for 2+ hours on 2 cores; the cache keeps its vectors).
Each corpus is indexed through :func:`plait.evaluation.prepare.prepared` and
each arm is asked once per query through :func:`plait.evaluation.runner.collect_arms`
(the harness's chunk limit, as ``benchmarks/fusion_modes.py`` does).

**Variants.** Normalisation (``minmax``; ``zscore`` with a missing chunk at the arm's
lowest z; ``dbsf``; rank-based ``rrf`` with k 10 / 60, i.e. weighted RRF) × level
(``chunk`` — fuse chunks, then rank documents by their best chunk, as the engine does;
``doc`` — collapse each arm to documents first) × depth (each arm cut at 20 / 50 / 100
before fusion) × weighting (fixed dense weight 0.2 … 0.8; or the adaptive rule of
:func:`plait.fusion_adaptive.adaptive_weight` with base 0.3 … 0.6, disagree weight
off / 0.2 / 0.3 / 0.4, step 0 / 0.25 / 0.5 / 1.0; every adaptive rule with a disagree
weight also in a ``·lang`` form, which drops to it only for queries whose language the
embedder does not declare — the engine's ``language_prior``). The engine's default is
``minmax · chunk · d100 · adaptive(0.4, 0.3, 0.5) · lang``; the script checks, query by query,
that its fast path reproduces the engine's ``resolve_fusion`` + ``FUSERS`` order for it.

**Held-out selection (fixed before looking at test figures).** Selection queries:
SciFact *train* (809 queries, disjoint from test) and FaQuAD's original *dev*
questions (63; FaQuAD has no other labelled split). FaQuAD's ``test`` qrels hold all
900 questions, so the dev 63 are inside it: the script reports FaQuAD on all 900 (the
figure the issue's table uses) *and* on the 837 questions selection never saw. Rule:
a variant is feasible if on each of the four selection runs its nDCG@10 is ≥ that
run's better single arm − 0.005; among feasible variants, the one with the highest
mean (over the four runs, equal weight) of nDCG@10 − better arm wins; ties go to the
earlier (simpler) variant in grid order. For the grid search nDCG@10 is computed by a
fast in-script function that the script checks against ir-measures on the default and
the chosen variant; every reported figure comes from ir-measures via the harness.

Reported: the chosen variant, the current default, the default before the language
prior (on the selection queries too: that is the prior's held-out check), the single arms and a few
references on SciFact test and FaQuAD (900 and 837), with paired sign-flip p-values
(``benchmarks/fusion_modes.sign_flip``) against the better arm and the default; and the
test-oracle best of the grid (what selecting on test would have claimed). Writes
``benchmarks/results/fusion_grid.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import pickle
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "src", ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from fusion_modes import DATA, DEPTH, PERMUTATIONS, SEED, sign_flip
from plait.embeddings import embedder_languages, make_embedder
from plait.evaluation.datasets import load_beir
from plait.evaluation.metrics import per_query, run_from_rankings
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import (
    collect_arms,
    doc_ranking,
    fused_chunk_ids,
    machine_info,
)
from plait.fusion import for_query, resolve_fusion
from plait.fusion_adaptive import (
    ADAPT_MAX,
    ADAPT_MIN,
    agree,
    confidence,
)
from plait.types import FusionMethod, FusionSettings

RESULTS = ROOT / "benchmarks" / "results"
RUNS = ("scifact:minilm", "scifact:e5", "faquad-pt:e5", "faquad-pt:minilm")
SKIPPED: dict[str, str] = {}
#: run → (selection split, report split); FaQuAD's "dev" is a subset of its "test".
SPLITS = {"scifact": ("train", "test"), "faquad-pt": ("dev", "test")}
NORMS = ("minmax", "zscore", "dbsf", "rrf10", "rrf60")
LEVELS = ("chunk", "doc")
DEPTHS = (100, 50, 20)
FIXED = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
BASES = (0.3, 0.4, 0.5, 0.6)
DISAGREE = (None, 0.2, 0.3, 0.4)
STEPS = (0.0, 0.25, 0.5, 1.0)
TOLERANCE = 0.005
DEFAULT = "minmax·chunk·d100·adaptive(0.4,0.3,0.5)·lang"
PREVIOUS = "minmax·chunk·d100·adaptive(0.4,0.3,0.5)"  # the default before the language prior
Ranked = list[tuple[str, float]]


@dataclass(frozen=True)
class Variant:
    """One fusion variant; ``disagree`` None means no drop when the arms disagree."""

    norm: str
    level: str
    depth: int
    fixed: float | None = None
    base: float = 0.4
    disagree: float | None = None
    step: float = 0.0
    #: drop to ``disagree`` only when the embedder is not known to cover the query's language
    language_aware: bool = False

    @property
    def name(self) -> str:
        head = f"{self.norm}·{self.level}·d{self.depth}"
        if self.fixed is not None:
            return f"{head}·w{self.fixed:g}"
        dis = "-" if self.disagree is None else f"{self.disagree:g}"
        return f"{head}·adaptive({self.base:g},{dis},{self.step:g}){'·lang' if self.language_aware else ''}"


def grid() -> list[Variant]:
    """Every variant, simplest first (fixed weights before adaptive rules)."""
    out: list[Variant] = []
    for norm, level, depth in itertools.product(NORMS, LEVELS, DEPTHS):
        out += [Variant(norm, level, depth, fixed=w) for w in FIXED]
    seen: set[tuple[Any, ...]] = set()
    for norm, level, depth in itertools.product(NORMS, LEVELS, DEPTHS):
        for base, dis, step in itertools.product(BASES, DISAGREE, STEPS):
            effective = None if dis is None or dis >= base else dis
            key = (norm, level, depth, base, effective, step)
            if (effective is None and step == 0.0) or key in seen:
                continue
            seen.add(key)
            out.append(Variant(norm, level, depth, base=base, disagree=effective, step=step))
    out += [Variant(v.norm, v.level, v.depth, base=v.base, disagree=v.disagree, step=v.step, language_aware=True)
            for v in out if v.fixed is None and v.disagree is not None]
    return out


# ---------------------------------------------------------------- collecting the arms


def collect(spec: str, cache: Path | None) -> dict[str, Any]:
    """Both arms for every query of the run's selection and report splits (cached if asked)."""
    dataset, _, embedder = spec.partition(":")
    path = cache / f"{dataset}_{embedder}.pkl" if cache else None
    if path is not None and path.exists():
        cached: dict[str, Any] = pickle.loads(path.read_bytes())
        return cached
    select_split, report_split = SPLITS[dataset]
    with prepared(DATA[dataset], split=report_split, embedder=embedder) as ready:
        select = load_beir(DATA[dataset], split=select_split)
        queries = {q: ready.dataset.queries[q] for q in ready.dataset.query_ids}
        queries.update({q: select.queries[q] for q in select.query_ids})
        info = ready.store.get_collection(ready.collection)
        if info is None:
            raise SystemExit(f"{spec}: collection {ready.collection!r} missing after indexing")
        limit = max(DEPTH, math.ceil(DEPTH * info.chunks / max(1, info.sources)))
        arms = collect_arms(ready.store, ready.collection, queries, embedder=ready.embedder, limit=limit)
        if arms.dense is None:
            raise SystemExit(f"{spec}: no dense arm ({arms.dense_reason})")
        data = {
            "run": spec, "lex": arms.lexical, "den": arms.dense, "doc_of": arms.doc_of, "limit": limit,
            "chunks": info.chunks,
            "splits": {select_split: dict(select.qrels), report_split: dict(ready.dataset.qrels)},
            "select": select_split, "report": report_split,
        }
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(data))
    return data


def with_coverage(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` plus ``covered``: per query, does the run's embedder declare the language
    the query's stopwords vote for (None: undetermined) — the engine's own rule."""
    dataset, _, embedder = data["run"].partition(":")
    languages = embedder_languages(make_embedder(embedder))
    texts: dict[str, str] = {}
    for split in (data["select"], data["report"]):
        loaded = load_beir(DATA[dataset], split=split)
        texts.update({q: loaded.queries[q] for q in loaded.query_ids})
    data["texts"], data["languages"] = texts, languages
    base = FusionSettings()
    data["covered"] = {q: for_query(base, t, languages).embedder_covers_query for q, t in texts.items()}
    return data


# ---------------------------------------------------------------- fast fused ranking


def _collapse(ranked: Ranked, doc_of: dict[str, str], depth: int) -> Ranked:
    out: Ranked = []
    seen: set[str] = set()
    for cid, score in ranked:
        doc = doc_of.get(cid)
        if doc is None or doc in seen:
            continue
        seen.add(doc)
        out.append((doc, score))
        if len(out) >= depth:
            break
    return out


def _norm(scores: np.ndarray, ranks: np.ndarray, present: np.ndarray, kind: str) -> np.ndarray:
    out = np.zeros(len(scores))
    if not present.any():
        return out
    s = scores[present]
    if kind == "minmax":
        lo, hi = s.min(), s.max()
        out[present] = (s - lo) / (hi - lo) if hi > lo else 1.0
    elif kind == "zscore":
        sd = s.std()
        z = (s - s.mean()) / sd if sd > 0 else np.zeros(len(s))
        out[:] = z.min()
        out[present] = z
    elif kind == "dbsf":
        mu, sd = s.mean(), s.std()
        out[present] = np.clip((s - (mu - 3 * sd)) / (6 * sd), 0.0, 1.0) if sd > 0 else 1.0
    else:
        out[present] = 1.0 / (int(kind[3:]) + ranks[present])
    return out


class Candidates:
    """One query's fused-candidate arrays for one (level, depth)."""

    def __init__(self, lex: Ranked, den: Ranked, doc_of: dict[str, str], level: str, depth: int,
                 covered: bool | None = None) -> None:
        self.covered = covered
        if level == "doc":
            lex, den = _collapse(lex, doc_of, depth), _collapse(den, doc_of, depth)
        else:
            lex, den = lex[:depth], den[:depth]
        pos_l: dict[str, tuple[int, float]] = {}
        pos_d: dict[str, tuple[int, float]] = {}
        for pos, ranked in ((pos_l, lex), (pos_d, den)):
            for rank, (cid, score) in enumerate(ranked, start=1):
                pos.setdefault(cid, (rank, score))
        ids = sorted({**pos_l, **pos_d})  # sorted → index order is the chunk-id tie-break
        n = len(ids)
        self.ids = ids
        self.docs = [cid if level == "doc" else doc_of.get(cid) for cid in ids]
        arrays = []
        for pos in (pos_l, pos_d):
            present = np.array([c in pos for c in ids], dtype=bool)
            ranks = np.array([pos[c][0] if c in pos else 0 for c in ids], dtype=float)
            scores = np.array([pos[c][1] if c in pos else 0.0 for c in ids], dtype=float)
            arrays.append((scores, ranks, present))
        (ls, lr, lp), (ds, dr, dp) = arrays
        self.best_rank = np.minimum(np.where(lp, lr, np.inf), np.where(dp, dr, np.inf))
        self.index = np.arange(n)
        self.norms = {k: (_norm(ls, lr, lp, k), _norm(ds, dr, dp, k)) for k in NORMS}
        self.lex_empty, self.den_empty = not lex, not den
        self.conf_l, self.conf_d = round(confidence(lex), 6), round(confidence(den), 6)
        self.agree = agree(lex, den)

    def weight(self, v: Variant) -> float:
        """The dense weight ``v`` uses for this query (the engine's rule when adaptive)."""
        if self.den_empty:
            return 0.0
        if self.lex_empty:
            return 1.0
        if v.fixed is not None:
            return v.fixed
        if not self.agree and v.disagree is not None and not (v.language_aware and self.covered):
            return round(min(v.base, v.disagree), 6)
        return round(min(ADAPT_MAX, max(ADAPT_MIN, v.base + v.step * (self.conf_d - self.conf_l))), 6)

    def docs_ranked(self, norm: str, weight: float, depth: int = DEPTH) -> list[str]:
        """Documents in fused order (ties: better single-arm rank, then id), cut at ``depth``."""
        lnorm, dnorm = self.norms[norm]
        fused = (1.0 - weight) * lnorm + weight * dnorm
        order = np.lexsort((self.index, self.best_rank, -fused))
        out: list[str] = []
        seen: set[str] = set()
        for i in order:
            doc = self.docs[i]
            if doc is not None and doc not in seen:
                seen.add(doc)
                out.append(doc)
                if len(out) >= depth:
                    break
        return out


def ndcg10(docs: list[str], rels: dict[str, int]) -> float:
    """trec_eval's nDCG@10 (linear gain, log2(rank + 1) discount) for one query."""
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(docs[:10]) if rels.get(d, 0) > 0)
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:10]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


# ---------------------------------------------------------------- the grid


def score_grid(data: dict[str, Any], variants: list[Variant]) -> dict[str, dict[str, float]]:
    """Per variant, per query (every query of both splits): fast nDCG@10."""
    qrels = {**data["splits"][data["select"]], **data["splits"][data["report"]]}
    out: dict[str, dict[str, float]] = {v.name: {} for v in variants}
    for qid, rels in qrels.items():
        lex, den = data["lex"].get(qid, []), data["den"].get(qid, [])
        cov = data["covered"].get(qid)
        cands = {(lv, d): Candidates(lex, den, data["doc_of"], lv, d, cov) for lv in LEVELS for d in DEPTHS}
        memo: dict[tuple[str, str, int, float], float] = {}
        for v in variants:
            c = cands[(v.level, v.depth)]
            w = c.weight(v)
            key = (v.norm, v.level, v.depth, w)
            if key not in memo:
                memo[key] = ndcg10(c.docs_ranked(v.norm, w, 10), rels)
            out[v.name][qid] = memo[key]
    return out


def mean_over(scores: dict[str, float], qids: list[str]) -> float:
    return sum(scores.get(q, 0.0) for q in qids) / len(qids)


def arm_ndcg(data: dict[str, Any], qids: list[str], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    out = {}
    for arm, key in (("bm25", "lex"), ("vector", "den")):
        vals = [ndcg10(doc_ranking([c for c, _ in data[key].get(q, [])], data["doc_of"], 10), qrels[q])
                for q in qids]
        out[arm] = sum(vals) / len(vals)
    return out


def selection_qids(data: dict[str, Any]) -> list[str]:
    """The run's selection queries (SciFact train; FaQuAD original dev)."""
    return sorted(data["splits"][data["select"]])


def select(runs: list[dict[str, Any]], fast: dict[str, dict[str, dict[str, float]]],
           variants: list[Variant], chosen_qids: dict[str, list[str]]) -> tuple[Variant, list[dict[str, Any]]]:
    """The held-out rule (module docstring) on ``chosen_qids`` per run: feasible on every
    run, then the highest mean Δ vs the run's better arm."""
    table: list[dict[str, Any]] = []
    arms: dict[str, float] = {}
    for data in runs:
        qids = chosen_qids[data["run"]]
        qrels = {**data["splits"][data["select"]], **data["splits"][data["report"]]}
        arms[data["run"]] = max(arm_ndcg(data, qids, qrels).values())
    for index, v in enumerate(variants):
        deltas = {d["run"]: mean_over(fast[d["run"]][v.name], chosen_qids[d["run"]]) - arms[d["run"]] for d in runs}
        feasible = all(d >= -TOLERANCE for d in deltas.values())
        table.append({"variant": v.name, "index": index, "feasible": feasible,
                      "meanDelta": sum(deltas.values()) / len(deltas), "deltas": deltas})
    ranked = sorted((t for t in table if t["feasible"]), key=lambda t: (-round(t["meanDelta"], 9), t["index"]))
    if not ranked:
        raise SystemExit("no variant is feasible on the selection runs")
    return variants[ranked[0]["index"]], ranked


def language_prior(runs: list[dict[str, Any]], fast: dict[str, Any]) -> list[dict[str, Any]]:
    """The default with and without its language prior, per run, on the selection
    queries and on test: fast nDCG@10 means and a paired sign-flip test."""
    out = []
    for d in runs:
        row: dict[str, Any] = {"run": d["run"]}
        for label, qids in (("selection", selection_qids(d)), ("test", sorted(d["splits"][d["report"]]))):
            old, new = fast[d["run"]][PREVIOUS], fast[d["run"]][DEFAULT]
            deltas = [new[q] - old[q] for q in qids]
            row[label] = {"queries": len(qids), "previous": round(mean_over(old, qids), 4),
                          "default": round(mean_over(new, qids), 4),
                          "meanDelta": round(sum(deltas) / len(deltas), 4), "p": round(sign_flip(deltas), 4)}
        row["covered"] = {str(k): v for k, v in Counter(d["covered"].values()).items()}
        out.append(row)
    return out


def _article(qrels: dict[str, int]) -> str:
    doc = min(qrels)  # faquad-<article>-<paragraph>
    return doc.rsplit("-", 1)[0]


def crossfit(runs: list[dict[str, Any]], fast: dict[str, Any], variants: list[Variant]) -> dict[str, Any]:
    """Robustness check: two folds of FaQuAD's 900 questions by article (alternating in
    sorted article order); select on SciFact train + one fold, score on the other fold.
    Returns each fold's choice and the out-of-fold FaQuAD figures (fast nDCG@10)."""
    faquad = [d for d in runs if d["run"].startswith("faquad")]
    test = faquad[0]["splits"]["test"]
    articles = sorted({_article(r) for r in test.values()}, key=lambda a: int(a.split("-")[-1]))
    fold_of = {a: i % 2 for i, a in enumerate(articles)}
    folds = [[q for q in sorted(test) if fold_of[_article(test[q])] == f] for f in (0, 1)]
    out: dict[str, Any] = {"folds": [], "outOfFold": {}}
    oof: dict[str, dict[str, float]] = {d["run"]: {} for d in faquad}
    for f in (0, 1):
        fold_qids = {d["run"]: (folds[f] if d["run"].startswith("faquad") else selection_qids(d)) for d in runs}
        chosen, _ = select(runs, fast, variants, fold_qids)
        held = folds[1 - f]
        row: dict[str, Any] = {"fold": f, "selectQueries": len(folds[f]), "chosen": chosen.name, "test": {}}
        for d in runs:
            is_faquad = d["run"].startswith("faquad")
            sub = held if is_faquad else sorted(d["splits"][d["report"]])
            row["test"][d["run"]] = round(mean_over(fast[d["run"]][chosen.name], sub), 4)
            if is_faquad:
                oof[d["run"]].update({q: fast[d["run"]][chosen.name][q] for q in held})
        out["folds"].append(row)
    for d in faquad:
        qids = sorted(test)
        arms = {a: [ndcg10(doc_ranking([c for c, _ in d[k].get(q, [])], d["doc_of"], 10), test[q]) for q in qids]
                for a, k in (("bm25", "lex"), ("vector", "den"))}
        better = max(arms, key=lambda a: sum(arms[a]))
        default = [fast[d["run"]][DEFAULT][q] for q in qids]
        mine = [oof[d["run"]][q] for q in qids]
        out["outOfFold"][d["run"]] = {
            "ndcg@10": round(sum(mine) / len(mine), 4), "betterArm": round(sum(arms[better]) / len(qids), 4),
            "default": round(sum(default) / len(qids), 4),
            "vsBetterArmP": round(sign_flip([a - b for a, b in zip(mine, arms[better], strict=True)]), 4),
            "vsDefaultP": round(sign_flip([a - b for a, b in zip(mine, default, strict=True)]), 4),
        }
    return out


# ---------------------------------------------------------------- reporting through ir-measures


def rankings_for(data: dict[str, Any], v: Variant | str, qids: list[str]) -> dict[str, list[str]]:
    """Document rankings (depth 100) for ``v`` — a Variant, or the arm names bm25 / vector."""
    out = {}
    for q in qids:
        lex, den = data["lex"].get(q, []), data["den"].get(q, [])
        if isinstance(v, str):
            out[q] = doc_ranking([c for c, _ in (lex if v == "bm25" else den)], data["doc_of"], DEPTH)
        else:
            c = Candidates(lex, den, data["doc_of"], v.level, v.depth, data["covered"].get(q))
            out[q] = c.docs_ranked(v.norm, c.weight(v))
    return out


def engine_default(data: dict[str, Any], qids: list[str]) -> dict[str, list[str]]:
    """The engine's own path for the default (as benchmarks/fusion_modes.py runs it)."""
    settings = FusionSettings(overfetch=DEPTH, method=FusionMethod.ADAPTIVE, dense_weight=0.4)
    out = {}
    for q in qids:
        lex, den = data["lex"].get(q, []), data["den"].get(q, [])
        query = for_query(settings, data["texts"][q], data["languages"])
        resolved = resolve_fusion(query, lex[:DEPTH], den[:DEPTH])
        out[q] = doc_ranking(fused_chunk_ids(resolved, lex, den), data["doc_of"], DEPTH)
    return out


def _paired(a: dict[str, float], b: dict[str, float], qids: list[str]) -> dict[str, Any]:
    deltas = [a[q] - b[q] for q in qids]
    return {"meanDelta": round(sum(deltas) / len(deltas), 4), "better": sum(x > 1e-9 for x in deltas),
            "worse": sum(x < -1e-9 for x in deltas), "p": round(sign_flip(deltas), 4)}


def report_run(data: dict[str, Any], rows: dict[str, Variant | str], chosen: str,
               fast: dict[str, dict[str, float]]) -> dict[str, Any]:
    """ir-measures figures for ``rows`` on the run's report split (and its held-out part)."""
    qrels = data["splits"][data["report"]]
    qids = sorted(qrels)
    subsets = {"all": qids}
    seen = set(data["splits"][data["select"]])
    if seen & set(qids):  # FaQuAD: dev ⊂ test
        subsets["heldOut"] = [q for q in qids if q not in seen]
    scores = {name: per_query(qrels, run_from_rankings(rankings_for(data, v, qids)))["ndcg@10"]
              for name, v in rows.items()}
    engine = per_query(qrels, run_from_rankings(engine_default(data, qids)))["ndcg@10"]
    for q in qids:  # the fast path must be the engine's order, and its nDCG ir-measures'
        if abs(engine[q] - scores["default"][q]) > 1e-9:
            raise SystemExit(f"{data['run']} {q}: fast default {scores['default'][q]} ≠ engine {engine[q]}")
        for name in ("default", "chosen"):
            named = rows[name]
            key = named.name if isinstance(named, Variant) else name
            if abs(fast[key][q] - scores[name][q]) > 1e-9:
                raise SystemExit(f"{data['run']} {q}: fast nDCG {fast[key][q]} ≠ ir-measures {scores[name][q]}")
    out: dict[str, Any] = {"run": data["run"], "split": data["report"], "chosen": chosen, "subsets": {}}
    for label, sub in subsets.items():
        means = {name: round(mean_over(s, sub), 4) for name, s in scores.items()}
        better = "bm25" if means["bm25"] >= means["vector"] else "vector"
        rows_out = {}
        for name in rows:
            row: dict[str, Any] = {"ndcg@10": means[name]}
            if name not in ("bm25", "vector"):
                row["vsBetterArm"] = _paired(scores[name], scores[better], sub)
                if name != "default":
                    row["vsDefault"] = _paired(scores[name], scores["default"], sub)
            rows_out[name] = row
        out["subsets"][label] = {"queries": len(sub), "betterArm": better, "rows": rows_out}
    return out


def oracle(runs: list[dict[str, Any]], fast: dict[str, Any], variants: list[Variant]) -> dict[str, Any]:
    """Per report run, the grid's best variant *on test* — what selecting on test would claim."""
    out = {}
    for data in runs:
        qids = sorted(data["splits"][data["report"]])
        best = max(variants, key=lambda v: mean_over(fast[data["run"]][v.name], qids))
        out[data["run"]] = {"variant": best.name, "ndcg@10": round(mean_over(fast[data["run"]][best.name], qids), 4)}
    return out


def best_fixed(runs: list[dict[str, Any]], fast: dict[str, Any], variants: list[Variant]) -> dict[str, Any]:
    """Per run, the best *fixed-weight* variant of the grid on test: the issue defines its
    SciFact target as "the best fixed setting minus 0.005", measured in its own harness."""
    out = {}
    for data in runs:
        qids = sorted(data["splits"][data["report"]])
        best = max((v for v in variants if v.fixed is not None),
                   key=lambda v: mean_over(fast[data["run"]][v.name], qids))
        out[data["run"]] = {"variant": best.name, "ndcg@10": round(mean_over(fast[data["run"]][best.name], qids), 4)}
    return out


def targets(reports: list[dict[str, Any]], row: str, fixed: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's rules for ``row`` on each run (all report queries): the literal targets
    (SciFact 0.725; FaQuAD the better arm − 0.005) and SciFact's target as the issue defines
    it, restated in this harness (its best fixed setting on test − 0.005)."""
    out = []
    for r in reports:
        sub = r["subsets"]["all"]
        ndcg, arm = sub["rows"][row]["ndcg@10"], sub["rows"][sub["betterArm"]]["ndcg@10"]
        scifact = r["run"].startswith("scifact")
        target = 0.725 if scifact else round(arm - TOLERANCE, 4)
        relative = round(fixed[r["run"]]["ndcg@10"] - TOLERANCE, 4) if scifact else target
        out.append({"run": r["run"], "ndcg@10": ndcg, "betterArm": arm, "target": target,
                    "meets": ndcg >= target, "gap": round(ndcg - target, 4),
                    "bestFixed": fixed[r["run"]]["ndcg@10"], "harnessTarget": relative,
                    "meetsHarnessTarget": ndcg >= relative, "within0.01": ndcg >= arm - 0.01})
    return out


def _cell(row: dict[str, Any]) -> str:
    cell = f"{row['ndcg@10']:.4f}"
    parts = []
    if "vsBetterArm" in row:
        v = row["vsBetterArm"]
        parts.append(f"Δarm {v['meanDelta']:+.4f}, p={v['p']:.3f}")
    if "vsDefault" in row:
        v = row["vsDefault"]
        parts.append(f"Δdef {v['meanDelta']:+.4f}, p={v['p']:.3f}")
    return cell + (f" ({'; '.join(parts)})" if parts else "")


def markdown(payload: dict[str, Any]) -> str:
    """The human-readable report."""
    reports, sel = payload["reports"], payload["selection"]
    cols = [(r["run"], label) for r in reports for label in r["subsets"]]
    head = [f"{run} {'(900)' if label == 'all' and run.startswith('faquad') else ''}"
            f"{'held-out 837' if label == 'heldOut' else ''}".strip() for run, label in cols]
    lines = [
        "# Fusion grid with held-out selection (issue 13)",
        "",
        ("Regenerate: `PYTHONPATH=src .venv/bin/python benchmarks/fusion_grid.py` (the module docstring"
        " defines the grid and the selection rule). nDCG@10 by ir-measures, depth 100. Δ and p: paired"
        f" per-query nDCG@10 difference and two-sided sign-flip test ({PERMUTATIONS:,} permutations,"
        f" seed {SEED}) against the better single arm (Δarm) and the current default (Δdef)."
        + (f" Skipped: {', '.join(f'`{k}` ({v})' for k, v in SKIPPED.items())}." if SKIPPED else "")),
        "",
        (f"**Selection** on SciFact train (809 queries) + FaQuAD original dev (63), both embedders, over"
        f" {payload['gridSize']} variants: feasible = every selection run ≥ its better arm − {TOLERANCE};"
        f" objective = mean Δ vs the better arm over the {len(RUNS)} selection runs. **Chosen: `{sel['chosen']}`**"
        f" ({sel['feasible']} variants feasible). The current default `{DEFAULT}` ranks"
        f" {sel['defaultRank'] or 'infeasible'} of the feasible ones on the selection data."),
        "",
        "| variant | " + " | ".join(head) + " |",
        "|---|" + "---|" * len(cols),
    ]
    names = list(reports[0]["subsets"]["all"]["rows"])
    for name in names:
        label = {"chosen": f"chosen: {sel['chosen']}", "default": f"default: {DEFAULT}"}.get(name, name)
        cells = [_cell(r["subsets"][lab]["rows"][name]) for r in reports for lab in r["subsets"]]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "## Selection: the best feasible variants on the selection data, and what they score on test", "",
              ("| # | variant | " + " | ".join(f"Δarm {r} selection" for r in RUNS) + " | mean Δarm | "
               + " | ".join(f"{r} test" for r in RUNS) + " |"), "|---|---|" + "---|" * (2 * len(RUNS) + 1)]
    for i, t in enumerate(sel["top"], start=1):
        deltas = " | ".join(f"{t['deltas'][r]:+.4f}" for r in RUNS)
        tests = " | ".join(f"{t['test'][r]:.4f}" for r in RUNS)
        lines.append(f"| {i} | {t['variant']} | {deltas} | {t['meanDelta']:+.4f} | {tests} |")
    arms = "; ".join(f"{run}: BM25 {a['bm25']:.4f}, dense {a['vector']:.4f}" for run, a in sel["arms"].items())
    lines += ["", f"Single arms on the selection queries — {arms}."]
    lines += ["", ("Figures in this table are the script's fast nDCG@10 (checked equal to ir-measures per query"
              " on the default and the chosen variant)."), "",
              "## The language prior: the default with and without it", "",
              ("The only change from the previous default: arms that disagree lower the dense weight only when"
               " the embedder does not declare the query's language (by its stopwords; `covered` counts queries"
               " declared / not declared / undetermined). The selection queries were never used to set the"
               " default's constants, so the first column pair is held-out."), "",
              "| run | covered | selection: previous → default (Δ, p) | test: previous → default (Δ, p) |",
              "|---|---|---|---|"]
    for row in payload["languagePrior"]:
        cov = ", ".join(f"{k}: {v}" for k, v in sorted(row["covered"].items()))
        cells = [f"{row[k]['previous']:.4f} → {row[k]['default']:.4f} ({row[k]['meanDelta']:+.4f}, p={row[k]['p']:.3f})"
                 for k in ("selection", "test")]
        lines.append(f"| {row['run']} | {cov} | {cells[0]} | {cells[1]} |")
    lines += ["", "## Test oracle (what choosing on test would have claimed)", "",
              "| run | best variant on test | nDCG@10 |", "|---|---|---|"]
    for run, o in payload["oracle"].items():
        lines.append(f"| {run} | {o['variant']} | {o['ndcg@10']:.4f} |")
    cf = payload["crossFit"]
    lines += ["", "## Robustness: FaQuAD cross-fitted by article (select on SciFact train + one fold, score the other)",
              "", "| fold selected on | queries | chosen | "
              + " | ".join(f"{r} {'other fold' if r.startswith('faquad') else 'test'}" for r in RUNS) + " |",
              "|---|---|---|" + "---|" * len(RUNS)]
    for row in cf["folds"]:
        t = " | ".join(f"{row['test'][r]:.4f}" for r in RUNS)
        lines.append(f"| {row['fold']} | {row['selectQueries']} | {row['chosen']} | {t} |")
    lines += ["", "| run | out-of-fold nDCG@10 (900) | better arm | default | p vs arm | p vs default |",
              "|---|---|---|---|---|---|"]
    for run, o in cf["outOfFold"].items():
        lines.append(f"| {run} | {o['ndcg@10']:.4f} | {o['betterArm']:.4f} | {o['default']:.4f} | "
                     f"{o['vsBetterArmP']:.3f} | {o['vsDefaultP']:.3f} |")
    lines += ["", "## Verdict against the issue's targets (all report queries)", "",
              ("Literal target: SciFact 0.725, FaQuAD the better arm − 0.005. The issue defines SciFact's as \"the best"
               " fixed setting minus 0.005\" (0.730 in its harness: whole documents, bm25s); restated here it is this"
               " grid's best fixed-weight variant on test − 0.005 (variant in the JSON, `bestFixed`)."), "",
              ("| variant | run | nDCG@10 | better arm | literal target | met | gap | best fixed here | target here"
               " | met | never > 0.01 below arm |"),
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, checks in payload["targets"].items():
        for c in checks:
            lines.append(f"| {name} | {c['run']} | {c['ndcg@10']:.4f} | {c['betterArm']:.4f} | {c['target']:.4f} | "
                         f"{'yes' if c['meets'] else 'no'} | {c['gap']:+.4f} | {c['bestFixed']:.4f} | "
                         f"{c['harnessTarget']:.4f} | {'yes' if c['meetsHarnessTarget'] else 'no'} | "
                         f"{'yes' if c['within0.01'] else 'no'} |")
    lines += ["", "## What it means", "", *payload["conclusion"], "",
              (f"Measured {payload['date']} on {payload['machine']['cpu']} ({payload['machine']['cores']} cores);"
              f" {payload['seconds']} s"
              f"{' (arms reused from --arms-cache)' if payload['armsCached'] else ''}."), ""]
    return "\n".join(lines)


REFERENCES = {
    "previous default (no language prior)": Variant("minmax", "chunk", 100, base=0.4, disagree=0.3, step=0.5),
    "rrf (k 60, equal)": Variant("rrf60", "chunk", 100, fixed=0.5),
    "minmax w0.5": Variant("minmax", "chunk", 100, fixed=0.5),
    "minmax w0.4": Variant("minmax", "chunk", 100, fixed=0.4),
}


def conclude(payload: dict[str, Any]) -> list[str]:
    """Plain sentences from the figures (no hard-coded outcome)."""
    chosen, sel = payload["selection"]["chosen"], payload["selection"]
    out = []
    same = chosen == DEFAULT
    out.append(f"- Held-out selection picks `{chosen}`" + (" — the current default." if same else
               f"; the current default ranks {sel['defaultRank'] or 'infeasible'} on the selection data."))
    for name in ("chosen", "default"):
        met = [c for c in payload["targets"][name] if c["meets"]]
        missed = [f"{c['run']} by {-c['gap']:.4f}" for c in payload["targets"][name] if not c["meets"]]
        safe = all(c["within0.01"] for c in payload["targets"][name])
        here = [c for c in payload["targets"][name] if c["meetsHarnessTarget"]]
        out.append(f"- {name}: literal targets met on {len(met)}/{len(payload['targets'][name])} runs"
                   + (f" (missed: {', '.join(missed)})" if missed else "")
                   + f"; with SciFact's target restated in this harness, {len(here)}/{len(payload['targets'][name])}"
                   + ("; never more than 0.01 below the better arm." if safe else "; MORE than 0.01 below an arm."))
    scifact = {r["run"]: r["subsets"]["all"]["rows"] for r in payload["reports"] if r["run"].startswith("scifact")}
    for run, rows in scifact.items():
        if "vsDefault" in rows["chosen"]:
            v = rows["chosen"]["vsDefault"]
            out.append(f"- On {run} test the chosen variant differs from the default by {v['meanDelta']:+.4f}"
                       f" (p = {v['p']:.3f}, {v['better']} queries better, {v['worse']} worse).")
    for row in payload["languagePrior"]:
        sel_, test = row["selection"], row["test"]
        out.append(f"- Language prior, {row['run']}: on the selection queries (held out from every choice of the"
                   f" default's constants) {sel_['previous']:.4f} → {sel_['default']:.4f} ({sel_['meanDelta']:+.4f},"
                   f" p = {sel_['p']:.3f}); on test {test['previous']:.4f} → {test['default']:.4f}"
                   f" ({test['meanDelta']:+.4f}, p = {test['p']:.3f}).")
    cf = payload["crossFit"]
    picks = ", ".join(f"`{r['chosen']}` (" + ", ".join(f"{run} test {r['test'][run]:.4f}" for run in scifact) + ")"
                      for r in cf["folds"])
    oof = "; ".join(f"{run} {o['ndcg@10']:.4f} (better arm {o['betterArm']:.4f}, default {o['default']:.4f})"
                    for run, o in cf["outOfFold"].items())
    out.append(f"- Cross-fitted on FaQuAD by article, the two folds pick {picks}; out-of-fold FaQuAD: {oof}.")
    for run, rows in scifact.items():
        held_out_best = max([rows["chosen"]["ndcg@10"], rows["default"]["ndcg@10"]]
                            + [r["test"][run] for r in cf["folds"]])
        verdict = "reaches" if held_out_best >= 0.725 else "misses"
        out.append(f"- {run}: the best test figure of any variant chosen without test labels (default included)"
                   f" is {held_out_best:.4f}: it {verdict} the 0.725 target ({held_out_best - 0.725:+.4f}). The"
                   " target is the issue's best fixed setting (0.730, read off the test split) minus 0.005, i.e. it"
                   " is measured against a figure selected on test.")
    chosen_ok = all(c["meets"] or c["run"].startswith("scifact") for c in payload["targets"]["chosen"]) and all(
        c["within0.01"] for c in payload["targets"]["chosen"])
    gains = all(rows["chosen"]["ndcg@10"] > rows["default"]["ndcg@10"] for rows in scifact.values())
    replace = chosen != DEFAULT and gains and chosen_ok
    out.append(f"- Engine default `{DEFAULT}`: " + ("the held-out choice beats it on SciFact test and keeps the"
               " FaQuAD rules, so it is a candidate to replace it." if replace else "kept — the held-out choice does"
               " not both beat it on SciFact test and keep the FaQuAD rules. The default's constants (0.4 / 0.3 / 0.5)"
               " were set on these test runs before; only the language prior is new, and its check is the"
               " selection-query line above (on the selection data the default is"
               f" {'feasible, rank ' + str(sel['defaultRank']) if sel['defaultRank'] else 'infeasible'})."))
    for run, o in payload["oracle"].items():
        out.append(f"- {run}: the best of the grid on test is {o['ndcg@10']:.4f} (`{o['variant']}`); a figure"
                   " chosen that way is optimistic by construction.")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms-cache", type=Path, default=None,
                        help="folder to save / reuse the collected arms (pickles) between runs")
    args = parser.parse_args()
    started = time.perf_counter()
    runs = []
    for spec in RUNS:
        print(f"collecting {spec} …", flush=True)
        runs.append(with_coverage(collect(spec, args.arms_cache)))
    variants = grid()
    fast = {}
    for data in runs:
        t = time.perf_counter()
        fast[data["run"]] = score_grid(data, variants)
        print(f"grid {data['run']}: {len(variants)} variants, {time.perf_counter() - t:.0f} s", flush=True)
    chosen, feasible = select(runs, fast, variants, {d["run"]: selection_qids(d) for d in runs})
    selection_arms = {d["run"]: {k: round(v, 4) for k, v in arm_ndcg(
        d, selection_qids(d), d["splits"][d["select"]]).items()} for d in runs}
    by_name = {v.name: v for v in variants}
    rank = next((i for i, t in enumerate(feasible, start=1) if t["variant"] == DEFAULT), None)
    top = []
    for entry in feasible[:10]:
        tests = {d["run"]: round(mean_over(fast[d["run"]][entry["variant"]], sorted(d["splits"][d["report"]])), 4)
                 for d in runs}
        top.append({**{k: entry[k] for k in ("variant", "meanDelta", "deltas")}, "test": tests})
    rows: dict[str, Variant | str] = {"bm25": "bm25", "vector": "vector", "default": by_name[DEFAULT],
                                      "chosen": chosen, **REFERENCES}
    reports = [report_run(d, rows, chosen.name, fast[d["run"]]) for d in runs]
    payload: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": machine_info(),
        "permutations": PERMUTATIONS, "seed": SEED, "skipped": SKIPPED, "gridSize": len(variants),
        "selection": {"chosen": chosen.name, "feasible": len(feasible), "defaultRank": rank,
                      "arms": selection_arms,
                      "rule": "feasible: every selection run >= its better arm - 0.005; max mean delta vs arm",
                      "top": top},
        "reports": reports,
        "oracle": oracle(runs, fast, variants),
        "crossFit": crossfit(runs, fast, variants),
        "languagePrior": language_prior(runs, fast),
        "bestFixed": best_fixed(runs, fast, variants),
        "seconds": round(time.perf_counter() - started, 1),
        "armsCached": bool(args.arms_cache),
    }
    payload["targets"] = {name: targets(reports, name, payload["bestFixed"]) for name in ("chosen", "default")}
    payload["conclusion"] = conclude(payload)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fusion_grid.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (RESULTS / "fusion_grid.md").write_text(markdown(payload), encoding="utf-8")
    print((RESULTS / "fusion_grid.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
