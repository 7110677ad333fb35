"""Lexical first, vectors behind: search before the embedding ends, crashes, two backfills.

Twelve one-chunk documents, backfill batches of 4 (three batches). A slow fake embedder
(same provider and model as the fake, so stores mix) blocks where a test wants it;
separate processes are real subprocesses (``tests/backfill_driver.py``).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.embeddings.fake import FakeEmbedder, SlowFakeEmbedder
from plait.service import Plait
from plait.stores.sqlite import SQLiteStore

DRIVER = Path(__file__).with_name("backfill_driver.py")
SRC = Path(__file__).resolve().parents[1] / "src"
TOPICS = [
    "apples", "bridges", "comets", "deserts", "engines", "forests",
    "glaciers", "harbours", "islands", "jungles", "kettles",
]


def _folder(tmp_path: Path) -> Path:
    """a01.md … a11.md on ordinary topics, then zz.md, the only one saying ERR-4012."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for n, topic in enumerate(TOPICS, start=1):
        (folder / f"a{n:02d}.md").write_text(f"# {topic.title()}\n\nNotes about {topic} and nothing else.\n")
    (folder / "zz.md").write_text("# Errors\n\nERR-4012 means the payment was declined.\n")
    return folder


def _texts(log: Path, event: str = "done") -> dict[int, list[str]]:
    """Batch number → texts, for one event, from a driver's log."""
    out: dict[int, list[str]] = {}
    if not log.exists():
        return out
    for line in log.read_text().splitlines():
        row = json.loads(line)
        if row["event"] == event:
            out[row["batch"]] = row["texts"]
    return out


