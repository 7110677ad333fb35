"""Reliability under faults: kill -9 trials of index/reindex, and the long fuzz run.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/reliability.py                 # crash trials + fuzz
    PYTHONPATH=src .venv/bin/python benchmarks/reliability.py --trials 30 --pg-trials 0 --fuzz-examples 0
    PYTHONPATH=src .venv/bin/python benchmarks/reliability.py --modes reindex-full --trials 40 --pg-trials 20 --fuzz-examples 0

Crash trials (see ``tests/reliability/crash_trials.py``): a SQLite store holding corpus
version 1 is re-indexed to version 2 by ``python -m plait.cli index|reindex|reindex --full``
in a subprocess that is SIGKILLed after a seeded random delay in [0, the uninterrupted
run's wall time]. Each trial checks that every source holds exactly its old or its new
(chunk id, content hash) set, no duplicate, consistent postings, and that a re-run
completes with exactly the new state.

The same trials run on PostgreSQL too, on a private ``pgserver`` (``--pg-trials``; the
schema is rebuilt from version 1 before every trial). ``--modes`` picks the modes.

The fuzz run executes ``tests/reliability/test_fuzz.py`` with ``PLAIT_FUZZ_EXAMPLES``
examples per property (hypothesis), and records pass/fail and wall time.

Merges into ``benchmarks/results/reliability.json``: the sections and modes run replace
their previous figures (each mode records its own ``date``), the others are kept.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "src", ROOT / "tests" / "reliability"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from crash_trials import CrashBench

MODES = ("index", "reindex", "reindex-full")


def crash_trials(
    *, trials: int, n_docs: int, seed: int, pg: tuple[str, str] | None = None, modes: tuple[str, ...] = MODES
) -> dict[str, Any]:
    """``trials`` kills per mode; per mode the counts and any violation seen."""
    rng = random.Random(seed)
    out: dict[str, Any] = {"store": "postgres" if pg else "sqlite", "docs": n_docs, "seed": seed, "modes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        bench = CrashBench(Path(tmp), n_docs=n_docs, pg=pg)
        for mode in modes:
            results = [bench.trial(mode, rng) for _ in range(trials)]
            violations = [v for r in results for v in r.violations]
            out["modes"][mode] = {
                "trials": len(results),
                "killed": sum(r.killed for r in results),
                "killedMidWrite": sum(r.mid_run for r in results),
                "trialsWithViolations": sum(bool(r.violations) for r in results),
                "rerunsCompleted": sum(r.rerun_ok for r in results),
                "uninterruptedSeconds": round(bench.durations[mode], 3),
                "violations": violations[:20],
                "date": _now(),
            }
            print(mode, json.dumps(out["modes"][mode]), flush=True)
    return out


def pg_crash_trials(*, trials: int, n_docs: int, seed: int, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """The crash trials on a private PostgreSQL (pgserver) in a throwaway schema."""
    from plait.testing.pg import private_postgres

    with private_postgres("plait-pg-bench-") as dsn:
        return crash_trials(trials=trials, n_docs=n_docs, seed=seed, pg=(dsn, "plait_crash_bench"), modes=modes)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def merge_results(previous: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """``previous`` with the sections of ``fresh`` laid over it; crash sections merge per
    mode, so a run of one mode keeps the figures of the others (unless the corpus size
    or seed changed, when the old modes no longer compare and are dropped)."""
    then = previous.get("date")  # when figures recorded without a date of their own were run
    merged = {**previous, **fresh, "date": _now()}
    if isinstance(merged.get("fuzz"), dict) and "fuzz" not in fresh and then:
        merged["fuzz"] = {"date": then, **merged["fuzz"]}
    for key in ("crash", "crashPostgres"):
        old, new = previous.get(key), fresh.get(key)
        if not old:
            continue
        kept = {m: {**v, "date": v.get("date", then)} for m, v in old.get("modes", {}).items()}
        if not new:
            merged[key] = {**old, "modes": kept}
            continue
        same = all(old.get(f) == new.get(f) for f in ("store", "docs", "seed"))
        merged[key] = {**new, "modes": {**(kept if same else {}), **new["modes"]}}
    return merged


def fuzz_run(examples: int) -> dict[str, Any]:
    """The fuzz properties with ``examples`` examples each."""
    env = {**os.environ, "PLAIT_FUZZ_EXAMPLES": str(examples), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests/reliability/test_fuzz.py")],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout else []
    return {
        "examplesPerProperty": examples,
        "passed": proc.returncode == 0,
        "summary": tail[0] if tail else "",
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=40, help="kills per mode on SQLite (default 40); 0 skips")
    parser.add_argument("--docs", type=int, default=120, help="base documents in the corpus (default 120)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--pg-trials", type=int, default=15, help="kills per mode on PostgreSQL; 0 skips")
    parser.add_argument("--pg-docs", type=int, default=40)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="crash modes to run (default all)")
    parser.add_argument("--fuzz-examples", type=int, default=10_000, help="0 skips the fuzz run")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/reliability.json")
    args = parser.parse_args()
    modes = tuple(args.modes)
    result: dict[str, Any] = {}
    if args.trials:
        result["crash"] = crash_trials(trials=args.trials, n_docs=args.docs, seed=args.seed, modes=modes)
    if args.pg_trials:
        result["crashPostgres"] = pg_crash_trials(
            trials=args.pg_trials, n_docs=args.pg_docs, seed=args.seed, modes=modes
        )
    if args.fuzz_examples:
        result["fuzz"] = fuzz_run(args.fuzz_examples)
        print("fuzz", json.dumps(result["fuzz"]), flush=True)
    previous = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(merge_results(previous, result), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
