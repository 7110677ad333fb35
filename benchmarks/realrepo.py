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
* ``default``: what ``plait search`` returns with the collection's default settings.

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
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.append(str(ROOT / "src"))  # after PYTHONPATH, so another checkout can be measured

from plait.collection_settings import read_settings
from plait.embeddings import make_embedder
from plait.embeddings.cache import CachedEmbedder
from plait.evaluation.runner import collect_arms
from plait.service import Plait

RESULTS = ROOT / "benchmarks" / "results"
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


def _files(chunk_ids: Sequence[str], doc_of: Mapping[str, str]) -> list[str]:
    files: dict[str, None] = {}
    for cid in chunk_ids:
        doc = doc_of.get(cid)
        if doc is not None and doc not in files:
            files[doc] = None
            if len(files) >= DEPTH:
                break
    return list(files)


def _metrics(rankings: Mapping[str, list[str]], qrels: Mapping[str, set[str]]) -> dict[str, float]:
    hit1 = hit5 = mrr = 0.0
    for qid, ranking in rankings.items():
        relevant = qrels[qid]
        rank = next((i for i, doc in enumerate(ranking[:DEPTH], start=1) if doc in relevant), None)
        hit1 += rank == 1
        hit5 += rank is not None and rank <= 5
        mrr += 1.0 / rank if rank else 0.0
    n = len(rankings) or 1
    return {"hit@1": round(hit1 / n, 4), "hit@5": round(hit5 / n, 4), "mrr@10": round(mrr / n, 4), "queries": len(rankings)}


def run_dataset(folder: Path, embedder_name: str, cache: Path | None) -> dict[str, Any]:
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
            if arms.dense is not None:
                modes["vector"] = {}
            for qid in answerable:
                modes["bm25"][qid] = _files([cid for cid, _ in arms.lexical[qid]], doc_of)
                if arms.dense is not None:
                    modes["vector"][qid] = _files([cid for cid, _ in arms.dense[qid]], doc_of)
                hits = engine.search(texts[qid], k=CHUNK_DEPTH).hits
                doc_of.update({hit.chunk_id: hit.origin.source_path for hit in hits if hasattr(hit.origin, "source_path")})
                modes["default"][qid] = _files([hit.chunk_id for hit in hits], doc_of)
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        ids = [qid for qid, q in answerable.items() if (q.get("metadata") or {}).get("kind") == kind]
        by_kind[kind] = {mode: _metrics({qid: ranks[qid] for qid in ids}, qrels) for mode, ranks in modes.items()}
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
        "misses_at_5": misses,
    }


def _markdown(results: list[dict[str, Any]], meta: Mapping[str, Any]) -> str:
    lines = [
        f"# Real repositories: file-level retrieval ({meta['embedder']}{' · ' + meta['label'] if meta['label'] else ''})",
        "",
        f"Machine: {meta['machine']}; run {meta['date']}. Written by benchmarks/realrepo.py.",
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
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "realrepo")
    parser.add_argument("--embedder", default="none")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache file (default ~/.cache/plait)")
    parser.add_argument("--label", default="", help="names the run in the output file (e.g. before)")
    args = parser.parse_args()
    folders = sorted(p for p in args.data.iterdir() if (p / "corpus.jsonl").is_file())
    results = [run_dataset(folder, args.embedder, args.cache) for folder in folders]
    meta = {
        "embedder": args.embedder,
        "label": args.label,
        "machine": f"{platform.machine()} · {platform.processor() or platform.platform()} · Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"realrepo-{args.embedder}" + (f"-{args.label}" if args.label else "")
    (RESULTS / f"{stem}.json").write_text(json.dumps({**meta, "results": results}, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{stem}.md").write_text(_markdown(results, meta), encoding="utf-8")
    print(_markdown(results, meta))


if __name__ == "__main__":
    main()
