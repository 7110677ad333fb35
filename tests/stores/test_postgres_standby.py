"""The PostgreSQL store on a hot standby: a real streaming replica
(:func:`plait.testing.pg.streaming_standby`, ``pg_basebackup`` of a private ``pgserver``).

Opening a store there used to fail (the bootstrap's ``CREATE SCHEMA IF NOT EXISTS`` is a
write); now it checks the replayed schema instead, searches answer as on the primary,
follow the primary's writes once replayed, skip their own writes (usage metering, the
ask gate's calibration) and refuse an explicit write with a clear ``StoreReadOnlyError`` (HTTP 409).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from plait.api.keys import ALL_COLLECTIONS, KeyStore
from plait.embeddings.fake import FakeEmbedder
from plait.embeddings.remote import OllamaEmbedder
from plait.errors import StoreReadOnlyError
from plait.llm import OllamaLLM
from plait.refinery.models import CardMode
from plait.refinery.store import RefineryStore
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_schema import LATEST_VERSION, migrate
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.testing.pg import private_postgres, streaming_standby
from plait.testing.wire import WireServer
from plait.types import SearchResult

_READ_ONLY = "is read-only .*writes go to the primary; nothing of this one was written"


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[str, str]]:
    """(primary, standby) URIs."""
    with private_postgres("plait-pg-primary-") as primary:
        with psycopg.connect(primary, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with streaming_standby(primary) as standby:
            yield primary, standby


@pytest.fixture
def schema(pair: tuple[str, str]) -> Iterator[str]:
    name = f"plait_sb_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pair[0], autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _replayed(primary: str, standby: str) -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    with psycopg.connect(primary, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    for _ in range(600):
        with psycopg.connect(standby, autocommit=True) as conn:
            done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)).fetchone()
        if done and done[0]:
            return
        time.sleep(0.02)
    raise AssertionError("the standby did not replay the primary's writes in 12 s")


def _hits(result: SearchResult) -> list[tuple[str, float, float | None, float | None]]:
    return [(h.chunk_id, h.score, h.lexical_score, h.vector_score) for h in result.hits]


def _chunks(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}.plait_chunks").format(sql.Identifier(schema))).fetchone()
    return int(row[0]) if row else -1


class _Counting(PostgresStore):
    """Counts full lexical reloads after a generation moved (the change log's incremental path reads none)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.full_reloads = 0

    def _full(self, *args: Any, **kwargs: Any) -> Any:
        self.full_reloads += 1
        return super()._full(*args, **kwargs)


def _vector_of(dsn: str, schema: str, source: str) -> tuple[str, np.ndarray]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT chunk_id, vector::text FROM {}.plait_chunks WHERE source_id = %s").format(
            sql.Identifier(schema)), (source,)).fetchone()
    assert row is not None
    return str(row[0]), np.asarray(json.loads(row[1]), dtype=np.float32)


