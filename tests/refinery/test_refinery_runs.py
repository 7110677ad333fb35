"""Refinery runs: lifecycle (queued → running → succeeded | failed | cancelled), LLM-drafted
cards from a scripted chat server on 127.0.0.1, cancel, and crash recovery with a real
worker process that is killed mid-run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError, NotFoundError, ValidationError
from plait.llm import OllamaLLM
from plait.refinery import CardMode, CardStatus, Refinery, RunStatus
from plait.refinery.worker import worker_command, worker_env
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.testing.wire import WireServer, closed_port

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_LLM_TIMEOUT", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


def _engine(tmp_path: Path, llm: Any = "none") -> Plait:
    engine = Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64), llm=llm)
    engine.index_documents(documents(ARTICLE_DOCS), collection="a")
    return engine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Plait]:
    with _engine(tmp_path) as e:
        yield e


def _excerpt_doc(messages: list[dict[str, Any]]) -> str:
    """The doc id of excerpt [1] in a card prompt."""
    match = re.search(r"^\[1\] \((kb-\d+)\.md", messages[-1]["content"], re.MULTILINE)
    assert match, messages[-1]["content"]
    return match.group(1)


REPLIES = {
    # one valid source and one invented number (7): the card keeps only [1]
    "kb-101": json.dumps([
        {"question": "What does ERR-4012 mean?",
         "answer": "The checkout API rejects the cart because the session token expired.",
         "sources": [1, 7]}
    ]),
    # prose around a fenced array is fine
    "kb-102": "Sure, here they are:\n```json\n" + json.dumps([
        {"question": "How do I retry declined card transactions?",
         "answer": "Retry declined card transactions safely, as the payment timeouts guide says.",
         "sources": [1]}
    ]) + "\n```",
    # no array at all: the group is skipped and counted
    "kb-103": "I cannot write cards for this.",
    # a card that cites nothing is dropped
    "kb-104": json.dumps([{"question": "Why was my payment refused?", "answer": "Declined.", "sources": []}]),
    # a near-duplicate of kb-101's question: merged, its source added
    "kb-105": json.dumps([
        {"question": "What does the ERR-4012 mean?", "answer": "Session expired.", "sources": [1]}
    ]),
}


def _scripted(messages: list[dict[str, Any]]) -> str:
    return REPLIES[_excerpt_doc(messages)]


def test_a_background_run_goes_queued_running_succeeded(engine: Plait) -> None:
    run = engine.refinery.start("a")
    assert run.status == RunStatus.QUEUED and run.mode == CardMode.EXTRACTIVE
    assert run.pid is None and run.started_at is None

    done = engine.refinery.wait(run.id, timeout=30)

    assert done.status == RunStatus.SUCCEEDED and done.error is None
    assert done.pid == os.getpid()
    assert done.started_at is not None and done.finished_at is not None and done.heartbeat_at is not None
    assert done.created_at <= done.started_at <= done.finished_at
    # five single-chunk documents, none phrased as a question: scanned, no card
    assert (done.progress.chunks_scanned, done.progress.chunks_total, done.progress.cards_made) == (5, 5, 0)
    assert engine.refinery.list_runs("a")[0].id == run.id


def test_llm_mode_drafts_cards_from_chunk_groups(tmp_path: Path) -> None:
    with WireServer(chat=_scripted) as server, _engine(
        tmp_path, llm=OllamaLLM(base_url=server.url, model="m", retries=0)
    ) as engine:
        run = engine.refinery.run("a")
        chats = [r for r in server.requests if r.path == "/api/chat"]

        assert run.status == RunStatus.SUCCEEDED and run.mode == CardMode.LLM
        # one chat per group; each document is one chunk, a group never spans sources
        assert len(chats) == 5 == run.progress.llm_calls
        assert run.progress.groups_skipped == 1  # kb-103's reply held no array
        assert run.note == "1 of 5 groups of chunks skipped: the LLM's reply held no JSON array of cards"
        assert (run.progress.cards_made, run.progress.cards_merged) == (2, 1)
        cards = engine.refinery.cards("a")
        assert [c.question for c in cards] == [
            "What does ERR-4012 mean?",
            "How do I retry declined card transactions?",
        ]
        ids = {doc: engine.store.chunk_ids("a", doc)[0] for doc in ARTICLE_DOCS}
        assert cards[0].sources == [ids["kb-101"], ids["kb-105"]]  # [7] dropped, duplicate merged
        assert cards[0].answer == "The checkout API rejects the cart because the session token expired."
        assert cards[1].sources == [ids["kb-102"]]
        assert {c.mode for c in cards} == {CardMode.LLM} and {c.status for c in cards} == {CardStatus.DRAFT}
        assert {c.run_id for c in cards} == {run.id}


def test_a_run_whose_every_llm_reply_is_unreadable_failed_and_says_why(tmp_path: Path) -> None:
    """Every reply unreadable: the run ended 'succeeded', 0 cards, no note (only
    groupsSkipped: 5 told)."""
    with WireServer(chat=lambda messages: "Sorry, I can't help with that.") as server, _engine(
        tmp_path, llm=OllamaLLM(base_url=server.url, model="m", retries=0)
    ) as engine:
        run = engine.refinery.run("a")
        assert engine.refinery.get_run(run.id, "a") == run and engine.refinery.cards("a") == []
        # a reply that is not even JSON on the wire is the provider's failure, as before
        server.malformed = True
        broken = engine.refinery.run("a")
        url = server.url
    assert run.status == RunStatus.FAILED and run.note is None
    assert run.error == (
        "all 5 groups of chunks failed: the LLM's replies held no JSON array of cards, so no card was made"
    )
    p = run.progress
    assert (p.chunks_scanned, p.chunks_total, p.cards_made, p.llm_calls, p.groups_skipped) == (5, 5, 0, 5, 5)
    assert broken.status == RunStatus.FAILED
    assert broken.error == (
        f"LLM failed: ollama at {url}/api/chat returned malformed JSON: "
        '{"embeddings": [[0.1, 0.2], oops'
    )


def test_an_llm_that_is_down_fails_the_run_with_the_reason(tmp_path: Path) -> None:
    llm = OllamaLLM(base_url=closed_port(), model="m", retries=0, timeout=2)
    with _engine(tmp_path, llm=llm) as engine:
        run = engine.refinery.run("a")
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.startswith("LLM failed:")
    assert run.finished_at is not None and run.progress.chunks_scanned == 0


def test_cancel_a_queued_run_stops_it_at_once(engine: Plait) -> None:
    run = engine.refinery.create_run("a")
    cancelled = engine.refinery.cancel(run.id)
    assert cancelled.status == RunStatus.CANCELLED and cancelled.cancel_requested
    with pytest.raises(ValidationError, match="is cancelled, not queued"):
        engine.refinery.execute(run.id)
    # cancelling a finished run changes nothing
    assert engine.refinery.cancel(run.id).status == RunStatus.CANCELLED


def test_cancel_a_running_run_stops_it_after_its_current_group(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(messages: list[dict[str, Any]]) -> str:
        entered.set()
        release.wait(20)
        return _scripted(messages)

    with WireServer(chat=slow) as server, _engine(
        tmp_path, llm=OllamaLLM(base_url=server.url, model="m", retries=0)
    ) as engine:
        run = engine.refinery.start("a")
        assert entered.wait(20)
        assert engine.refinery.get_run(run.id).status == RunStatus.RUNNING
        engine.refinery.cancel(run.id)
        release.set()
        done = engine.refinery.wait(run.id, timeout=30)

        assert done.status == RunStatus.CANCELLED and done.note == "cancelled on request"
        assert done.progress.chunks_scanned == 1 and done.progress.llm_calls == 1
        assert [c.question for c in engine.refinery.cards("a")] == ["What does ERR-4012 mean?"]


def test_a_run_named_with_another_collection_is_not_found_nor_cancelled(engine: Plait) -> None:
    """get_run and cancel took no collection, so 'plait refinery status|cancel RUN -c b' read
    or cancelled collection a's run (HTTP answered 404 for the same request)."""
    engine.index_documents(documents({"b-1": "Another collection."}), collection="b")
    run = engine.refinery.create_run("a")
    message = f"refinery run {run.id!r} does not exist in collection 'b'"
    with pytest.raises(NotFoundError) as status:
        engine.refinery.get_run(run.id, "b")
    with pytest.raises(NotFoundError) as cancel:
        engine.refinery.cancel(run.id, "b")
    assert str(status.value) == str(cancel.value) == message
    with pytest.raises(NotFoundError) as missing:
        engine.refinery.get_run("run_x", "b")
    assert str(missing.value) == "refinery run 'run_x' does not exist in collection 'b'"
    assert engine.refinery.get_run(run.id).status == RunStatus.QUEUED  # not cancelled
    assert engine.refinery.get_run(run.id, "a").id == run.id
    assert engine.refinery.cancel(run.id, "a").status == RunStatus.CANCELLED


