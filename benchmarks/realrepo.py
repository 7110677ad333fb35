"""File-level retrieval on real repositories' Markdown, indexed as a user would.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/realrepo.py --embedder none     # bm25 only
    PYTHONPATH=src .venv/bin/python benchmarks/realrepo.py --embedder e5       # all three

For each dataset under ``--data`` (default ``../shared/data/realrepo``: one folder per
repository with ``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``) this writes every
document of ``corpus.jsonl`` to its path (its ``_id``) in a temporary folder, indexes that
folder with the default settings (``Plait.index``: default chunking, scopes, embedder
``--embedder``), and asks every answerable query. A ranking of files is each ranking of
chunks with every file kept at its best chunk. Reported per query kind (``identifier``,
``natural``; from each query's ``metadata.kind``; unanswerable queries have no qrels and
are left out): hit@1, hit@5 and MRR@10, for

* ``bm25``: the lexical arm alone,
* ``vector``: the dense arm alone (only with an embedder),
* ``default``: what ``plait search`` returns with the collection's default settings,

and variants of :mod:`realrepo_variants` (issue 21 item 2: fusion methods and weights,
document-level aggregation, pseudo-relevance feedback on either arm, a hubness correction
of the dense arm): by default the ones the README cites (:data:`CITED_VARIANTS`),
``--variants REGEX …`` for others, ``--all-variants`` for every one (about 8 minutes
more). Each comes with a paired sign-flip test of its per-query
reciprocal rank against ``default`` (the per-query reciprocal ranks are in the JSON, ``rr``,
for tests against another mode). ``--beir-stores DIR`` also runs the variants that a
non-file corpus sees on CoSQA dev, SciFact test and FaQuAD test (e5; kept stores
``DIR/<dataset>-e5.db`` as ``benchmarks/fusion_modes.py --store-dir`` writes them) and
reports nDCG@10 against the default there.

Passage vectors go through the embedding cache (``~/.cache/plait``, or ``--cache``), so a
second run with the same embedder does not embed again. Figures are written to
``benchmarks/results/realrepo-<embedder>[-<label>].json`` and ``.md``; ``--label`` names a
run of another checkout (e.g. ``before``: set ``PYTHONPATH`` to that checkout's ``src``).
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.append(str(ROOT / "src"))  # after PYTHONPATH, so another checkout can be measured

sys.path.insert(0, str(Path(__file__).resolve().parent))  # realrepo_variants, beside this file

from plait.collection_settings import read_settings
from plait.embeddings import make_embedder
from plait.embeddings.cache import CachedEmbedder
from plait.evaluation.metrics import mean_scores, per_query, run_from_rankings
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import collect_arms
from plait.retrieval.plan import saved_fusion
from plait.service import Plait
from realrepo_round3 import VARIANTS3
from realrepo_round4 import VARIANTS4
from realrepo_variants import BEIR_VARIANTS, VARIANTS, Context, rankings, sign_flip

RESULTS = ROOT / "benchmarks" / "results"
#: every round's variant registries, by name
EVERY_VARIANT = {**VARIANTS, **VARIANTS3, **VARIANTS4}
#: variants that must rank exactly like another one (a check of their code)
SAME_AS = {"bm25f-1-1": "default (fusion only)", "fused-max": "default (fusion only)", "filefuse-max": "file-fuse",
           "outline+fused-max": "outline"}
DEPTH = 10  # files per ranking (MRR@10)
CHUNK_DEPTH = 100  # chunks asked of each arm / of search, before files are deduplicated
KINDS = ("identifier", "natural")


def _load(folder: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, set[str]]]:
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    queries = {
        q["_id"]: q
        for q in (json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line.strip())
    }
    qrels: dict[str, set[str]] = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    return corpus, queries, qrels


def _files(chunk_ids: Sequence[str], doc_of: Mapping[str, str], depth: int | None = DEPTH) -> list[str]:
    files: dict[str, None] = {}
    for cid in chunk_ids:
        doc = doc_of.get(cid)
        if doc is not None and doc not in files:
            files[doc] = None
            if depth is not None and len(files) >= depth:
                break
    return list(files)


def _deep_rank(chunk_ids: Sequence[str], doc_of: Mapping[str, str], relevant: set[str]) -> int | None:
    """The file rank of the best relevant file among all the files of ``chunk_ids`` (not cut at 10)."""
    files = _files(chunk_ids, doc_of, None)
    return next((i for i, doc in enumerate(files, start=1) if doc in relevant), None)


def _rank(ranking: Sequence[str], relevant: set[str]) -> int | None:
    return next((i for i, doc in enumerate(ranking[:DEPTH], start=1) if doc in relevant), None)


def _metrics(rankings: Mapping[str, list[str]], qrels: Mapping[str, set[str]]) -> dict[str, float]:
    hit1 = hit5 = mrr = 0.0
    for qid, ranking in rankings.items():
        rank = _rank(ranking, qrels[qid])
        hit1 += rank == 1
        hit5 += rank is not None and rank <= 5
        mrr += 1.0 / rank if rank else 0.0
    n = len(rankings) or 1
    return {"hit@1": round(hit1 / n, 4), "hit@5": round(hit5 / n, 4), "mrr@10": round(mrr / n, 4), "queries": len(rankings)}


def _versus(rankings: Mapping[str, list[str]], base: Mapping[str, list[str]], qrels: Mapping[str, set[str]]) -> dict[str, Any]:
    """Paired per-query reciprocal rank (MRR@10) of ``rankings`` minus ``base``."""
    deltas = []
    for qid in rankings:
        a, b = _rank(rankings[qid], qrels[qid]), _rank(base[qid], qrels[qid])
        deltas.append((1.0 / a if a else 0.0) - (1.0 / b if b else 0.0))
    return {
        "better": sum(d > 1e-9 for d in deltas), "worse": sum(d < -1e-9 for d in deltas),
        "p": round(sign_flip(deltas), 4),
    }


#: The variants the README's realrepo figures come from (``--variants`` by default).
CITED_VARIANTS = ("^default", "^rrf$", "^minmax-0.5$")


def chosen_variants(patterns: Sequence[str] | None) -> dict[str, Any]:
    """Every variant of both rounds' registries, or those whose name matches one of ``patterns``
    (regular expressions, matched at the start); ``default (simulated)`` always."""
    if not patterns:
        return EVERY_VARIANT
    return {n: v for n, v in EVERY_VARIANT.items() if n == "default (simulated)" or any(re.match(p, n) for p in patterns)}


def run_dataset(folder: Path, embedder_name: str, cache: Path | None, patterns: Sequence[str] | None = None) -> dict[str, Any]:
    corpus, queries, qrels = _load(folder)
    answerable = {qid: q for qid, q in queries.items() if qid in qrels}
    with tempfile.TemporaryDirectory(prefix="plait-realrepo-") as tmp:
        repo = Path(tmp) / "repo"
        for doc in corpus:
            path = repo / doc["_id"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(doc["text"], encoding="utf-8")
        inner = make_embedder(embedder_name)
        embedder = CachedEmbedder(inner, path=cache) if inner is not None else None
        # Plait(embedder=None) means "the default embedder"; "none" means no dense arm.
        # (not `embedder or "none"`: an empty CachedEmbedder has len() 0, so it is falsy)
        with Plait(str(Path(tmp) / "plait.db"), embedder=embedder if embedder is not None else "none") as engine:
            started = time.perf_counter()
            report = engine.index(repo)
            index_s = time.perf_counter() - started
            estimate = read_settings(engine.store, "default").arm_estimate
            texts = {qid: q["text"] for qid, q in answerable.items()}
            arms = collect_arms(engine.store, "default", texts, embedder=embedder, limit=CHUNK_DEPTH)
            doc_of = dict(arms.doc_of)
            modes: dict[str, dict[str, list[str]]] = {"bm25": {}, "default": {}}
            weights: dict[str, float | None] = {}
            deep: dict[str, dict[str, int | None]] = {}
            if arms.dense is not None:
                modes["vector"] = {}
            for qid in answerable:
                modes["bm25"][qid] = _files([cid for cid, _ in arms.lexical[qid]], doc_of)
                if arms.dense is not None:
                    modes["vector"][qid] = _files([cid for cid, _ in arms.dense[qid]], doc_of)
                result = engine.search(texts[qid], k=CHUNK_DEPTH)
                hits = result.hits
                weights[qid] = result.fusion.dense_weight_used
                doc_of.update({hit.chunk_id: hit.origin.source_path for hit in hits if hasattr(hit.origin, "source_path")})
                modes["default"][qid] = _files([hit.chunk_id for hit in hits], doc_of)
                deep[qid] = {
                    "bm25": _deep_rank([cid for cid, _ in arms.lexical[qid]], doc_of, qrels[qid]),
                    "vector": _deep_rank([cid for cid, _ in (arms.dense or {}).get(qid, [])], doc_of, qrels[qid]),
                    "default": _deep_rank([hit.chunk_id for hit in hits], doc_of, qrels[qid]),
                }
            ctx = Context(
                store=engine.store, collection="default", saved=saved_fusion(read_settings(engine.store, "default")),
                languages=arms.languages, texts=texts, lexical=arms.lexical, dense=arms.dense or {},
                doc_of=doc_of, depth=CHUNK_DEPTH, folder=repo,
            )
            tried: dict[str, dict[str, list[str]]] = {}
            costs: dict[str, float] = {}
            if arms.dense is not None and embedder is not None:
                ctx.load_vectors(embedder)
                tried = {name: rankings(ctx, variant, list(answerable), DEPTH) for name, variant in chosen_variants(patterns).items()}
                for name, same in SAME_AS.items():
                    if name in tried and same in tried and any(tried[name][q] != tried[same][q] for q in answerable):
                        raise SystemExit(f"{folder.name}: {name} differs from {same}")
            costs = dict(ctx.costs)
    by_kind: dict[str, dict[str, Any]] = {}
    variants: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        ids = [qid for qid, q in answerable.items() if (q.get("metadata") or {}).get("kind") == kind]
        by_kind[kind] = {mode: _metrics({qid: ranks[qid] for qid in ids}, qrels) for mode, ranks in modes.items()}
        base = {qid: modes["default"][qid] for qid in ids}
        variants[kind] = {
            name: {**_metrics({q: ranks[q] for q in ids}, qrels), "vsDefault": _versus({q: ranks[q] for q in ids}, base, qrels),
                   "rr": {q: round(1.0 / r, 4) if (r := _rank(ranks[q], qrels[q])) else 0.0 for q in ids}}
            for name, ranks in {"bm25": modes["bm25"], **({"vector": modes["vector"]} if "vector" in modes else {}), **tried}.items()
        }
    simulated = tried.get("default (simulated)")
    if simulated is not None and any(simulated[q] != modes["default"][q] for q in answerable):
        raise SystemExit(f"{folder.name}: the simulated default differs from plait search's")
    diagnosis = [
        {
            "query": qid, "text": answerable[qid]["text"], "gold": sorted(qrels[qid]), "denseWeight": weights[qid],
            **deep[qid],
            "defaultTop": modes["default"][qid][:1],
        }
        for qid in answerable
        if (answerable[qid].get("metadata") or {}).get("kind") == "natural" and _rank(modes["default"][qid], qrels[qid]) != 1
    ]
    misses = {
        mode: {qid: ranks[qid][:3] for qid in answerable if not (set(ranks[qid][:5]) & qrels[qid])}
        for mode, ranks in modes.items()
    }
    return {
        "dataset": folder.name,
        "documents": len(corpus),
        "chunks": report.chunks_added + report.chunks_updated + report.chunks_unchanged,
        "adrFolders": dict(getattr(report, "adr_folders", {}) or {}),
        "index_seconds": round(index_s, 1),
        "dense": arms.dense_reason or "on",
        "armEstimate": estimate,
        "by_kind": by_kind,
        "variants": variants,
        "diagnosis": diagnosis,
        "misses_at_5": misses,
        "variantCosts": costs,
    }


def _markdown(results: list[dict[str, Any]], meta: Mapping[str, Any]) -> str:
    lines = [
        f"# Real repositories: file-level retrieval ({meta['embedder']}{' · ' + meta['label'] if meta['label'] else ''})",
        "",
        f"Machine: {meta['machine']}; run {meta['date']}{' (busy machine: other jobs ran, so index times are only indicative)' if meta.get('busy') else ''}."
        " Written by benchmarks/realrepo.py.",
        "",
        "| dataset | kind | mode | hit@1 | hit@5 | MRR@10 | queries |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for kind, modes in result["by_kind"].items():
            for mode, m in modes.items():
                lines.append(
                    f"| {result['dataset']} | {kind} | {mode} | {m['hit@1']:.2f} | {m['hit@5']:.2f} | {m['mrr@10']:.3f} | {m['queries']} |"
                )
    lines.append("")
    for result in results:
        lines.append(
            f"- {result['dataset']}: {result['documents']} files, {result['chunks']} chunks, indexed in "
            f"{result['index_seconds']} s; dense arm: {result['dense']}; ADR folders: {result['adrFolders'] or 'none'}"
            + (f"; arm estimate: ratio {e['ratio']:.3f} → adaptive base {e['base']:g}" if (e := result.get("armEstimate")) else "")
            + (f"; variants' extra vectors built in (passage vectors through the embedding cache): {', '.join(f'{k} {v} s' for k, v in c.items())}"
               if (c := result.get("variantCosts")) else "")
        )
    lines += _diagnosis_markdown(results)
    lines += _variants_markdown(results)
    if meta.get("beir"):
        lines += _beir_markdown(meta["beir"])
    return "\n".join(lines) + "\n"


def _diagnosis_markdown(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Natural questions the default does not answer first: where the gold file is",
        "",
        "File rank of the best gold file in each arm alone and in the default fusion (each list's"
        f" first {CHUNK_DEPTH} chunks; — : not among them), the dense weight the query's fusion used,"
        " and the default's first file.",
        "",
        "| dataset | query | bm25 | vector | default | dense weight | default's first file |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for d in r.get("diagnosis", []):
            ranks = [str(d.get(m)) if d.get(m) else "—" for m in ("bm25", "vector", "default")]
            weight = f"{d['denseWeight']:.2f}" if d["denseWeight"] is not None else "—"
            lines.append(f"| {r['dataset']} | {d['query']}: {d['text']} | " + " | ".join(ranks)
                         + f" | {weight} | {', '.join(d['defaultTop'])} |")
    return lines


def _variants_markdown(results: list[dict[str, Any]]) -> list[str]:
    tried = [r for r in results if r.get("variants")]
    if not tried:
        return []
    lines = [
        "",
        "## Every mode tried (issue 21 item 2; benchmarks/realrepo_variants.py)",
        "",
        "Natural questions: hit@1 / hit@5 / MRR@10, then the paired per-query reciprocal-rank test against"
        " `default` (queries better / worse, two-sided sign-flip p, 10,000 permutations). Identifier"
        " questions: hit@1. Constants chosen on manage-get-gov; teaching-vacancies is held out.",
        "",
        "| mode | " + " | ".join(f"{r['dataset']} natural | {r['dataset']} identifier hit@1" for r in tried) + " |",
        "|---|" + "---|---|" * len(tried),
    ]
    for name in tried[0]["variants"]["natural"]:
        cells = []
        for r in tried:
            m, i = r["variants"]["natural"][name], r["variants"]["identifier"][name]
            v = m["vsDefault"]
            cells.append(f"{m['hit@1']:.2f} / {m['hit@5']:.2f} / {m['mrr@10']:.3f} (+{v['better']} −{v['worse']}, p={v['p']:.3f})")
            cells.append(f"{i['hit@1']:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _beir_markdown(beir: list[dict[str, Any]]) -> list[str]:
    names = list(beir[0]["variants"]) if beir else []
    lines = [
        "",
        "## The same variants on the BEIR runs (nDCG@10, e5, depth 100; paired sign-flip p against the default)",
        "",
        "| variant | " + " | ".join(run["run"] for run in beir) + " |",
        "|---|" + "---|" * len(beir),
        "| default | " + " | ".join(f"{run['default']:.4f}" for run in beir) + " |",
    ]
    for v in names:
        cells = [f"{run['variants'][v]['ndcg@10']:.4f} ({run['variants'][v]['delta']:+.4f}, p={run['variants'][v]['p']:.3f})" for run in beir]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    costs = [f"{run['run']}: " + ", ".join(f"{k} {v} s" for k, v in run.get("costs", {}).items()) for run in beir if run.get("costs")]
    if costs:
        lines += ["", "Seconds to build each variant's extra vectors or term lists once (what they would add at index time;"
                  " passage vectors go through the embedding cache, so a run after one that embedded them shows lookups only): " + "; ".join(costs) + "."]
    return lines


BEIR_RUNS = (("cosqa-dev", "dev"), ("scifact", "test"), ("faquad-pt", "test"))


def run_beir(stores: Path, data: Path, cache: Path | None, names: Sequence[str] = BEIR_VARIANTS) -> list[dict[str, Any]]:
    """The variants ``names`` (by default :data:`BEIR_VARIANTS`) against the default on each of :data:`BEIR_RUNS` (e5)."""
    out = []
    for name, split in BEIR_RUNS:
        with prepared(data / name, split=split, embedder="e5", cache=cache, store=str(stores / f"{name}-e5.db")) as ready:
            info = ready.store.get_collection(ready.collection)
            if info is None or ready.embedder is None:
                raise SystemExit(f"{name}: no collection or no embedder")
            texts = {qid: ready.dataset.queries[qid] for qid in ready.dataset.query_ids}
            limit = max(100, -(-100 * info.chunks // max(1, info.sources)))
            arms = collect_arms(ready.store, ready.collection, texts, embedder=ready.embedder, limit=limit)
            saved = saved_fusion(read_settings(ready.store, ready.collection)).model_copy(update={"overfetch": 100})
            ctx = Context(
                store=ready.store, collection=ready.collection, saved=saved, languages=arms.languages,
                texts=texts, lexical=arms.lexical, dense=arms.dense or {}, doc_of=dict(arms.doc_of), depth=100,
                folder=data / name, split=split,
            )
            ctx.load_vectors(ready.embedder)
            scores = {
                v: per_query(ready.dataset.qrels, run_from_rankings(rankings(ctx, EVERY_VARIANT[v], list(texts), 100)))["ndcg@10"]
                for v in ("default (simulated)", *names)
            }
            costs = dict(ctx.costs)
        base = scores["default (simulated)"]
        row: dict[str, Any] = {
            "run": f"{name}/{split}:e5", "default": round(mean_scores({"n": base})["n"], 4), "variants": {}, "costs": costs,
        }
        for v in names:
            deltas = [scores[v][q] - base[q] for q in base]
            row["variants"][v] = {
                "ndcg@10": round(mean_scores({"n": scores[v]})["n"], 4),
                "delta": round(sum(deltas) / len(deltas), 4),
                "p": round(sign_flip(deltas), 4),
            }
        out.append(row)
        print(row, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "realrepo")
    parser.add_argument("--embedder", default="none")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache file (default ~/.cache/plait)")
    parser.add_argument("--label", default="", help="names the run in the output file (e.g. before)")
    parser.add_argument("--busy", action="store_true", help="say in the results that other jobs shared the machine")
    parser.add_argument("--beir-stores", type=Path, default=None,
                        help="folder of kept BEIR stores (<dataset>-e5.db): also run the variants there")
    parser.add_argument("--variants", nargs="*", default=list(CITED_VARIANTS),
                        help="run the variants whose names match these regular expressions (default: the ones "
                        "the README cites, %(default)s; --all-variants runs every one, about 8 minutes more)")
    parser.add_argument("--all-variants", action="store_true", help="run every variant of realrepo_variants")
    parser.add_argument("--beir-variants", nargs="*", default=None,
                        help="the variants run on the BEIR stores (default: realrepo_variants.BEIR_VARIANTS)")
    parser.add_argument("--skip-realrepo", action="store_true", help="only the BEIR runs (with --beir-stores)")
    args = parser.parse_args()
    folders = sorted(p for p in args.data.iterdir() if (p / "corpus.jsonl").is_file())
    patterns = None if args.all_variants else args.variants
    results = [] if args.skip_realrepo else [run_dataset(folder, args.embedder, args.cache, patterns) for folder in folders]
    meta = {
        "embedder": args.embedder,
        "label": args.label,
        "machine": f"{platform.machine()} · {platform.processor() or platform.platform()} · Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "busy": args.busy,
    }
    if args.beir_stores is not None:
        meta["beir"] = run_beir(args.beir_stores, args.data.parent, args.cache, args.beir_variants or BEIR_VARIANTS)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"realrepo-{args.embedder}" + (f"-{args.label}" if args.label else "")
    (RESULTS / f"{stem}.json").write_text(json.dumps({**meta, "results": results}, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{stem}.md").write_text(_markdown(results, meta), encoding="utf-8")
    print(_markdown(results, meta))


if __name__ == "__main__":
    main()