def _wait(what: str, check: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _driver(*args: str, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """Start the driver; ``sigint_ignored`` starts it as a background job of a script
    would be (SIGINT ignored, inherited through exec)."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "PLAIT_BACKFILL_BATCH": "4"}
    return subprocess.Popen(
        [sys.executable, str(DRIVER), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if sigint_ignored else None,
    )


def _with_vector(db: Path) -> int:
    store = SQLiteStore(db)
    try:
        info = store.get_collection("default")
        return 0 if info is None else info.chunks - info.chunks_without_vector
    finally:
        store.close()


def test_search_answers_before_embedding_ends(tmp_path: Path) -> None:
    """Every chunk is written before the first batch is embedded: while batch 1 waits,
    ERR-4012 is found lexically (coverage 0, dense arm off); while batch 2 waits, 4 of 12
    chunks have a vector (coverage 0.3333), the dense arm runs, and zz.md (no vector
    yet, lexical rank 1) scores the RRF maximum 2/61 — as if the dense arm agreed."""
    folder = _folder(tmp_path)
    db = tmp_path / "plait.db"
    entered: queue.Queue[int] = queue.Queue()
    release = threading.Semaphore(0)

    def gate(batch: int) -> None:
        entered.put(batch)
        if not release.acquire(timeout=60):
            raise RuntimeError("never released")

    slow = SlowFakeEmbedder(gate=gate)
    reports = []
    with Plait(str(db), embedder=slow, backfill_batch=4) as writer, Plait(str(db), embedder=FakeEmbedder()) as reader:
        worker = threading.Thread(target=lambda: reports.append(writer.index(folder)))
        worker.start()
        try:
            assert entered.get(timeout=60) == 1
            first = reader.search("ERR-4012")
            assert [h.origin.source_path for h in first.hits] == ["zz.md"]  # type: ignore[union-attr]
            assert (first.vector_available, first.vector_coverage) == (False, 0.0)
            assert first.vector_unavailable_reason == "the collection has no vectors yet"
            release.release()
            assert entered.get(timeout=60) == 2
            second = reader.search("ERR-4012", fusion="rrf")
            assert second.vector_available is True
            assert second.vector_coverage == pytest.approx(0.3333)
            top = second.hits[0]
            assert top.origin.source_path == "zz.md" and top.ranks.lexical == 1 and top.ranks.dense is None  # type: ignore[union-attr]
            assert top.score == pytest.approx(2 / 61)
            assert top.score_normalised == pytest.approx(1.0)
            why = reader.explain("ERR-4012", path="zz.md", fusion="rrf")
            assert "no vector yet" in why.diagnosis.message
            assert "33% of chunks" in why.diagnosis.message
        finally:
            release.release()
            release.release()
            worker.join(timeout=60)
        assert not worker.is_alive()
        report = reports[0]
        assert (report.complete, report.embedding.embedded, report.embedding.skipped) == (True, 12, 0)
        assert report.embedding.reason is None
        assert slow.batches == 3
        assert reader.search("ERR-4012").vector_coverage == 1.0


def test_detached_index_is_searchable_and_says_how_to_resume(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    fake = FakeEmbedder()
    with Plait(str(tmp_path / "plait.db"), embedder=fake, backfill_batch=4) as engine:
        report = engine.index(folder, backfill=False)
        assert fake.calls == 0
        assert (report.complete, report.embedding.skipped, report.embedding.embedded) == (False, 12, 0)
        assert "plait reindex" in (report.embedding.reason or "")
        assert engine.vector_coverage() == 0.0
        assert [h.origin.source_path for h in engine.search("ERR-4012").hits] == ["zz.md"]  # type: ignore[union-attr]
        seen: list[tuple[int, int]] = []
        resumed = engine.reindex(embed_progress=lambda done, total: seen.append((done, total)))
        assert (resumed.complete, resumed.embedding.embedded, resumed.embedding.reason) == (True, 12, None)
        assert seen == [(0, 12), (4, 12), (8, 12), (12, 12)]
        assert fake.passage_calls == 3  # the gate's calibration at the run's end embeds queries too


def test_backfill_reuses_vectors_by_content_hash(tmp_path: Path) -> None:
    """Two files with the same text: the backfill embeds it once and reuses the vector
    (same batch: one text per hash; a later index of a third copy: from the store)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.md", "b.md"):
        (folder / name).write_text("# Same\n\nidentical words here\n")
    fake = FakeEmbedder()
    with Plait(str(tmp_path / "plait.db"), embedder=fake) as engine:
        report = engine.index(folder)
        assert (report.embedding.embedded, report.embedding.reused, fake.passages_embedded) == (1, 0, 1)
        (folder / "c.md").write_text("# Same\n\nidentical words here\n")
        again = engine.index(folder)
        assert (again.embedding.embedded, again.embedding.reused, fake.passages_embedded) == (0, 1, 1)
        assert again.complete


def test_stop_leaves_a_resumable_index(tmp_path: Path) -> None:
    """Setting ``stop`` while batch 2 is embedded: batch 2 still commits, batch 3 is not
    started; the report is incomplete and the claims are released (a new run finishes)."""
    folder = _folder(tmp_path)
    stop = threading.Event()
    slow = SlowFakeEmbedder(gate=lambda batch: stop.set() if batch == 2 else None)
    with Plait(str(tmp_path / "plait.db"), embedder=slow, backfill_batch=4) as engine:
        report = engine.index(folder, stop=stop)
        assert (report.complete, report.embedding.embedded, report.embedding.skipped) == (False, 8, 4)
        assert "plait reindex" in (report.embedding.reason or "")
        assert engine.store.claim_owners("default") == {}
        done = engine.backfill()
        assert (done.complete, done.embedding.embedded) == (True, 4)


def test_sigkill_during_backfill_loses_at_most_one_batch(tmp_path: Path) -> None:
    """A real process is killed (SIGKILL) while its third batch is embedded: batches 1
    and 2 (8 chunks) are committed, batch 3 is lost. ``reindex`` then embeds exactly
    the lost batch's 4 texts — none of the committed ones again — without waiting for
    the dead process's lease."""
    folder = _folder(tmp_path)
    db, log = tmp_path / "plait.db", tmp_path / "run1.jsonl"
    proc = _driver(str(db), "index", str(log), "--docs", str(folder), "--block-at", "3")
    try:
        _wait("batch 3 to start", lambda: 3 in _texts(log, "start"))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    committed = _texts(log, "done")
    assert sorted(committed) == [1, 2]
    lost = _texts(log, "start")[3]
    assert _with_vector(db) == 8
    rerun = SlowFakeEmbedder()
    started = time.monotonic()
    with Plait(str(db), embedder=rerun, backfill_batch=4) as engine:
        report = engine.reindex()
        assert report.complete and report.embedding.embedded == 4
        assert time.monotonic() - started < 30  # the dead owner's claims were released, not waited out
        ids = engine.store.chunk_ids("default")
        assert len(ids) == 12 == len(set(ids))
        assert engine.vector_coverage() == 1.0
    assert rerun.passages_embedded == 4 and rerun.batches == 1
    first_run = committed[1] + committed[2]
    assert len(set(first_run)) == 8 and not set(first_run) & set(lost)


def test_two_processes_never_embed_the_same_batch(tmp_path: Path) -> None:
    """Process A claims batch 1 and waits; process B embeds the other two batches, then
    waits for A's claim; A finishes. Every chunk was embedded exactly once."""
    folder = _folder(tmp_path)
    db = tmp_path / "plait.db"
    with Plait(str(db), embedder=FakeEmbedder()) as engine:
        assert engine.index(folder, backfill=False).embedding.skipped == 12
    log_a, log_b, go = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "go"
    a = _driver(str(db), "backfill", str(log_a), "--gate-file", str(go))
    b = None
    try:
        _wait("A to claim its first batch", lambda: 1 in _texts(log_a, "start"))
        b = _driver(str(db), "backfill", str(log_b))
        _wait("B to embed the rest", lambda: _with_vector(db) == 8)
        assert b.poll() is None  # B waits for A's claim rather than ending incomplete
        go.touch()
        _out_a, err_a = a.communicate(timeout=60)
        out_b, err_b = b.communicate(timeout=60)
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    texts_a = [t for batch in _texts(log_a).values() for t in batch]
    texts_b = [t for batch in _texts(log_b).values() for t in batch]
    assert (len(texts_a), len(texts_b)) == (4, 8)
    every = texts_a + texts_b
    assert len(every) == len(set(every)) == 12
    assert json.loads(out_b)["complete"] is True
    assert _with_vector(db) == 12


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "suite-in-background"])
def test_ctrl_c_in_the_cli_keeps_a_searchable_index_and_says_how_to_resume(
    tmp_path: Path, sigint_ignored: bool
) -> None:
    """``suite-in-background``: the suite itself ran as ``bash scripts/test.sh &`` (SIGINT
    ignored and inherited); the driver, a foreground command, must still see Ctrl-C — it
    hung for 180 s in such runs before the driver installed the handler itself."""
    folder = _folder(tmp_path)
    db, log = tmp_path / "plait.db", tmp_path / "cli.jsonl"
    proc = _driver(str(db), "cli", str(log), "--docs", str(folder), "--block-at", "2", sigint_ignored=sigint_ignored)
    try:
        _wait("batch 2 to start", lambda: 2 in _texts(log, "start"))
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    flat = " ".join(err.split())
    assert "searchable now (lexical): 12 chunks written" in flat
    assert "interrupted: the index stays searchable (lexical + dense arm over 33% of chunks)" in flat
    assert f"Resume with: plait reindex --collection default --store {db}" in flat
    assert _with_vector(db) == 4
    with Plait(str(db), embedder=FakeEmbedder()) as engine:
        assert engine.store.claim_owners("default") == {}  # released on the way out
        assert engine.search("ERR-4012").hits[0].origin.source_path == "zz.md"  # type: ignore[union-attr]
        assert engine.reindex().complete


