"""HTTP load on loopback: ``plait serve`` answering searches at fixed request rates.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/http_load.py                  # 60 s in all
    PYTHONPATH=src .venv/bin/python benchmarks/http_load.py --rates 20 80 --seconds 10

A store is indexed with a generated corpus (fake embedder, so the figures are the
engine's and the server's, not a model's), ``python -m plait.cli serve --no-auth`` is
started as a subprocess on a free loopback port with ``--max-in-flight``, and an open-loop
client (httpx, asyncio) sends ``POST /v1/collections/default/search`` at each fixed rate
for ``--seconds`` seconds: requests are scheduled on the clock whatever the answers
do, so an overloaded server shows up as latency, 503s or timeouts rather than a slower
client. Per rate: sent, throughput (200s per second), p50/p95/p99 latency of the 200s,
counts per status and errors. Writes ``benchmarks/results/http_load.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "src", ROOT / "tests" / "reliability"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import httpx
from crash_trials import write_corpus

from plait.service import Plait

QUERIES = ["ERR-1201", "release v3.2.1", "alpha7 beta2", "gamma release", "Document 42", "beta0 ERR-3300"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


async def _run_rate(url: str, rate: float, seconds: float, timeout: float) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:

        async def one(i: int) -> None:
            started = time.perf_counter()
            try:
                response = await client.post(url, json={"query": QUERIES[i % len(QUERIES)], "k": 8})
                statuses[str(response.status_code)] += 1
                if response.status_code == 200:
                    latencies.append((time.perf_counter() - started) * 1000)
            except httpx.TimeoutException:
                statuses["timeout"] += 1
            except httpx.TransportError as exc:
                statuses[type(exc).__name__] += 1

        total = int(rate * seconds)
        begin = time.perf_counter()
        tasks = []
        for i in range(total):
            delay = begin + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - begin
    return {
        "rate": rate,
        "seconds": seconds,
        "sent": total,
        "ok": statuses.get("200", 0),
        "throughput": round(statuses.get("200", 0) / wall, 1),
        "p50Ms": _percentile(latencies, 0.50),
        "p95Ms": _percentile(latencies, 0.95),
        "p99Ms": _percentile(latencies, 0.99),
        "statuses": dict(statuses),
        "errors": sum(n for s, n in statuses.items() if s != "200"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", type=float, nargs="+", default=[25, 50, 100, 200])
    parser.add_argument("--seconds", type=float, default=15.0, help="per rate (default 15: 60 s for 4 rates)")
    parser.add_argument("--docs", type=int, default=400, help="base documents in the corpus")
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/http_load.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus, db = Path(tmp) / "corpus", Path(tmp) / "p.db"
        write_corpus(corpus, version=1, n_docs=args.docs)
        with Plait(str(db), embedder="fake") as engine:
            chunks = engine.index(corpus).chunks_added
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
        env["PYTHONPATH"] = str(ROOT / "src")
        server = subprocess.Popen(
            [sys.executable, "-m", "plait.cli", "serve", "--no-auth", "--port", str(port), "--store", str(db),
             "--embedder", "fake", "--max-in-flight", str(args.max_in_flight)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("plait serve did not start")
                time.sleep(0.2)
            url = base + "/v1/collections/default/search"
            runs = []
            for rate in args.rates:
                run = asyncio.run(_run_rate(url, rate, args.seconds, args.timeout))
                print(json.dumps(run), flush=True)
                runs.append(run)
            recovered = httpx.post(url, json={"query": "ERR-1201"}, timeout=args.timeout).status_code
        finally:
            server.terminate()
            server.wait(timeout=30)
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "chunks": chunks,
        "maxInFlight": args.max_in_flight,
        "cpus": os.cpu_count(),
        "runs": runs,
        "statusAfterLoad": recovered,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