def test_a_killed_worker_process_leaves_its_run_failed_not_running(tmp_path: Path) -> None:
    """A real crash: a detached worker is SIGKILLed while its LLM call is in flight."""
    started = threading.Event()

    def hang(messages: list[dict[str, Any]]) -> str:
        started.set()
        time.sleep(30)
        return "[]"

    with WireServer(chat=hang) as server:
        llm = OllamaLLM(base_url=server.url, model="m")
        with _engine(tmp_path, llm=llm) as engine:
            run = engine.refinery.create_run("a")
            env = {**worker_env(), "PLAIT_OLLAMA_URL": server.url}
            argv = worker_command(run.id, store=str(tmp_path / "plait.db"), embedder="fake", llm="ollama")
            worker = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                assert started.wait(60), worker.stderr.read() if worker.poll() is not None else "no chat"
                running = engine.refinery.get_run(run.id)
                assert running.status == RunStatus.RUNNING and running.pid == worker.pid
            finally:
                worker.kill()
                worker.wait(10)
            failed = engine.refinery.get_run(run.id)

    assert failed.status == RunStatus.FAILED
    assert failed.error == f"the worker process {worker.pid} is gone: the run was interrupted (crash or restart)"
    assert failed.finished_at is not None


def test_a_run_without_heartbeat_is_presumed_dead(engine: Plait, tmp_path: Path) -> None:
    refinery = Refinery(engine, path=tmp_path / "r.db", stale_after=0.5, heartbeat_every=0.1)
    run = refinery.create_run("a")
    # claimed by a process that is alive (our parent) but never beats its heart
    assert refinery.store.claim_run(run.id, os.getppid())
    assert refinery.get_run(run.id).status == RunStatus.RUNNING
    time.sleep(0.7)
    failed = refinery.get_run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error.startswith("no heartbeat for ")
    refinery.close()


