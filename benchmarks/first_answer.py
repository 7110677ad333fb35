"""Seconds to the first lexical answer and to the last vector, indexing real repositories.

Run from the repository root (a few minutes with the default embedder on 2 cores)::

    PYTHONPATH=src .venv/bin/python benchmarks/first_answer.py [--embedder e5] [--label NAME]

For each dataset under ``--data`` (default ``../shared/data/realrepo``) every document of
``corpus.jsonl`` is written to its path (its ``_id``) in a temporary folder, and
``plait index FOLDER`` runs as a subprocess into a fresh store (default settings and
embedder, no embedding cache), as a new user would. Meanwhile this process polls the
store: every 50 ms it asks ``plait search`` (lexical arm: embedder ``none``) the
dataset's first query, and reads the collection's vector counts. Reported per dataset:

* ``firstAnswerS``: from the start of the command to the first search with a hit;
* ``lastVectorS``: to the first poll seeing every chunk with a vector;
* ``commandS``: to the command's exit (process start and model load included);
* chunks, and the embedding rate over the backfill (chunks / (lastVector − firstAnswer)).

Figures go to ``benchmarks/results/first-answer-<embedder>[-<label>].json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.append(str(ROOT / "src"))

from plait.errors import PlaitError
from plait.service import Plait

RESULTS = ROOT / "benchmarks" / "results"
POLL = 0.05


def _write_corpus(dataset: Path, target: Path) -> int:
    count = 0
    for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        path = target / doc["_id"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc["text"], encoding="utf-8")
        count += 1
    return count


def _first_query(dataset: Path) -> str:
    for line in (dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            return str(json.loads(line)["text"])
    raise SystemExit(f"{dataset}: no queries")


def _poll(store: Path, query: str) -> tuple[bool, int, int]:
    """(a search found a hit, chunks with a vector, chunks); nothing yet → (False, 0, 0)."""
    try:
        with Plait(str(store), embedder="none", create_store=False) as engine:
            info = engine.store.get_collection("default")
            if info is None:
                return False, 0, 0
            hit = bool(engine.search(query, k=1).hits)
            return hit, info.chunks - info.chunks_without_vector, info.chunks
    except PlaitError:
        return False, 0, 0


def run_dataset(dataset: Path, embedder: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="plait-first-") as tmp:
        folder, store = Path(tmp) / dataset.name, Path(tmp) / "plait.db"
        docs = _write_corpus(dataset, folder)
        query = _first_query(dataset)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        command = [sys.executable, "-m", "plait.cli", "index", str(folder), "--store", str(store), "--embedder", embedder, "--json"]
        started = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first: float | None = None
        last: float | None = None
        chunks = 0
        while True:
            done = proc.poll() is not None
            hit, with_vector, chunks = _poll(store, query)
            now = time.perf_counter() - started
            if hit and first is None:
                first = now
            if chunks and with_vector == chunks and last is None:
                last = now
            if done:
                break
            time.sleep(POLL)
        command_s = time.perf_counter() - started
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{dataset.name}: plait index failed ({proc.returncode}): {err.strip()[-500:]}")
        report = json.loads(out)
        rate = None
        if first is not None and last is not None and last > first:
            rate = round(chunks / (last - first), 2)
        return {
            "dataset": dataset.name,
            "documents": docs,
            "chunks": chunks,
            "query": query,
            "firstAnswerS": None if first is None else round(first, 2),
            "lastVectorS": None if last is None else round(last, 2),
            "commandS": round(command_s, 2),
            "chunksPerSecondBackfill": rate,
            "complete": report["complete"],
            "embedded": report["embedding"]["embedded"],
        }


def _markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        f"# First lexical answer and last vector — embedder {meta['embedder']}",
        "",
        f"{meta['machine']} · {meta['cpus']} CPUs · python {meta['python']} · {meta['when']}"
        + (f" · {meta['label']}" if meta.get("label") else ""),
        "",
        "`plait index` of the corpus written to disk (subprocess, fresh store, no embedding cache);",
        "polled every 50 ms from another process. Times from the command's start.",
        "",
        "| dataset | docs | chunks | first answer (s) | last vector (s) | command (s) | backfill chunks/s | complete |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['dataset']} | {r['documents']} | {r['chunks']} | {r['firstAnswerS']} | {r['lastVectorS']} "
            f"| {r['commandS']} | {r['chunksPerSecondBackfill']} | {r['complete']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "realrepo")
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    datasets = sorted(p for p in args.data.iterdir() if (p / "corpus.jsonl").exists())
    results = []
    for dataset in datasets:
        result = run_dataset(dataset, args.embedder)
        print(json.dumps(result), flush=True)
        results.append(result)
    meta = {
        "embedder": args.embedder,
        "label": args.label,
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"first-answer-{args.embedder}" + (f"-{args.label}" if args.label else "")
    (RESULTS / f"{stem}.json").write_text(json.dumps({**meta, "results": results}, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{stem}.md").write_text(_markdown(results, meta), encoding="utf-8")


if __name__ == "__main__":
    main()
