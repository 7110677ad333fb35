"""One table: every fusion mode on every dataset in ``../shared/data``, three embedders.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/fusion_table.py --store-dir /tmp/fusion-cache \\
        --cache /tmp/fusion-cache/embeddings.sqlite
    PYTHONPATH=src .venv/bin/python benchmarks/fusion_table.py --runs scifact/train:e5 cosqa-dev:minilm

A *run* is ``DATASET[/SPLIT]:EMBEDDER``. The BEIR datasets (``scifact``, ``faquad-pt``,
``cosqa-dev``) are indexed from their ``corpus.jsonl`` through the evaluation harness
(:func:`plait.evaluation.prepare.prepared`); ``default`` is ranked as search ranks it, the
identifier precedence (:mod:`plait.retrieval.identifier_first`, chunk texts read from the
run's kept store) included; the two ``realrepo/<name>`` sets are
written file by file into a folder and indexed as a user would (``Plait.index`` of the
folder: the Markdown reader, heading paths, scopes), exactly as ``benchmarks/realrepo.py``
does, and ranked by file. Each arm is asked once per query (depth 100 documents, the
harness's chunk limit) and the two lists are fused with every mode of
:data:`fusion_modes.MODES` plus the candidates of :data:`CANDIDATES` (query-level signals
measured for issue 21 and not adopted unless the table says so).

Per run and mode: nDCG@10 and R@10 (ir-measures) on all queries and per kind —
``identifier`` / ``natural`` by :func:`plait.evaluation.slices.classify` for the BEIR
sets, by each query's ``metadata.kind`` for realrepo (its unanswerable questions have no
qrels and are left out) — and the paired per-query nDCG@10 difference against the better
single arm and against equal RRF, with a two-sided sign-flip test (10,000 permutations,
seeded). ``--store-dir`` keeps one store per dataset and embedder (indexing is
incremental: a later run embeds nothing), ``--cache`` is the embedding cache file.
Writes ``benchmarks/results/fusion_table.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import pickle
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "src", ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from fusion_modes import MODES, PERMUTATIONS, SEED, _paired, _settings
from plait.analysis import analyse
from plait.calibration import calibrate
from plait.embeddings import make_embedder
from plait.embeddings.cache import CachedEmbedder
from plait.evaluation.metrics import mean_scores, per_query, run_from_rankings
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import Arms, collect_arms, doc_ranking, machine_info, saved_fusion
from plait.evaluation.slices import classify
from plait.fusion import Fused, linear, resolve_fusion, rrf
from plait.fusion_adaptive import ADAPT_MAX, ADAPT_MIN
from plait.retrieval.identifier_first import PRECEDENCE_DEPTH, holder_text, identifier_first
from plait.retrieval.pipeline import fuse, precedence_identifiers
from plait.retrieval.plan import lexical_terms
from plait.service import Plait
from plait.stores import open_store
from plait.stores.base import Store
from plait.types import FusionSettings

RESULTS = ROOT / "benchmarks" / "results"
DATA = ROOT.parent / "shared" / "data"
DEPTH = 100
#: the splits constants were chosen on (issue 21: SciFact train, FaQuAD dev, CoSQA dev)
CHOSEN_ON = {"scifact/train", "faquad-pt/dev", "cosqa-dev/dev"}
DEFAULT_SPLIT = {"scifact": "test", "faquad-pt": "test", "cosqa-dev": "dev", "realrepo": "test"}
DATASETS = ("scifact/train", "scifact", "faquad-pt/dev", "faquad-pt", "cosqa-dev",
            "realrepo/manage-get-gov", "realrepo/teaching-vacancies")
#: e5 and MiniLM (issue 21's two embedders) and e5-minilm (the default embedder, both averaged)
DEFAULT_RUNS = tuple(f"{d}:{e}" for e in ("e5", "minilm", "e5-minilm") for d in DATASETS)
KINDS = ("identifier", "natural")

Ranked = list[tuple[str, float]]
#: A candidate mode: (run, query id) → (document ranking, dense weight used or None).
Candidate = Callable[["RunData", str], tuple[list[str], float | None]]

@dataclass
class RunData:
    """One run's judged queries, their kinds, both arms' lists and the collection's settings."""

    run: str
    dataset: str
    split: str
    embedder: str
    texts: dict[str, str]
    kinds: dict[str, str]
    qrels: dict[str, dict[str, int]]
    arms: Arms
    saved: FusionSettings
    estimate: dict[str, Any] | None
    chunks: int
    calibrated: float
    calibration: dict[str, Any]
    #: per query: the share of its lexical terms (stopwords dropped) the lexical arm's first hit contains
    term_share: dict[str, float] = field(default_factory=dict)
    extras: dict[str, float] = field(default_factory=dict)
    #: the kept store the run was collected from (chunk texts for the identifier precedence)
    store_path: str = ""


