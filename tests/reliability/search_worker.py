"""A search loop in its own process, for tests/reliability/test_concurrency.py.

``python search_worker.py DB QUERY STOPFILE [PARENT_PID]`` searches ``QUERY`` in collection
``default`` (fake embedder) until ``STOPFILE`` exists, then prints one JSON line:
``{"searches", "errors", "empty", "latenciesMs"}``. It also stops when the test that
started it is gone (its parent process — ``PARENT_PID``, by default the one found at start —
changed: a run interrupted or killed) or after
:data:`MAX_SECONDS`, so an aborted test run leaves no process searching forever.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from plait.service import Plait

#: No test keeps a worker longer; an orphan stops here at the latest.
MAX_SECONDS = 600.0


def orphaned(parent: int, started: float, *, now: float | None = None) -> bool:
    """True once the process that started the worker is gone or it ran too long."""
    elapsed = (time.monotonic() if now is None else now) - started
    return os.getppid() != parent or elapsed > MAX_SECONDS


def main(db: str, query: str, stop: str, parent_pid: str | None = None) -> None:
    latencies: list[float] = []
    errors: list[str] = []
    empty = 0
    parent, begun = int(parent_pid) if parent_pid else os.getppid(), time.monotonic()
    with Plait(db, embedder="fake") as engine:
        Path(f"{stop}.ready.{os.getpid()}").touch()
        while not Path(stop).exists() and not orphaned(parent, begun):
            started = time.perf_counter()
            try:
                result = engine.search(query, k=5)
                empty += not result.hits
            except Exception:
                errors.append(traceback.format_exc(limit=-4))
            latencies.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"searches": len(latencies), "errors": errors, "empty": empty, "latenciesMs": latencies}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
