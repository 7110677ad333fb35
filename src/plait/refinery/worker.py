"""A detached refinery worker: ``python -m plait.refinery.worker RUN_ID --store S``.

``plait refinery run --detach`` creates a queued run and starts this in its own
session; it claims the run, executes it and exits. If it dies, the next reader of the
run marks it failed (its pid is gone).
"""

from __future__ import annotations

import argparse
import sys

from plait.config import Settings
from plait.errors import PlaitError

__all__ = ["main", "worker_command", "worker_env"]


def worker_command(
    run_id: str, *, store: str, embedder: str | None = None, llm: str | None = None
) -> list[str]:
    """The argv that runs a detached worker for ``run_id``."""
    argv = [sys.executable, "-m", "plait.refinery.worker", run_id, "--store", store]
    if embedder:
        argv += ["--embedder", embedder]
    if llm:
        argv += ["--llm", llm]
    return argv


def worker_env() -> dict[str, str]:
    """The environment for a worker: this one, with this ``plait`` first on the path."""
    import os
    from pathlib import Path

    import plait

    package_root = str(Path(plait.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    """Execute one queued run; exit 0 when it ran (whatever its outcome), 1 otherwise."""
    parser = argparse.ArgumentParser(prog="plait-refinery-worker")
    parser.add_argument("run_id")
    parser.add_argument("--store", default=None)
    parser.add_argument("--embedder", default=None)
    parser.add_argument("--llm", default=None)
    args = parser.parse_args(argv)
    from plait.service import Plait

    settings = Settings.resolve(store=args.store, embedder=args.embedder)
    try:
        with Plait(settings.store, embedder=settings.embedder, llm=args.llm) as engine:
            engine.refinery.execute(args.run_id)
    except PlaitError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
