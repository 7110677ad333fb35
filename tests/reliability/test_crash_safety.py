"""kill -9 during ``plait index`` / ``plait reindex`` / ``plait reindex --full``: every
source keeps its old or its new chunks, never half, never duplicates, never emptied;
no chunk loses the vector it had (new ones may wait for the backfill); the lexical
index agrees; a re-run completes with every vector.

28 seeded trials on a small corpus here; ``benchmarks/reliability.py`` runs more.
"""

from __future__ import annotations

import os
import random
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from crash_trials import CrashBench, expected_state, observed_state, write_corpus

from plait.service import Plait
from plait.testing.pg import postgres_dsn


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> CrashBench:
    return CrashBench(tmp_path_factory.mktemp("crash"), n_docs=40)


def test_expected_states_differ_as_designed(tmp_path: Path) -> None:
    """The corpus pair exercises every kind of change: the checker has something to catch."""
    write_corpus(tmp_path / "c", version=1, n_docs=8)
    old = expected_state(tmp_path / "c")
    write_corpus(tmp_path / "c", version=2, n_docs=8)
    new = expected_state(tmp_path / "c")
    assert sorted(old) == [f"doc{i:04d}.md" for i in range(8)]
    assert sorted(new) == [f"doc{i:04d}.md" for i in (1, 2, 3, 5, 6, 7, 8, 9)]
    # 1 and 5 restructured: new chunk ids; 2 and 6 edited: same ids, other hashes.
    assert {c for c, _ in old["doc0001.md"]} < {c for c, _ in new["doc0001.md"]}
    assert {c for c, _ in old["doc0002.md"]} == {c for c, _ in new["doc0002.md"]}
    assert old["doc0002.md"].isdisjoint(new["doc0002.md"])
    assert old["doc0003.md"] == new["doc0003.md"]
    assert len(old["doc0003.md"]) == 3  # three sections, one chunk each


def test_checker_catches_a_half_written_source(tmp_path: Path) -> None:
    """A source holding part of its chunks is neither state (the check can fail)."""
    root = tmp_path / "c"
    write_corpus(root, version=1, n_docs=4)
    with Plait(str(tmp_path / "s.db"), embedder="fake") as engine:
        engine.index(root)
        ids = engine.store.chunk_ids("default", "doc0001.md")
        engine.store.delete_source("default", "doc0001.md")
    rows, faults = observed_state(tmp_path / "s.db")
    assert faults == []
    assert "doc0001.md" not in rows and len(ids) == 3
    assert {s: frozenset(v) for s, v in rows.items()} == {
        s: v for s, v in expected_state(root).items() if s != "doc0001.md"
    }


def test_checker_catches_a_chunk_without_its_vector(tmp_path: Path) -> None:
    """A kill must never leave a chunk that had a vector without one."""
    root = tmp_path / "c"
    write_corpus(root, version=1, n_docs=4)
    with Plait(str(tmp_path / "s.db"), embedder="fake") as engine:
        engine.index(root)
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute("UPDATE chunks SET vector = NULL WHERE source_id = 'doc0002.md'")
    db.commit()
    db.close()
    assert observed_state(tmp_path / "s.db")[1] == ["3 chunks have no vector"]


@pytest.mark.parametrize(("mode", "trials"), [("index", 10), ("reindex", 10), ("reindex-full", 8)])
def test_sigkill_leaves_old_or_new_per_source(bench: CrashBench, mode: str, trials: int) -> None:
    rng = random.Random(f"crash-{mode}")
    results = [bench.trial(mode, rng) for _ in range(trials)]
    problems = [(r.delay, v) for r in results for v in r.violations]
    assert problems == []
    assert all(r.rerun_ok for r in results)
    # Every trial counted every changed source as old or new (40 of them: 10 deleted,
    # 10 restructured, 10 edited, 10 added; the 10 unchanged count as neither).
    assert {r.old_sources + r.new_sources for r in results} == {40}


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    """``PLAIT_PG_DSN``, else a private pgserver (the pattern of tests/stores/test_postgres_store.py)."""
    pytest.importorskip("psycopg", reason="needs the postgres extra: pip install 'plait[postgres]'")
    if not os.environ.get("PLAIT_PG_DSN"):
        pytest.importorskip("pgserver", reason="needs pgserver (dev extra) or PLAIT_PG_DSN")
    with postgres_dsn("plait-pg-crash-") as dsn:
        yield dsn


@pytest.mark.slow  # ~35 s: a server start and 12 kills; benchmarks/reliability.py runs more
@pytest.mark.parametrize("mode", ["index", "reindex", "reindex-full"])
def test_sigkill_on_postgres_leaves_old_or_new_per_source(pg_dsn: str, tmp_path: Path, mode: str) -> None:
    schema = f"plait_crash_{uuid.uuid4().hex[:10]}"
    bench = CrashBench(tmp_path, n_docs=20, pg=(pg_dsn, schema))
    try:
        rng = random.Random(f"pg-{mode}")
        results = [bench.trial(mode, rng) for _ in range(4)]
    finally:
        import psycopg
        from psycopg import sql

        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    assert [(r.delay, v) for r in results for v in r.violations] == []
    assert all(r.rerun_ok for r in results)
    assert {r.old_sources + r.new_sources for r in results} == {20}
