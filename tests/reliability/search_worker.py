"""A search loop in its own process, for tests/reliability/test_concurrency.py.

``python search_worker.py DB QUERY STOPFILE`` searches ``QUERY`` in collection
``default`` (fake embedder) until ``STOPFILE`` exists, then prints one JSON line:
``{"searches", "errors", "empty", "latenciesMs"}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from plait.service import Plait


def main(db: str, query: str, stop: str) -> None:
    latencies: list[float] = []
    errors: list[str] = []
    empty = 0
    with Plait(db, embedder="fake") as engine:
        Path(f"{stop}.ready.{os.getpid()}").touch()
        while not Path(stop).exists():
            started = time.perf_counter()
            try:
                result = engine.search(query, k=5)
                empty += not result.hits
            except Exception:
                errors.append(traceback.format_exc(limit=-4))
            latencies.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"searches": len(latencies), "errors": errors, "empty": empty, "latenciesMs": latencies}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