def test_a_store_opens_and_searches_on_a_standby_and_follows_the_primary(
    pair: tuple[str, str], schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    primary, standby = pair
    embedder = FakeEmbedder(dimension=32)
    with Plait(PostgresStore(primary, schema=schema), embedder=embedder) as writer:
        writer.index_documents(documents(ARTICLE_DOCS))
        _replayed(primary, standby)
        replica_store = _Counting(standby, schema=schema)  # raised StoreError before the fix
        assert replica_store.read_only is True and writer.store.read_only is False  # type: ignore[attr-defined]
        with Plait(replica_store, embedder=embedder) as reader:
            for query in ("why was my payment refused", "ERR-4012", "session token"):
                expected = _hits(writer.search(query, k=5))
                assert expected and _hits(reader.search(query, k=5)) == expected
            assert _hits(reader.search("ERR-4012", k=5, mode="lexical")) == _hits(
                writer.search("ERR-4012", k=5, mode="lexical"))
            assert reader.search("zanzibar quokka", k=5, mode="lexical").hits == []  # the index is loaded

            # A write on the primary, replayed: the replica's process reloads its lexical
            # index and dense matrix (or applies the change log) and sees the new chunk.
            writer.index_documents(documents({"zoo": "The zanzibar quokka ledger reconciles refunds."}))
            _replayed(primary, standby)
            lexical = reader.search("zanzibar quokka", k=5, mode="lexical")
            assert [h.chunk_id for h in lexical.hits] == [h.chunk_id for h in writer.search(
                "zanzibar quokka", k=5, mode="lexical").hits]
            assert lexical.hits and lexical.hits[0].content.startswith("The zanzibar quokka")
            assert replica_store.full_reloads == 0  # no reload after the generation moved: the replayed change log applied
            hybrid = writer.search("zanzibar quokka", k=5)
            assert _hits(reader.search("zanzibar quokka", k=5)) == _hits(hybrid)
            chunk_id, vector = _vector_of(primary, schema, "zoo")  # the dense arm alone
            top = replica_store.vector_search("default", vector, limit=1)
            assert [cid for cid, _ in top] == [chunk_id] == [lexical.hits[0].chunk_id]

            # Other SQL updating a chunk in place on the primary logs its revision
            # (plait_revisions, migration 13): the replica's cached rows and matrix follow.
            with psycopg.connect(primary, autocommit=True) as conn:
                conn.execute(sql.SQL("UPDATE {}.plait_chunks SET metadata = metadata || '{{\"team\": \"zoo\"}}' "
                                     "WHERE source_id = 'zoo'").format(sql.Identifier(schema)))
            _replayed(primary, standby)
            assert replica_store.get_chunks("default", [chunk_id])[chunk_id].metadata["team"] == "zoo"
            assert [h.metadata.get("team") for h in reader.search("zanzibar quokka", k=1).hits] == ["zoo"]

            # A write on the standby: a clear StoreReadOnlyError, nothing lost on either side.
            before = _chunks(primary, schema)
            with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
                reader.index_documents(documents({"lost": "written on the replica"}))
            with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
                replica_store.delete_source("default", "zoo")
            with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
                replica_store.update_settings("default", {"vectorWeight": 0.9})
            with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
                reader.calibrate(samples=8)
            with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
                RefineryStore(replica_store.records()).add_card(
                    "default", question="q?", answer="a", sources=["zoo"], mode=CardMode.MANUAL)
            _replayed(primary, standby)
            assert _chunks(primary, schema) == _chunks(standby, schema) == before
            assert _hits(reader.search("zanzibar quokka", k=5)) == _hits(hybrid)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("plait")]


def test_search_explain_and_ask_on_a_standby_write_nothing(
    pair: tuple[str, str], schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With a metered embedder and LLM, a search, an explain and an ask on the standby
    record no usage and store no ask-gate calibration (both would be refused writes:
    logged as warnings, the ask failed); the primary's usage stays what it was."""
    primary, standby = pair
    with WireServer(dimension=32) as server:
        server.chat = lambda messages: "ERR-4012 means the session token expired [1]."
        embedder = OllamaEmbedder(base_url=server.url, model="nomic-embed-text", retries=0)
        llm = OllamaLLM(base_url=server.url, model="llama3.2", retries=0)
        with Plait(PostgresStore(primary, schema=schema), embedder=embedder, llm=llm) as writer:
            writer.index_documents(documents(ARTICLE_DOCS))
            writer.backfill()
            # the stored ask gate dropped: an ask on the primary would measure and store one
            writer.store.update_settings("default", {"askGate": None})
            usage = writer.usage().model_dump()
            settings = writer.store.get_settings("default")
            _replayed(primary, standby)
            caplog.set_level(logging.DEBUG, logger="plait")
            with Plait(PostgresStore(standby, schema=schema), embedder=embedder, llm=llm) as reader:
                server.clear()
                assert reader.search("why was my payment refused", k=3).hits
                assert reader.explain("ERR-4012", doc="kb-101", k=3) is not None
                answer = reader.ask("What does ERR-4012 mean?", k=3)
                assert answer.mode == "llm"
                assert [r.path for r in server.requests].count("/api/chat") == 1
            _replayed(primary, standby)
            assert writer.usage().model_dump() == usage
            assert writer.store.get_settings("default") == settings
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("plait")]
    assert loud == []
    skipped = [r.getMessage() for r in caplog.records if "not recorded: the store is read-only" in r.getMessage()]
    assert {m.split(" on ")[0] for m in skipped} == {"usage of query"}  # search, explain, ask (and its LLM call)


