"""A separate process for the backfill tests: index or backfill with a slow, logging fake.

    python backfill_driver.py STORE index|backfill|cli LOG [--docs DIR] [--block-at N]
                              [--gate-file PATH] [--delay S]

``--block-at N`` makes the N-th passage batch block for good (the test kills the process
there); ``--gate-file`` makes the first batch wait until that file exists. ``cli`` runs
``plait index DIR --store STORE --embedder fake`` with the slow fake behind the name
``fake``. The backfill batch comes from ``PLAIT_BACKFILL_BATCH``. Prints the report's JSON.

The driver stands for a command typed at a terminal, so Ctrl-C (SIGINT) raises
``KeyboardInterrupt`` here whatever the test process inherited: a test suite started as a
background job of a script (``bash scripts/test.sh &``) has SIGINT ignored, every child
inherits that, and Python then installs no handler of its own.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from plait.embeddings.fake import SlowFakeEmbedder
from plait.service import Plait
from plait.types import to_json


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("mode", choices=("index", "backfill", "cli"))
    parser.add_argument("log")
    parser.add_argument("--docs")
    parser.add_argument("--block-at", type=int, default=0)
    parser.add_argument("--gate-file")
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a foreground command's Ctrl-C

    def gate(batch: int) -> None:
        if args.block_at and batch >= args.block_at:
            while True:
                time.sleep(0.05)
        if args.gate_file and batch == 1:
            while not Path(args.gate_file).exists():
                time.sleep(0.02)

    embedder = SlowFakeEmbedder(gate=gate, log=args.log, delay=args.delay)
    if args.mode == "cli":
        import plait.service_base
        from plait.cli import main as cli_main

        real = plait.service_base.make_embedder
        plait.service_base.make_embedder = lambda name, **kw: embedder if name == "fake" else real(name, **kw)  # type: ignore[assignment]
        sys.argv = ["plait", "index", str(args.docs), "--store", args.store, "--embedder", "fake"]
        cli_main()
        return
    with Plait(args.store, embedder=embedder) as engine:
        if args.mode == "index":
            report = engine.index(Path(args.docs))
        else:
            report = engine.backfill()
    sys.stdout.write(json.dumps(to_json(report)) + "\n")


if __name__ == "__main__":
    main()
