"""Searches in other processes keep answering while a reindex writes (SQLite WAL).

Latency is recorded (printed with ``-s``), not asserted beyond a generous sanity bound:
speed is the benchmarks' business.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from crash_trials import SRC, write_corpus

from plait.service import Plait

WORKER = Path(__file__).with_name("search_worker.py")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env["PYTHONPATH"] = str(SRC)
    return env


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


def test_searches_answer_during_reindex(tmp_path: Path) -> None:
    corpus, db, stop = tmp_path / "corpus", tmp_path / "s.db", tmp_path / "stop"
    write_corpus(corpus, version=1, n_docs=80)
    with Plait(str(db), embedder="fake") as engine:
        engine.index(corpus)
    write_corpus(corpus, version=2, n_docs=80)  # the reindex has real work: 80 changed sources
    searchers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(db), query, str(stop)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # "gamma" is in every document; doc0003.md is one of the unchanged ones.
        for query in ("gamma release", "ERR-302")
    ]
    try:
        for proc in searchers:
            _wait_for(Path(f"{stop}.ready.{proc.pid}"), 60)
        reindex = subprocess.run(
            [sys.executable, "-m", "plait.cli", "reindex", "--store", str(db), "--embedder", "fake", "--json"],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stop.touch()
        outputs = [p.communicate(timeout=60) for p in searchers]
    assert reindex.returncode == 0, reindex.stderr
    report = json.loads(reindex.stdout)
    assert (report["sourcesDeleted"], report["complete"]) == (20, True)
    for (out, errs), proc in zip(outputs, searchers, strict=True):
        assert proc.returncode == 0, errs
        stats = json.loads(out)
        assert stats["errors"] == []
        assert stats["empty"] == 0
        assert stats["searches"] > 0
        latencies = sorted(stats["latenciesMs"])
        assert latencies[-1] < 30_000  # sanity only: no search hung behind the writer
        print(
            f"searches={stats['searches']} p50={latencies[len(latencies) // 2]:.1f}ms "
            f"max={latencies[-1]:.1f}ms"
        )


def test_overload_gets_a_quick_503_and_the_server_recovers(tmp_path: Path) -> None:
    """Two slow asks fill ``max_in_flight=2``; the next requests are refused at once."""
    pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
    import httpx

    from plait.api.http import create_app
    from plait.embeddings.fake import FakeEmbedder
    from plait.errors import ConfigError
    from plait.llm.ollama import OllamaLLM
    from plait.testing.asgi_server import UvicornThread
    from plait.testing.corpus import ARTICLE_DOCS, documents
    from plait.testing.wire import WireServer

    with pytest.raises(ConfigError, match="max_in_flight must be an integer of at least 1, got 0"):
        create_app(Plait(str(tmp_path / "x.db"), embedder="fake"), auth=False, max_in_flight=0)

    with WireServer(delay=1.5) as llm_server:
        llm = OllamaLLM(base_url=llm_server.url, model="m", timeout=10, retries=0)
        with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16), llm=llm) as engine:
            engine.index_documents(documents(ARTICLE_DOCS))
            with UvicornThread(create_app(engine, auth=False, max_in_flight=2)) as server:
                url = f"{server.url}/v1/collections/default"
                with ThreadPoolExecutor(2) as pool:
                    slow = [pool.submit(httpx.post, f"{url}/ask", json={"question": "ERR-4012?"}, timeout=30) for _ in range(2)]
                    deadline = time.monotonic() + 20
                    while len(llm_server.requests) < 2 and time.monotonic() < deadline:
                        time.sleep(0.02)  # both asks are now waiting on the slow LLM
                    started = time.monotonic()
                    refused = [httpx.post(f"{url}/search", json={"query": "ERR-4012"}, timeout=30) for _ in range(3)]
                    refused_in = time.monotonic() - started
                    health = httpx.get(f"{server.url}/healthz", timeout=30)
                    answers = [f.result() for f in slow]
                assert [r.status_code for r in refused] == [503, 503, 503]
                assert refused[0].headers["retry-after"] == "1"
                assert refused[0].json() == {"error": "server busy: 2 requests in flight (limit 2); retry shortly"}
                assert refused_in < 1.5  # refused before the slow requests finished, not queued behind them
                assert health.status_code == 200
                assert [a.status_code for a in answers] == [200, 200]
                recovered = httpx.post(f"{url}/search", json={"query": "ERR-4012"}, timeout=30)
                assert recovered.status_code == 200 and recovered.json()["hits"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "zombie"
    return next((line for line in status.splitlines() if line.startswith("State:")), "").lower()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to follow an orphaned process")
def test_worker_stops_when_its_test_is_gone(tmp_path: Path) -> None:
    # An interrupted test run once left two workers searching for 20 minutes at full
    # speed: a worker whose parent is gone must stop without its stop file.
    corpus, db, stop = tmp_path / "corpus", tmp_path / "s.db", tmp_path / "stop"
    write_corpus(corpus, version=1, n_docs=3)
    with Plait(str(db), embedder="fake") as engine:
        engine.index(corpus)
    launcher = (
        "import os, subprocess, sys\n"
        "args = [sys.executable, *sys.argv[1:], str(os.getpid())]\n"
        "p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", launcher, str(WORKER), str(db), "gamma", str(stop)],
        env=_env(), capture_output=True, text=True, timeout=60, check=True,
    )
    pid = int(out.stdout)
    _wait_for(Path(f"{stop}.ready.{pid}"), 60)
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive and not stop.exists()
