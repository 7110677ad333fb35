"""The hostile OpenAPI fuzz (``tests/api/test_openapi_hostile.py``) at a larger budget.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/openapi_hostile.py               # 20,000 cases
    PYTHONPATH=src .venv/bin/python benchmarks/openapi_hostile.py --cases 5000

The CI run sends at least 2,000 cases; this runs the same test with
``PLAIT_HOSTILE_CASES`` set, times it and writes the outcome (cases asked, pytest's
exit code, wall time, machine) to ``benchmarks/results/openapi_hostile.json``. Any
response ≥ 500 fails the run (the test asserts it per case).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "openapi_hostile.json"


def _commit() -> str | None:
    """The commit the fuzz ran against (the API under test changes with it)."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000, help="Cases in total (default 20000).")
    args = parser.parse_args()
    env = {**os.environ, "PLAIT_HOSTILE_CASES": str(args.cases), "PYTHONPATH": str(ROOT / "src")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/api/test_openapi_hostile.py"],
        cwd=ROOT,
        env=env,
        check=False,
    )
    figures = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "casesAsked": args.cases,
        "pytestExitCode": done.returncode,
        "passed": done.returncode == 0,
        "wallSeconds": round(time.monotonic() - started, 1),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