def test_a_restart_in_the_same_process_fails_runs_nobody_executes(engine: Plait, tmp_path: Path) -> None:
    refinery = Refinery(engine, path=tmp_path / "r.db")
    run = refinery.create_run("a")
    refinery.store.claim_run(run.id, os.getpid())  # as if a thread had claimed it, then vanished
    reopened = Refinery(engine, path=tmp_path / "r.db")
    failed = reopened.store.get_run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error == "the worker in this process stopped without finishing the run"
    refinery.close()
    reopened.close()


def test_one_active_run_per_collection_and_settings_gate_runs(engine: Plait) -> None:
    run = engine.refinery.create_run("a")
    with pytest.raises(ValidationError, match=f"already has an active refinery run {run.id}"):
        engine.refinery.create_run("a")
    engine.refinery.cancel(run.id)
    engine.refinery.configure("a", enabled=False)
    with pytest.raises(ConfigError, match="refinery is disabled for collection 'a'"):
        engine.refinery.create_run("a")
    engine.refinery.configure("a", enabled=True)
    with pytest.raises(ConfigError) as no_llm:
        engine.refinery.create_run("a", mode="llm")
    # it said "pass llm=...", which POST …/refinery/runs cannot: its body has no llm field
    assert str(no_llm.value) == (
        "refinery mode 'llm' needs an LLM and none is configured: set PLAIT_LLM (ollama | openai) "
        "where plait runs (for plait serve, the server's environment), or pass llm= (Python) / --llm (CLI)"
    )
    with pytest.raises(ValidationError, match="unknown refinery mode 'fast'; allowed: auto, llm, extractive"):
        engine.refinery.create_run("a", mode="fast")
    with pytest.raises(ValidationError, match="unknown refinery setting"):
        engine.refinery.configure("a", colour="red")
    with pytest.raises(NotFoundError, match="collection 'nope' does not exist"):
        engine.refinery.create_run("nope")
    with pytest.raises(NotFoundError, match="refinery run 'run_x' does not exist"):
        engine.refinery.get_run("run_x")


@pytest.fixture
def faq_engine(tmp_path: Path) -> Iterator[Plait]:
    folder = tmp_path / "docs"
    (folder / "guides").mkdir(parents=True)
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "guides" / "more.md").write_text(
        "# More questions\n\n## How do I close my account?\n\nWrite to support.\n", encoding="utf-8"
    )
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64), llm="none") as e:
        e.index(folder, collection="kb", scope_rules=[("guides/", "guides"), ("", "docs")])
        yield e


def test_max_cards_stops_the_run_and_says_so(faq_engine: Plait) -> None:
    faq_engine.refinery.configure("kb", max_cards=3)
    run = faq_engine.refinery.run("kb")
    assert run.status == RunStatus.SUCCEEDED
    assert run.progress.cards_made == 3 and len(faq_engine.refinery.cards("kb")) == 3
    assert run.note == "stopped at maxCards (3 non-rejected cards)"
    assert run.progress.chunks_scanned < run.progress.chunks_total


def test_scopes_limit_the_scan_and_rejected_questions_are_not_drafted_again(faq_engine: Plait) -> None:
    faq_engine.refinery.configure("kb", scopes=["guides"])
    run = faq_engine.refinery.run("kb")
    cards = faq_engine.refinery.cards("kb")
    assert [c.question for c in cards] == ["How do I close my account?"]
    assert run.progress.chunks_total == 1
    faq_engine.refinery.reject("kb", cards[0].id)
    again = faq_engine.refinery.run("kb")
    assert (again.progress.cards_made, again.progress.cards_merged) == (0, 1)
    assert [c.status for c in faq_engine.refinery.cards("kb")] == [CardStatus.REJECTED]


def test_the_refinery_opens_once_when_first_asked_from_many_threads(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    start = threading.Barrier(8)
    seen: list[Refinery] = []

    def first_use() -> None:
        start.wait()
        seen.append(engine.refinery)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(seen) == 8 and len({id(r) for r in seen}) == 1
    finally:
        engine.close()