def test_a_standby_without_the_schema_or_behind_asks_for_the_primary(pair: tuple[str, str], schema: str) -> None:
    primary, standby = pair
    with pytest.raises(StoreReadOnlyError, match=f"hot standby and has no schema '{schema}': open the store on the primary"):
        PostgresStore(standby, schema=schema)
    with psycopg.connect(make_conninfo(primary, options=f"-c search_path={schema},public"), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        _replayed(primary, standby)
        with pytest.raises(StoreReadOnlyError, match="hot standby with no plait tables; this plait needs version"):
            PostgresStore(standby, schema=schema)
        assert migrate(conn, target=LATEST_VERSION - 1) == LATEST_VERSION - 1
    _replayed(primary, standby)
    with pytest.raises(StoreReadOnlyError, match=f"schema version {LATEST_VERSION - 1}; this plait needs version "
                                         f"{LATEST_VERSION} and cannot migrate a standby: open the store on the primary"):
        PostgresStore(standby, schema=schema)
    PostgresStore(primary, schema=schema).close()  # migrates
    _replayed(primary, standby)
    store = PostgresStore(standby, schema=schema)
    try:
        assert store.read_only and store.get_collection("default") is None
    finally:
        store.close()


def test_api_keys_authenticate_on_a_standby_with_a_side_file_in_its_folder(
    pair: tuple[str, str], schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serving process on a replica reads the API keys the primary stores and serves
    searches over HTTP with them (the primary's hits); a former ``./.plait/keys.db`` in
    its folder is not imported there (the import is a write: it failed every
    ``records()`` use, so every authenticated request)."""
    pytest.importorskip("fastapi")
    import httpx

    from plait.api.http import create_app
    from plait.testing.asgi_server import UvicornThread

    primary, standby = pair
    embedder = FakeEmbedder(dimension=32)
    with Plait(PostgresStore(primary, schema=schema), embedder=embedder) as writer:
        writer.index_documents(documents(ARTICLE_DOCS))
        token = KeyStore(writer.store.records()).create(role="reader", collection="default")[1]
        expected = writer.search("why was my payment refused", k=3).model_dump(mode="json", by_alias=True)
    _replayed(primary, standby)
    monkeypatch.chdir(tmp_path)
    side = KeyStore(tmp_path / ".plait" / "keys.db")
    side_token = side.create(role="admin", collection=ALL_COLLECTIONS)[1]
    side.close()
    reader = PostgresStore(standby, schema=schema)
    try:
        keys = KeyStore(reader.records())
        found = keys.authenticate(token)
        assert found is not None and (found.role, found.collection) == ("reader", "default")
        assert keys.authenticate(side_token) is None  # not imported on the replica
        assert [k.role for k in keys.list_keys()] == ["reader"]
        with Plait(reader, embedder=embedder) as engine, UvicornThread(create_app(engine, keys=keys)) as http:
            url = f"{http.url}/v1/collections/default/search"
            body = {"query": "why was my payment refused", "k": 3}
            served = httpx.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
            denied = httpx.post(url, json=body, headers={"Authorization": f"Bearer {side_token}"})
        assert served.status_code == 200 and served.json()["hits"] == expected["hits"]
        assert denied.status_code == 401
    finally:
        reader.close()


def _url(dsn: str, schema: str) -> str:
    """A ``postgresql://`` URL (what ``--store`` takes) for ``dsn``, tables in ``schema``."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    return (f"postgresql://{parts.get('user', 'postgres')}@/{parts.get('dbname', 'postgres')}"
            f"?host={quote(str(parts['host']), safe='')}&options={quote(f'-csearch_path={schema},public', safe='')}")


def test_a_write_on_a_standby_is_a_read_only_error_in_the_library_http_mcp_and_cli(
    pair: tuple[str, str], schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write on the replica raises :class:`StoreReadOnlyError` (a ``StoreError``): HTTP
    answers 409 naming the class (the client raises it again), the MCP tool fails with
    the message, the CLI prints it as one line and exits 1. Before, a plain ``StoreError``:
    HTTP 500."""
    pytest.importorskip("fastapi")
    pytest.importorskip("mcp")
    import anyio
    import httpx
    from mcp.server.mcpserver.exceptions import ToolError
    from typer.testing import CliRunner

    from plait.api.http import create_app
    from plait.api.mcp import create_mcp_server
    from plait.cli import app
    from plait.client import Client
    from plait.testing.asgi_server import UvicornThread

    primary, standby = pair
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in ARTICLE_DOCS.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    embedder = FakeEmbedder(dimension=32)
    with Plait(PostgresStore(primary, schema=schema), embedder=embedder) as writer:
        writer.index(folder)
        card = RefineryStore(writer.store.records()).add_card(
            "default", question="q?", answer="a", sources=["kb-101"], mode=CardMode.MANUAL)
    _replayed(primary, standby)
    before = _chunks(primary, schema)
    with Plait(PostgresStore(standby, schema=schema), embedder=embedder) as reader:
        with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
            reader.store.update_settings("default", {"vectorWeight": 0.9})
        with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
            reader.reindex()
        with UvicornThread(create_app(reader, auth=False)) as http:
            answer = httpx.post(f"{http.url}/v1/collections/default/reindex", json={}, timeout=30)
            assert answer.status_code == 409, answer.text
            assert answer.headers["X-Plait-Error"] == "StoreReadOnlyError"
            assert "Retry-After" not in answer.headers
            assert "is read-only" in answer.json()["error"] and "writes go to the primary" in answer.json()["error"]
            approve = httpx.post(f"{http.url}/v1/collections/default/faq/{card.id}/approve", json={}, timeout=30)
            assert approve.status_code == 409 and approve.headers["X-Plait-Error"] == "StoreReadOnlyError"
            with Client(http.url) as client, pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
                client.reindex()
            assert httpx.post(f"{http.url}/v1/collections/default/search", json={"query": "ERR-4012"},
                              timeout=30).status_code == 200

        async def mcp_reindex() -> Any:
            return await create_mcp_server(reader).call_tool("reindex", {})

        with pytest.raises(ToolError, match=_READ_ONLY):
            anyio.run(mcp_reindex)

    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["reindex", "--store", _url(standby, schema), "--embedder", "fake"])
    assert out.exit_code == 1, out.output
    assert "is read-only" in out.output and "Traceback" not in out.output
    _replayed(primary, standby)
    assert _chunks(primary, schema) == _chunks(standby, schema) == before


def test_migrate_on_a_standby_or_a_read_only_session_raises_the_read_only_error(
    pair: tuple[str, str], schema: str
) -> None:
    """``migrate()`` called directly on a standby one migration behind (or on a primary
    session with ``default_transaction_read_only``) raises :class:`StoreReadOnlyError`
    naming the server, not a raw psycopg error; on a standby holding the target it
    returns the version."""

    primary, standby = pair
    on = f"-c search_path={schema},public"
    with psycopg.connect(make_conninfo(primary, options=on), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        assert migrate(conn, target=LATEST_VERSION - 1) == LATEST_VERSION - 1
    _replayed(primary, standby)
    with psycopg.connect(make_conninfo(standby, options=on), autocommit=True) as conn:
        with pytest.raises(StoreReadOnlyError, match=f"read-only hot standby with plait schema version "
                                                     f"{LATEST_VERSION - 1}, {LATEST_VERSION} is needed"):
            migrate(conn)
        assert migrate(conn, target=LATEST_VERSION - 1) == LATEST_VERSION - 1
    read_only = f"{on} -c default_transaction_read_only=on"
    with (psycopg.connect(make_conninfo(primary, options=read_only), autocommit=True) as conn,
          pytest.raises(StoreReadOnlyError, match="refused the plait schema migration as read-only .25006")):
        migrate(conn)
    with pytest.raises(StoreReadOnlyError, match=_READ_ONLY):
        PostgresStore(make_conninfo(primary, options=read_only), schema=schema)
    with psycopg.connect(make_conninfo(primary, options=on), autocommit=True) as conn:
        assert migrate(conn) == LATEST_VERSION
