"""Review 8 #3: the Milvus address check resolved host names with no deadline of its own; with
a dead resolver it waited whatever resolv.conf allows, silently. Now both names are resolved
on threads and waited for at most RESOLVE_SECONDS: the answer is "unknown", and an info line
says which name did not resolve in time. Run for real: a private mount namespace whose
/etc/resolv.conf names a DNS server that never answers: a UDP socket of this test on 127.0.0.1:53 that reads
nothing (an unroutable address is not enough: the C library may be refused at once and
fail fast, so nothing would hang). Skipped where ``unshare -m`` is not allowed or the port
cannot be bound."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s %(message)s")
from plait.store_identity import server_sameness
print("answer", server_sameness("http://milvus-a.example.com:19530", "http://milvus-b.example.com:19530"))
"""


def test_a_dead_resolver_gives_unknown_after_the_deadline(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -m is not allowed here")
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        silent.bind(("127.0.0.1", 53))
    except OSError as exc:
        silent.close()
        pytest.skip(f"cannot bind 127.0.0.1:53 for a DNS server that never answers: {exc}")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:5 attempts:2\n", encoding="utf-8")
    script = tmp_path / "check.py"
    script.write_text(SCRIPT, encoding="utf-8")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    shell = f"mount --bind {resolv} /etc/resolv.conf && exec {sys.executable} {script}"
    try:
        done = subprocess.run([unshare, "-m", "sh", "-c", shell], capture_output=True, text=True, env=env, timeout=120)
    finally:
        silent.close()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "answer unknown" in lines
    for name in ("milvus-a.example.com", "milvus-b.example.com"):
        assert f"plait.store_identity resolving '{name}' took more than 2.0 s: treated as not resolving" in lines, lines
    assert any(line.startswith("plait.store_identity Milvus milvus-a.example.com:19530 and") and ": unknown (" in line
               for line in lines), lines
