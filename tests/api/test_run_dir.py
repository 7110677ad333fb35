"""``http_served.run_dir``: modules that build their engine at import (the schemathesis
fuzz tests) get a folder per process, so a second run in the same tree — or a
``--collect-only`` beside a running suite — neither shares nor deletes the first one's
databases (it used to delete every ``*.db*`` of ``test-artifacts/openapi-*`` at import)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from http_served import run_dir

HERE = Path(__file__).resolve().parent


def test_a_second_process_leaves_this_ones_databases_alone() -> None:
    mine = run_dir("run-dir-test")
    (mine / "plait.db").write_bytes(b"live")
    child = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); from http_served import run_dir; "
         "r = run_dir('run-dir-test'); (r / 'plait.db').write_bytes(b'x'); "
         "(r / 'summary.json').write_text('{}'); print(r)", str(HERE)],
        capture_output=True, text=True, check=True,
    )
    theirs = Path(child.stdout.strip())
    assert theirs != mine and theirs.parent == mine.parent
    assert (mine / "plait.db").read_bytes() == b"live"
    # the child's databases went when it exited; its outputs stayed
    assert not (theirs / "plait.db").exists() and (theirs / "summary.json").read_text() == "{}"
