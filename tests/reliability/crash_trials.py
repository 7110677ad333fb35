"""Kill -9 trials of the indexer: shared by tests/reliability/test_crash_safety.py and
benchmarks/reliability.py.

A trial starts from a store holding corpus version 1 (``old``), rewrites the corpus
to version 2 (``new``: some files deleted, some restructured, some edited in place,
some unchanged, some added), runs ``python -m plait.cli index|reindex|reindex --full``
as a subprocess, SIGKILLs it after a seeded random delay, then opens the store and
checks, per source, that its (chunk id, content hash) set is exactly the old one or
exactly the new one (computed with :func:`plait.ingest.build_chunks`), that no chunk
appears twice, that no chunk lost the vector it had (a new chunk may still wait for
its own: indexing writes every chunk before embedding; a full reindex embeds inline, so
there every chunk must have one), and that the lexical postings agree with the chunk
rows. Finally a re-run must complete and leave exactly the new state, every vector in.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import plait
from plait.chunking import ChunkSettings
from plait.ingest import build_chunks
from plait.service import Plait
from plait.sources.folder import FolderSource

__all__ = ["CrashBench", "Trial", "expected_state", "observed_state", "observed_state_pg", "write_corpus"]

ChunkSet = frozenset[tuple[str, str]]
SRC = Path(plait.__file__).resolve().parents[1]


def _section(i: int, j: int, version: int) -> str:
    words = f"alpha{i} beta{j} gamma ERR-{i}{j:02d} release v3.{j}.{version} "
    return f"## Section {j}\n\n" + (words * 12).strip()


def write_corpus(root: Path, *, version: int, n_docs: int) -> None:
    """Write corpus ``version`` (1 or 2) of ``n_docs`` base documents into ``root``.

    Version 2 against version 1, by ``i % 4``: 0 deleted, 1 restructured (more
    sections: new chunk ids), 2 edited in place (same ids, new content hashes),
    3 unchanged; plus ``n_docs // 4`` new documents.
    """
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for i in range(n_docs):
        kind = i % 4
        sections = 3
        edit = 1
        if version == 2:
            if kind == 0:
                continue
            if kind == 1:
                sections = 5
            if kind == 2:
                edit = 2
        body = "\n\n".join(_section(i, j, edit) for j in range(sections))
        (root / f"doc{i:04d}.md").write_text(f"# Document {i}\n\n{body}\n", encoding="utf-8")
    if version == 2:
        for i in range(n_docs, n_docs + n_docs // 4):
            body = "\n\n".join(_section(i, j, 1) for j in range(3))
            (root / f"doc{i:04d}.md").write_text(f"# Document {i}\n\n{body}\n", encoding="utf-8")


def expected_state(root: Path) -> dict[str, ChunkSet]:
    """Per source id, the (chunk id, content hash) pairs an index of ``root`` holds."""
    out: dict[str, ChunkSet] = {}
    for doc in FolderSource(root=root).scan():
        chunks = build_chunks(doc, ChunkSettings())
        out[doc.source_id] = frozenset((c.id, c.content_hash) for c in chunks)
    return out


#: (count query, whether it takes the collection id, what a non-zero count means)
_SQLITE_CHECKS: tuple[tuple[str, bool, str], ...] = (
    (
        (
            "SELECT COUNT(*) FROM postings p WHERE NOT EXISTS "
            "(SELECT 1 FROM chunks c WHERE c.rowid = p.chunk_rowid)"
        ),
        False,
        "postings name no chunk",
    ),
    (
        (
            "SELECT COUNT(*) FROM chunks c WHERE c.collection_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM postings p WHERE p.chunk_rowid = c.rowid)"
        ),
        True,
        "chunks have no postings",
    ),
    (
        (
            "SELECT COUNT(*) FROM terms t WHERE t.collection_id = ? AND t.df != "
            "(SELECT COUNT(*) FROM postings p WHERE p.term_id = t.id)"
        ),
        True,
        "terms have a wrong document frequency",
    ),
    (
        (
            "SELECT COUNT(DISTINCT c.source_id) FROM chunks c WHERE c.collection_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM sources s WHERE s.collection_id = c.collection_id AND s.source_id = c.source_id)"
        ),
        True,
        "sources hold chunks but are not recorded",
    ),
)


def _vector_fault(vectorless: list[tuple[str, str]], had_vectors: frozenset[tuple[str, str]] | None) -> list[str]:
    """Chunks without a vector that must have one: every one when ``had_vectors`` is None
    (a finished run, or an inline full reindex), else only those whose (id, hash) had a
    vector before the run — lexical first, vectors behind: a new chunk may wait for one."""
    lost = vectorless if had_vectors is None else [c for c in vectorless if c in had_vectors]
    return [f"{len(lost)} chunks have no vector"] if lost else []


def observed_state(
    db_path: Path, collection: str = "default", *, had_vectors: frozenset[tuple[str, str]] | None = None
) -> tuple[dict[str, list[tuple[str, str]]], list[str]]:
    """Per source id, the stored (chunk id, content hash) rows; and lexical-index faults
    (and vector faults, see :func:`_vector_fault`)."""
    faults: list[str] = []
    db = sqlite3.connect(db_path)
    try:
        row = db.execute("SELECT id FROM collections WHERE name = ?", (collection,)).fetchone()
        if row is None:
            return {}, ["collection missing"]
        cid = row[0]
        rows: dict[str, list[tuple[str, str]]] = {}
        vectorless: list[tuple[str, str]] = []
        for source_id, chunk_id, chash, missing in db.execute(
            "SELECT source_id, chunk_id, content_hash, vector IS NULL FROM chunks WHERE collection_id = ?", (cid,)
        ):
            rows.setdefault(source_id, []).append((chunk_id, chash))
            if missing:
                vectorless.append((chunk_id, chash))
        faults.extend(_vector_fault(vectorless, had_vectors))
        for query, takes_cid, fault in _SQLITE_CHECKS:
            count = db.execute(query, (cid,) if takes_cid else ()).fetchone()[0]
            if count:
                faults.append(f"{count} {fault}")
    finally:
        db.close()
    return rows, faults


def observed_state_pg(
    dsn: str, schema: str, collection: str = "default", *, had_vectors: frozenset[tuple[str, str]] | None = None
) -> tuple[dict[str, list[tuple[str, str]]], list[str]]:
    """:func:`observed_state` for a PostgreSQL store in ``schema``: chunks, vectors and
    sources (not the lexical statistics)."""
    import psycopg
    from psycopg import sql

    faults: list[str] = []
    rows: dict[str, list[tuple[str, str]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        found = conn.execute("SELECT id FROM plait_collections WHERE name = %s", (collection,)).fetchone()
        if found is None:
            return {}, ["collection missing"]
        cid = found[0]
        vectorless: list[tuple[str, str]] = []
        for source_id, chunk_id, chash, missing in conn.execute(
            "SELECT source_id, chunk_id, content_hash, vector IS NULL FROM plait_chunks WHERE collection_id = %s",
            (cid,),
        ):
            rows.setdefault(source_id, []).append((chunk_id, chash))
            if missing:
                vectorless.append((chunk_id, chash))
        unlisted = conn.execute(
            "SELECT COUNT(DISTINCT c.source_id) FROM plait_chunks c WHERE c.collection_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM plait_sources s WHERE s.collection_id = c.collection_id AND s.source_id = c.source_id)",
            (cid,),
        ).fetchone()
        if unlisted and unlisted[0]:
            faults.append(f"{unlisted[0]} sources hold chunks but are not recorded")
        faults.extend(_vector_fault(vectorless, had_vectors))
    return rows, faults


@dataclass
class Trial:
    """One kill: what the store held afterwards."""

    mode: str
    delay: float
    killed: bool
    old_sources: int = 0
    new_sources: int = 0
    violations: list[str] = field(default_factory=list)
    rerun_ok: bool = False

    @property
    def mid_run(self) -> bool:
        """Killed while writing: some sources already new, others still old."""
        return self.old_sources > 0 and self.new_sources > 0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


class CrashBench:
    """A work folder with a fixed corpus path, a baseline store and the two expected states."""

    def __init__(self, work: Path, *, n_docs: int, pg: tuple[str, str] | None = None) -> None:
        """``pg`` = (DSN, schema) runs the trials on PostgreSQL (the schema is recreated
        for every trial); default: a SQLite file copied from a baseline."""
        self.work = work
        self.corpus = work / "corpus"
        self.baseline = work / "baseline.db"
        self.db = work / "trial.db"
        self.n_docs = n_docs
        self.pg = pg
        self.store = str(self.db)
        if pg is not None:
            sep = "&" if "?" in pg[0] else "?"
            self.store = f"{pg[0]}{sep}options=-csearch_path%3D{pg[1]}"
        write_corpus(self.corpus, version=2, n_docs=n_docs)
        self.new = expected_state(self.corpus)
        write_corpus(self.corpus, version=1, n_docs=n_docs)
        self.old = expected_state(self.corpus)
        if pg is None:
            with Plait(str(self.baseline), embedder="fake") as engine:
                engine.index(self.corpus)
            for suffix in ("-wal", "-shm"):
                Path(str(self.baseline) + suffix).unlink(missing_ok=True)
        self.durations: dict[str, float] = {}

    def _observed(
        self, had_vectors: frozenset[tuple[str, str]] | None = None
    ) -> tuple[dict[str, list[tuple[str, str]]], list[str]]:
        if self.pg is not None:
            return observed_state_pg(*self.pg, had_vectors=had_vectors)
        return observed_state(self.db, had_vectors=had_vectors)

    def _reset_pg(self) -> None:
        import psycopg
        from psycopg import sql

        if self.pg is None:
            return
        with psycopg.connect(self.pg[0], autocommit=True) as conn:
            schema = sql.Identifier(self.pg[1])
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))

    def command(self, mode: str) -> list[str]:
        base = [sys.executable, "-m", "plait.cli"]
        opts = ["--store", self.store, "--embedder", "fake", "--json"]
        if mode == "index":
            return [*base, "index", str(self.corpus), *opts]
        if mode == "reindex":
            return [*base, "reindex", *opts]
        if mode == "reindex-full":
            return [*base, "reindex", "--full", *opts]
        raise ValueError(f"unknown mode {mode!r}; expected index, reindex or reindex-full")

    def _prepare(self) -> None:
        write_corpus(self.corpus, version=1, n_docs=self.n_docs)
        if self.pg is not None:
            self._reset_pg()
            with Plait(self.store, embedder="fake") as engine:
                engine.index(self.corpus)
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.db) + suffix).unlink(missing_ok=True)
            shutil.copyfile(self.baseline, self.db)
        write_corpus(self.corpus, version=2, n_docs=self.n_docs)

    def duration(self, mode: str) -> float:
        """Wall time of an uninterrupted run (measured once per mode)."""
        if mode not in self.durations:
            self._prepare()
            started = time.perf_counter()
            subprocess.run(self.command(mode), env=_env(), check=True, capture_output=True, timeout=300)
            self.durations[mode] = time.perf_counter() - started
        return self.durations[mode]

    def trial(self, mode: str, rng: random.Random) -> Trial:
        """Run ``mode``, SIGKILL it after a random delay, check the store, re-run."""
        delay = rng.uniform(0.0, self.duration(mode))
        self._prepare()
        proc = subprocess.Popen(
            self.command(mode), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            proc.wait(timeout=delay)
            killed = False
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed = True
        result = Trial(mode=mode, delay=round(delay, 3), killed=killed)
        self._check(result)
        return result

    def _check(self, result: Trial) -> None:
        # Opening the store runs WAL recovery; it must succeed on whatever the kill left.
        Plait(self.store, embedder="fake").close()
        # index / reindex write every chunk before embedding any: a kill may leave new
        # chunks without a vector (the re-run fills them), never an old one without its
        # own; a full reindex embeds inline, so every chunk has one.
        inline = result.mode == "reindex-full"
        rows, faults = self._observed(None if inline else frozenset().union(*self.old.values()))
        result.violations.extend(faults)
        for source in sorted(set(self.old) | set(self.new) | set(rows)):
            got = rows.get(source, [])
            dupes = [cid for cid, n in Counter(c for c, _ in got).items() if n > 1]
            if dupes:
                result.violations.append(f"{source}: duplicated chunks {dupes}")
            have = frozenset(got)
            old, new = self.old.get(source, frozenset()), self.new.get(source, frozenset())
            if have == old:
                result.old_sources += 1 if old != new else 0
            elif have == new:
                result.new_sources += 1
            else:
                result.violations.append(
                    f"{source}: {len(have)} chunks, neither the old set ({len(old)}) nor the new ({len(new)})"
                )
        with Plait(self.store, embedder="fake") as engine:
            if result.mode == "index":
                report = engine.index(self.corpus)
            else:
                report = engine.reindex(full=result.mode == "reindex-full")
        after, faults = self._observed()
        final = {s: frozenset(v) for s, v in after.items()}
        result.rerun_ok = report.complete and final == {s: v for s, v in self.new.items() if v} and not faults