def _calibration(store: Store, collection: str, embedder: Any) -> tuple[float, dict[str, Any]]:
    cal = calibrate(store, collection, embedder)
    return cal.dense_weight, {"lexicalMrr": cal.lexical_mrr, "denseMrr": cal.dense_mrr, "denseWeight": cal.dense_weight}


def _term_shares(store: Store, collection: str, texts: Mapping[str, str], arms: Arms) -> dict[str, float]:
    """Per query, the share of its lexical terms (:func:`plait.retrieval.plan.lexical_terms`,
    exact field) that the lexical arm's first hit contains (0.0 when the arm found nothing)."""
    tops = {qid: arms.lexical[qid][0][0] for qid in texts if arms.lexical.get(qid)}
    chunks = store.get_chunks(collection, sorted(set(tops.values())))
    shares: dict[str, float] = {}
    for qid, text in texts.items():
        exact, _ = lexical_terms(text)
        chunk = chunks.get(tops.get(qid, ""))
        if chunk is None or not exact:
            shares[qid] = 0.0 if chunk is None else 1.0
            continue
        have = set(analyse(chunk.content).exact)
        shares[qid] = sum(term in have for term in exact) / len(exact)
    return shares


def _beir(dataset: str, split: str, embedder: str, cache: Path | None, store_dir: Path | None) -> RunData:
    store = str(store_dir / f"{dataset}-{embedder}.db") if store_dir is not None else None
    with prepared(DATA / dataset, split=split, embedder=embedder, cache=cache, store=store) as ready:
        texts = {qid: ready.dataset.queries[qid] for qid in ready.dataset.query_ids}
        info = ready.store.get_collection(ready.collection)
        if info is None or ready.embedder is None:
            raise SystemExit(f"{dataset}:{embedder}: no collection or no embedder")
        limit = max(DEPTH, math.ceil(DEPTH * info.chunks / max(1, info.sources)))
        arms = collect_arms(ready.store, ready.collection, texts, embedder=ready.embedder, limit=limit)
        weight, calibration = _calibration(ready.store, ready.collection, ready.embedder)
        return RunData(
            run=f"{dataset}/{split}:{embedder}", dataset=dataset, split=split, embedder=embedder, texts=texts,
            kinds={qid: classify(text) for qid, text in texts.items()},
            qrels={q: dict(d) for q, d in ready.dataset.qrels.items()}, arms=arms,
            saved=saved_fusion(ready.store, ready.collection),
            estimate=ready.store.get_settings(ready.collection).get("armEstimate"),
            chunks=info.chunks, calibrated=weight, calibration=calibration,
            term_share=_term_shares(ready.store, ready.collection, texts, arms), store_path=store or "",
        )


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _realrepo(name: str, embedder_name: str, cache: Path | None, store_dir: Path) -> RunData:
    folder = DATA / "realrepo" / name
    corpus = _jsonl(folder / "corpus.jsonl")
    queries = {q["_id"]: q for q in _jsonl(folder / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    repo = store_dir / f"realrepo-{name}-files"
    for doc in corpus:
        path = repo / doc["_id"]
        if not path.is_file() or path.read_text(encoding="utf-8") != doc["text"]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(doc["text"], encoding="utf-8")
    inner = make_embedder(embedder_name)
    if inner is None:
        raise SystemExit(f"realrepo/{name}:{embedder_name}: no embedder")
    embedder = CachedEmbedder(inner, path=cache)
    texts = {qid: q["text"] for qid, q in queries.items() if qid in qrels}
    with Plait(str(store_dir / f"realrepo-{name}-{embedder_name}.db"), embedder=embedder) as engine:
        engine.index(repo)
        store = engine.store
        info = store.get_collection("default")
        if info is None:
            raise SystemExit(f"realrepo/{name}: nothing indexed")
        arms = collect_arms(store, "default", texts, embedder=embedder, limit=DEPTH)
        weight, calibration = _calibration(store, "default", embedder)
        return RunData(
            run=f"realrepo/{name}:{embedder_name}", dataset=f"realrepo/{name}", split="test",
            embedder=embedder_name, texts=texts,
            kinds={qid: str((queries[qid].get("metadata") or {}).get("kind", "natural")) for qid in texts},
            qrels=qrels, arms=arms, saved=saved_fusion(store, "default"),
            estimate=store.get_settings("default").get("armEstimate"), chunks=info.chunks,
            calibrated=weight, calibration=calibration, term_share=_term_shares(store, "default", texts, arms),
            store_path=str(store_dir / f"realrepo-{name}-{embedder_name}.db"),
        )


def collect(spec: str, *, cache: Path | None, store_dir: Path) -> RunData:
    """The :class:`RunData` of ``DATASET[/SPLIT]:EMBEDDER``."""
    name, _, embedder = spec.partition(":")
    embedder = embedder or "e5"
    if name.startswith("realrepo/"):
        return _realrepo(name.split("/", 1)[1], embedder, cache, store_dir)
    dataset, _, split = name.partition("/")
    return _beir(dataset, split or DEFAULT_SPLIT[dataset], embedder, cache, store_dir)


def _default_resolved(data: RunData, qid: str) -> tuple[Ranked, Ranked, FusionSettings]:
    lex, den = data.arms.lexical[qid][:DEPTH], (data.arms.dense or {}).get(qid, [])[:DEPTH]
    settings = data.arms.query_settings(data.saved.model_copy(update={"overfetch": DEPTH}), qid)
    return lex, den, resolve_fusion(settings, lex, den)


def _with_weight(data: RunData, qid: str, shift: Callable[[Ranked, Ranked, float], float]) -> tuple[list[str], float]:
    """``default`` with its dense weight moved by ``shift(lexical, dense, weight)``, within 0.1..0.9."""
    lex, den, resolved = _default_resolved(data, qid)
    weight = resolved.dense_weight_used if resolved.dense_weight_used is not None else resolved.dense_weight
    if lex and den:
        weight = round(min(ADAPT_MAX, max(ADAPT_MIN, shift(lex, den, weight))), 6)
    ids = [f.chunk_id for f in linear(lex, den, dense_weight=weight)]
    return doc_ranking(ids, data.arms.doc_of, DEPTH), weight


def _dense_gap(den: Ranked) -> float:
    return den[0][1] - den[min(10, len(den)) - 1][1] if den else 0.0


def dense_gap(data: RunData, qid: str) -> tuple[list[str], float | None]:
    """Dense-score spread (Qdrant's weak-retrieval signal): a dense list whose top-10 cosine gap
    is below the run's median gap ``g̃`` loses ``0.1 · (1 − gap / g̃)`` of dense weight. The median
    is over the run's own queries (label-free, but not known to a search in advance)."""
    ref = data.extras.setdefault("medianGap", _median([_dense_gap((data.arms.dense or {}).get(q, [])[:DEPTH])
                                                       for q in data.texts]))
    return _with_weight(data, qid, lambda lex, den, w: w - 0.1 * max(0.0, 1 - _dense_gap(den) / ref) if ref > 0 else w)


def term_share(data: RunData, qid: str) -> tuple[list[str], float | None]:
    """Lexical evidence discounting a single term: the dense weight moves by ``0.2 · (0.75 − s)``,
    ``s`` the share of the query's lexical terms the lexical arm's first hit contains."""
    share = data.term_share.get(qid, 1.0)
    return _with_weight(data, qid, lambda lex, den, w: w + 0.2 * (0.75 - share))


def doc_level(data: RunData, qid: str) -> tuple[list[str], float | None]:
    """Each arm collapsed to documents (its best chunk) before ``default`` fuses them, the weight
    resolved on the collapsed lists: a document gets both arms' evidence even when they found
    different chunks of it."""
    lex, den = _collapse(data.arms.lexical[qid][:DEPTH], data.arms.doc_of), \
        _collapse((data.arms.dense or {}).get(qid, [])[:DEPTH], data.arms.doc_of)
    settings = data.arms.query_settings(data.saved.model_copy(update={"overfetch": DEPTH}), qid)
    resolved = resolve_fusion(settings, lex, den)
    weight = resolved.dense_weight_used if resolved.dense_weight_used is not None else resolved.dense_weight
    return [f.chunk_id for f in linear(lex, den, dense_weight=weight)][:DEPTH], weight


def _rank_mix(data: RunData, qid: str, minmax_share: float) -> tuple[list[str], float | None]:
    """``default``'s dense weight ``w``, applied to ranks: each chunk's ``w / (60 + dense rank) +
    (1 − w) / (60 + lexical rank)`` (0 for an arm that missed it), scaled by the query's largest;
    mixed with ``default``'s min–max score as ``minmax_share · minmax + (1 − minmax_share) · rank``
    (0: RRF weighted by the adaptive weight). Ties by chunk id."""
    lex, den, resolved = _default_resolved(data, qid)
    weight = resolved.dense_weight_used if resolved.dense_weight_used is not None else resolved.dense_weight
    # plait.fusion.rrf with the arms weighted 1 − w and w (its scores are twice these; scaled away)
    rank_score = {f.chunk_id: f.score for f in rrf(lex, den, lexical_weight=1 - weight)}
    ids = set(rank_score)
    top = max(rank_score.values(), default=0.0) or 1.0
    minmax = {f.chunk_id: f.score for f in linear(lex, den, dense_weight=weight)}
    score = {cid: minmax_share * minmax.get(cid, 0.0) + (1 - minmax_share) * rank_score[cid] / top for cid in ids}
    return doc_ranking(sorted(ids, key=lambda cid: (-score[cid], cid)), data.arms.doc_of, DEPTH), weight


def _collapse(ranked: Ranked, doc_of: Mapping[str, str]) -> Ranked:
    seen: set[str] = set()
    out: Ranked = []
    for cid, score in ranked:
        doc = doc_of.get(cid)
        if doc is not None and doc not in seen:
            seen.add(doc)
            out.append((doc, score))
    return out


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


_STORES: dict[str, Store] = {}


def _identifiers_first(data: RunData, qid: str, settings: FusionSettings, fused: list[Fused]) -> list[Fused]:
    """``fused`` after search's identifier precedence (:func:`precedence_identifiers`: hybrid
    runs only; the chunk texts are read from the run's kept store, which pickled arms of
    earlier runs do not carry)."""
    identifiers = precedence_identifiers(data.texts[qid], settings, hybrid=data.arms.dense is not None)
    if not identifiers or not fused:
        return fused
    store = _kept_store(data.store_path)
    collection = "default" if data.dataset.startswith("realrepo/") else store.list_collections()[0].name
    window = [f.chunk_id for f in fused[:PRECEDENCE_DEPTH]]
    contents = {cid: holder_text(chunk) for cid, chunk in store.get_chunks(collection, window).items()}
    return identifier_first(fused, contents, identifiers)[0]


def _kept_store(path: str) -> Store:
    """The kept store at ``path``, opened once per process."""
    store = _STORES.get(path)
    if store is None:
        store = _STORES[path] = open_store(path, create=False)
    return store


def _store_path(spec: str, store_dir: Path) -> Path:
    """Where :func:`collect` keeps the store of ``DATASET[/SPLIT]:EMBEDDER``."""
    name, _, embedder = spec.partition(":")
    if name.startswith("realrepo/"):
        return store_dir / f"realrepo-{name.split('/', 1)[1]}-{embedder}.db"
    return store_dir / f"{name.split('/', 1)[0]}-{embedder}.db"


def default_without_precedence(data: RunData, qid: str) -> tuple[list[str], float | None]:
    """``default`` as fusion alone orders it, before search's identifier precedence."""
    settings = _settings("default", data.calibrated, data.saved)
    assert settings is not None
    resolved, fused, _ = fuse(data.arms.query_settings(settings, qid), data.arms.lexical[qid],
                              (data.arms.dense or {}).get(qid, []), need=0)
    return doc_ranking([f.chunk_id for f in fused], data.arms.doc_of, DEPTH), resolved.dense_weight_used


CANDIDATES: dict[str, Candidate] = {
    "default (no identifier precedence)": default_without_precedence,
    "default+dense-gap": dense_gap,
    "default+term-share": term_share,
    "default·doc-level": doc_level,
    "default·weighted-rrf": lambda data, qid: _rank_mix(data, qid, 0.0),
    "default·rank-mix-0.5": lambda data, qid: _rank_mix(data, qid, 0.5),
    "default·rank-mix-0.75": lambda data, qid: _rank_mix(data, qid, 0.75),
}


def mode_rankings(data: RunData, mode: str) -> tuple[dict[str, list[str]], list[float]]:
    """Document rankings per query for ``mode`` (a fusion_modes mode or a candidate), and
    the dense weights used (linear fusions)."""
    rankings: dict[str, list[str]] = {}
    used: list[float] = []
    dense = data.arms.dense or {}
    settings = _settings(mode, data.calibrated, data.saved) if mode not in CANDIDATES else None
    for qid in data.texts:
        lex, den = data.arms.lexical[qid], dense.get(qid, [])
        if mode in CANDIDATES:
            docs, weight = CANDIDATES[mode](data, qid)
            if weight is not None:
                used.append(weight)
            rankings[qid] = docs
            continue
        elif settings is None:
            ids = [c for c, _ in (lex if mode == "bm25" else den)]
        else:
            resolved, fused, _ = fuse(data.arms.query_settings(settings, qid), lex, den, need=0)
            if resolved.dense_weight_used is not None:
                used.append(resolved.dense_weight_used)
            if mode == "default":  # as search does: plait.retrieval.identifier_first
                fused = _identifiers_first(data, qid, settings, fused)
            ids = [f.chunk_id for f in fused]
        rankings[qid] = doc_ranking(ids, data.arms.doc_of, DEPTH)
    return rankings, used


def _slice_means(scores: Mapping[str, Mapping[str, float]], kinds: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in ("all", *KINDS):
        ids = [q for q in kinds if name == "all" or kinds[q] == name]
        if ids:
            means = mean_scores({m: scores[m] for m in ("ndcg@10", "recall@10")}, ids)
            out[name] = {"queries": len(ids), **{k: round(v, 4) for k, v in means.items()}}
    return out


def evaluate_run(data: RunData, modes: Sequence[str]) -> dict[str, Any]:
    scores: dict[str, dict[str, dict[str, float]]] = {}
    weights: dict[str, list[float]] = {}
    for mode in modes:
        rankings, used = mode_rankings(data, mode)
        scores[mode] = per_query(data.qrels, run_from_rankings(rankings))
        if used:
            weights[mode] = used
    means = {m: mean_scores(s)["ndcg@10"] for m, s in scores.items()}
    better = "bm25" if means["bm25"] >= means["vector"] else "vector"
    rows: dict[str, Any] = {}
    for mode in modes:
        row: dict[str, Any] = {"slices": _slice_means(scores[mode], data.kinds)}
        if mode not in ("bm25", "vector"):
            row["vsBetterArm"] = _paired(scores[mode]["ndcg@10"], scores[better]["ndcg@10"])
            if mode != "rrf":
                row["vsRrf"] = _paired(scores[mode]["ndcg@10"], scores["rrf"]["ndcg@10"])
        if mode in weights:
            w = weights[mode]
            row["denseWeightUsed"] = round(sum(w) / len(w), 4)
        rows[mode] = row
    return {
        "run": data.run, "dataset": data.dataset, "split": data.split, "embedder": data.embedder,
        "chosenOn": f"{data.dataset}/{data.split}" in CHOSEN_ON, "queries": len(data.texts),
        "chunks": data.chunks, "betterArm": better, "armEstimate": data.estimate,
        "calibration": data.calibration, "modes": rows,
        "perQuery": {m: {q: round(v, 6) for q, v in scores[m]["ndcg@10"].items()} for m in modes},
    }


def verdict(runs: Sequence[Mapping[str, Any]], mode: str) -> dict[str, Any]:
    """Issue 21's conditions for ``mode``: ≥ better arm − 0.005 and ≥ rrf on every run."""
    checks = []
    for r in runs:
        ndcg = r["modes"][mode]["slices"]["all"]["ndcg@10"]
        best = r["modes"][r["betterArm"]]["slices"]["all"]["ndcg@10"]
        rrf = r["modes"]["rrf"]["slices"]["all"]["ndcg@10"]
        checks.append({"run": r["run"], "ndcg@10": ndcg, "armOk": ndcg >= round(best - 0.005, 4), "rrfOk": ndcg >= rrf})
    return {
        "mode": mode,
        "armEverywhere": all(c["armOk"] for c in checks),
        "rrfEverywhere": all(c["rrfOk"] for c in checks),
        "failing": [c["run"] for c in checks if not (c["armOk"] and c["rrfOk"])],
        "meanNdcg": round(sum(c["ndcg@10"] for c in checks) / len(checks), 4),
    }


def _cell(row: Mapping[str, Any]) -> str:
    cell = f"{row['slices']['all']['ndcg@10']:.4f}"
    if "vsBetterArm" in row:
        v = row["vsBetterArm"]
        cell += f" ({v['meanDelta']:+.4f} p={v['p']:.2f}"
        if "vsRrf" in row:
            cell += f"; rrf {row['vsRrf']['meanDelta']:+.4f} p={row['vsRrf']['p']:.2f}"
        cell += ")"
    return cell


def markdown(runs: Sequence[Mapping[str, Any]], verdicts: Sequence[Mapping[str, Any]], meta: Mapping[str, Any],
             modes: Sequence[str]) -> str:
    lines = [
        "# Fusion: every mode, every dataset, both embedders (issue 21)",
        "",
        "Regenerate: `PYTHONPATH=src .venv/bin/python benchmarks/fusion_table.py --store-dir DIR --cache FILE`"
        " (module docstring). nDCG@10 and R@10 at depth 100, ir-measures; realrepo ranked by file. In"
        f" brackets: paired mean nDCG@10 difference against the run's better single arm and against equal RRF,"
        f" two-sided sign-flip p ({PERMUTATIONS:,} permutations, seed {SEED}). Runs marked * are the splits the"
        " constants (plait.arm_estimate, plait.fusion_adaptive) were chosen on (SciFact train, FaQuAD dev,"
        " CoSQA dev); every other run is held out. FaQuAD test is all 900 questions (it contains the 63 dev"
        " ones); realrepo has one split (test) and was never tuned on.",
        "",
        f"Measured {meta['date']} on {meta['machine']['cpu']} ({meta['machine']['cores']} cores, busy shared"
        f" machine); runs evaluated at commit(s) {', '.join(sorted({r.get('commit', '?') for r in runs}))}.",
        "",
        "## nDCG@10, all queries",
        "",
        "| mode | " + " | ".join(r["run"] + ("*" if r["chosenOn"] else "") for r in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for mode in modes:
        lines.append(f"| {mode} | " + " | ".join(_cell(r["modes"][mode]) for r in runs) + " |")
    lines += ["", "Better single arm per run: " + ", ".join(f"{r['run']} {r['betterArm']}" for r in runs) + ".", ""]
    lines += ["## Conditions (issue 21 item 1) over every run above", "",
              "| mode | ≥ better arm − 0.005 everywhere | ≥ rrf everywhere | runs failing either | mean nDCG@10 |",
              "|---|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| {v['mode']} | {'yes' if v['armEverywhere'] else 'no'} | {'yes' if v['rrfEverywhere'] else 'no'}"
                     f" | {', '.join(v['failing']) or '—'} | {v['meanNdcg']:.4f} |")
    lines += ["", "## Per run and kind (nDCG@10 / R@10)", ""]
    for r in runs:
        kinds = [k for k in ("all", *KINDS) if k in r["modes"]["bm25"]["slices"]]
        counts = ", ".join(f"{k} {r['modes']['bm25']['slices'][k]['queries']}" for k in kinds)
        est = r.get("armEstimate") or {}
        lines += [f"### {r['run']}{' (constants chosen here)' if r['chosenOn'] else ''}", "",
                  f"{r['queries']} queries ({counts}), {r['chunks']} chunks; arm estimate "
                  + (f"lexical {est['lexicalMrr']:.3f} / dense {est['denseMrr']:.3f} (ratio {est['ratio']:.3f}) → base {est['base']:g}"
                     if est else "none (collection under 200 chunks: base 0.4)")
                  + f"; calibrated weight {r['calibration']['denseWeight']:g}.", "",
                  "| mode | " + " | ".join(kinds) + " | w̄ |", "|---|" + "---|" * (len(kinds) + 1)]
        for mode in modes:
            row = r["modes"][mode]
            cells = [f"{row['slices'][k]['ndcg@10']:.4f} / {row['slices'][k]['recall@10']:.4f}" for k in kinds]
            w = row.get("denseWeightUsed")
            lines.append(f"| {mode} | " + " | ".join(cells) + f" | {'' if w is None else f'{w:.2f}'} |")
        lines.append("")
    return "\n".join(lines)


def _canonical(spec: str) -> str:
    """``scifact:e5`` → ``scifact/test:e5`` (the name a run is reported under)."""
    name, _, embedder = spec.partition(":")
    if name.startswith("realrepo/"):
        return f"{name}:{embedder or 'e5'}"
    dataset, _, split = name.partition("/")
    return f"{dataset}/{split or DEFAULT_SPLIT[dataset]}:{embedder or 'e5'}"


def _with_current_settings(data: RunData, store_path: Path) -> RunData:
    """A pickled run with what its kept store holds *now*: the collection's saved fusion
    settings and arm estimate (an index run or a changed estimate rewrites them; the
    arms, rankings of the same chunks, stay valid) and the store's path, which arms
    pickled before ``store_path`` existed lack."""
    if not store_path.is_file():
        raise SystemExit(f"{data.run}: the kept store {store_path} is gone; clear --arms-cache or restore it")
    store = _kept_store(str(store_path))
    collection = "default" if data.dataset.startswith("realrepo/") else store.list_collections()[0].name
    return replace(
        data,
        saved=saved_fusion(store, collection),
        estimate=store.get_settings(collection).get("armEstimate"),
        store_path=str(store_path),
    )


def _collected(spec: str, cache: Path | None, store_dir: Path, arms_cache: Path | None) -> RunData:
    if arms_cache is None:
        return collect(spec, cache=cache, store_dir=store_dir)
    path = arms_cache / (spec.replace("/", "_").replace(":", "__") + ".pkl")
    if path.is_file():
        data: RunData = pickle.loads(path.read_bytes())  # only files this script wrote (see --arms-cache)
        return _with_current_settings(data, _store_path(spec, store_dir))
    data = collect(spec, cache=cache, store_dir=store_dir)
    arms_cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data))
    return data


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS))
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache file")
    parser.add_argument("--store-dir", type=Path, required=True, help="one kept store per dataset and embedder")
    parser.add_argument("--out", default="fusion_table", help="results file stem in benchmarks/results")
    parser.add_argument("--arms-cache", type=Path, default=None,
                        help="keep each run's collected arms here (a pickle this script wrote) and reuse them"
                             " with the kept store's current fusion settings and arm estimate; clear it after"
                             " any change to retrieval, chunking or the embedders")
    parser.add_argument("--merge", action="store_true",
                        help="keep the runs of the existing results file that --runs does not name")
    args = parser.parse_args()
    args.store_dir.mkdir(parents=True, exist_ok=True)
    modes = [*MODES, *CANDIDATES]
    runs = []
    for spec in args.runs:
        started = time.perf_counter()
        print(f"running {spec} …", flush=True)
        result = evaluate_run(_collected(spec, args.cache, args.store_dir, args.arms_cache), modes)
        result["seconds"] = round(time.perf_counter() - started, 1)
        result["commit"], result["date"] = _commit(), dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        runs.append(result)
    previous = RESULTS / f"{args.out}.json"
    if args.merge and previous.is_file():
        named = {r["run"] for r in runs}
        kept = [r for r in json.loads(previous.read_text(encoding="utf-8"))["runs"] if r["run"] not in named]
        order = {_canonical(spec): n for n, spec in enumerate(DEFAULT_RUNS)}
        runs = sorted([*kept, *runs], key=lambda r: order.get(r["run"], len(order)))
    verdicts = [verdict(runs, m) for m in modes if m not in ("bm25", "vector")]
    meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": machine_info(),
            "commit": _commit(), "permutations": PERMUTATIONS, "seed": SEED}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(
        json.dumps({**meta, "runs": runs, "verdicts": verdicts}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (RESULTS / f"{args.out}.md").write_text(markdown(runs, verdicts, meta, modes) + "\n", encoding="utf-8")
    print((RESULTS / f"{args.out}.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