def test_cli_detach_then_search_shows_the_coverage(tmp_path: Path) -> None:
    """``--detach`` returns after the lexical half and says how the vectors will come;
    after one backfill batch of 4 (of 12), search says "dense arm over 33% of chunks" and
    ``--json`` carries ``vectorCoverage``."""
    from typer.testing import CliRunner

    from plait.cli import app

    folder = _folder(tmp_path)
    db = str(tmp_path / "plait.db")
    runner = CliRunner()
    done = runner.invoke(app, ["index", str(folder), "--store", db, "--embedder", "fake", "--detach"])
    assert done.exit_code == 0, done.output
    flat = " ".join(done.output.split())
    assert "12 missing" in flat and "'plait reindex' or 'plait serve'" in flat and "incomplete" in flat
    stop = threading.Event()
    with Plait(db, embedder=SlowFakeEmbedder(gate=lambda batch: stop.set()), backfill_batch=4) as engine:
        assert engine.backfill(stop=stop).embedding.embedded == 4
    shown = runner.invoke(app, ["search", "ERR-4012", "--store", db, "--embedder", "fake"])
    assert shown.exit_code == 0, shown.output
    assert "dense arm over 33% of chunks" in shown.output
    as_json = runner.invoke(app, ["search", "ERR-4012", "--store", db, "--embedder", "fake", "--json"])
    body = json.loads(as_json.output)
    assert body["vectorCoverage"] == pytest.approx(0.3333) and body["vectorAvailable"] is True
