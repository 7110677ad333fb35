"""The copy's same-store guard recognises one storage under two spellings: a milvus-lite
file by its path resolved at open (relative, absolute, symlinked; its prefix too), a SQLite
file by its identity (a relative path opened in a folder since left, a symlink), a PostgreSQL database by the server's identity (URI or key/value form, the
parameters in another order, the port written out, the socket folder through a
symlink), while another file, database or schema stays another store."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from plait.copying import copy_collection, same_store
from plait.errors import ValidationError
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk


def test_one_sqlite_file_under_every_spelling_is_one_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.chdir(folder)
    relative = SQLiteStore("kb.db")  # opened from data/, used after leaving it
    monkeypatch.chdir(tmp_path)
    absolute = SQLiteStore(folder / "kb.db")
    os.symlink(folder / "kb.db", tmp_path / "link.db")
    linked = SQLiteStore(tmp_path / "link.db")
    other = SQLiteStore(tmp_path / "other.db")
    memory_a, memory_b = SQLiteStore(":memory:"), SQLiteStore(":memory:")
    try:
        for twin in (absolute, linked):
            assert same_store(relative, twin) and same_store(twin, relative)
        assert not same_store(relative, other) and not same_store(linked, other)
        assert not same_store(memory_a, memory_b) and same_store(memory_a, memory_a)
        relative.ensure_collection("kb")
        relative.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
        with pytest.raises(ValidationError, match="same store"):
            copy_collection(relative, linked, "kb", replace=True)
        info = absolute.get_collection("kb")
        assert info is not None and info.chunks == 1  # nothing lost
    finally:
        for store in (relative, absolute, linked, other, memory_a, memory_b):
            store.close()


def test_one_postgres_database_under_every_spelling_is_one_store(pg_dsn: str, tmp_path: Path) -> None:
    schema = f"plait_s_{uuid.uuid4().hex[:10]}"
    parts = conninfo_to_dict(pg_dsn)
    host = str(parts["host"])
    if not host.startswith("/"):
        pytest.skip("the spellings below are of a server reached through its Unix socket")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        port = conn.execute("SHOW port").fetchone()
        other_db = f"plait_other_{uuid.uuid4().hex[:8]}"
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(other_db)))
    assert port is not None
    os.symlink(host, tmp_path / "socket")
    user, dbname = parts.get("user", "postgres"), parts.get("dbname", "postgres")
    spellings = [
        f"host={host} dbname={dbname} user={user}",
        f"user={user} dbname={dbname} host={host}/",
        f"dbname={dbname} host={host} port={port[0]} user={user}",
        f"host={tmp_path / 'socket'} user={user} dbname={dbname}",
    ]
    main = PostgresStore(pg_dsn, schema=schema)
    opened: list[PostgresStore] = []
    try:
        for dsn in spellings:
            twin = PostgresStore(dsn, schema=schema)
            opened.append(twin)
            assert twin.dsn != main.dsn
            assert same_store(main, twin) and same_store(twin, main), dsn
        other_schema = PostgresStore(pg_dsn, schema=schema + "_b")
        other_database = PostgresStore(make_conninfo(pg_dsn, dbname=other_db), schema=schema)
        opened += [other_schema, other_database]
        assert not same_store(main, other_schema) and not same_store(main, other_database)
        main.ensure_collection("kb")
        main.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
        with pytest.raises(ValidationError, match="same store"):
            copy_collection(main, opened[0], "kb", replace=True)
        info = main.get_collection("kb")
        assert info is not None and info.chunks == 1  # nothing lost
    finally:
        for store in (main, *opened):
            store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for name in (schema, schema + "_b"):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(other_db)))


def test_a_server_denying_pg_control_system_is_named_by_its_start_time(pg_dsn: str) -> None:
    """Managed servers may revoke ``pg_control_system()``: the identity falls back to the
    postmaster's start time, still the same for two spellings of one database."""
    name = f"plait_deny_{uuid.uuid4().hex[:8]}"
    role = f"plait_user_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(name), sql.Identifier(role)))
        started = conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()
    assert started is not None
    with psycopg.connect(make_conninfo(pg_dsn, dbname=name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC")
    parts = conninfo_to_dict(make_conninfo(pg_dsn, dbname=name, user=role))
    stores = [
        PostgresStore(make_conninfo(**parts), schema="plait_deny"),
        PostgresStore(" ".join(f"{k}={v}" for k, v in reversed(list(parts.items()))), schema="plait_deny"),
    ]
    try:
        first, second = (store.identity() for store in stores)
        assert first == second and first[:3] == (f"started:{started[0]}", name, "plait_deny")
        assert same_store(stores[0], stores[1])
    finally:
        for store in stores:
            store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_one_milvus_lite_file_under_every_spelling_is_one_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """milvus-lite: a relative path opened in a folder since left, the absolute path, a
    symlink (to the file, or to its folder) are one store; another prefix or file is not."""
    pytest.importorskip("milvus_lite")
    from plait.stores.milvus import MilvusStore

    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.chdir(folder)
    relative = MilvusStore("kb.db", prefix="t")  # opened from data/, used after leaving it
    relative.ensure_collection("kb")
    relative.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
    monkeypatch.chdir(tmp_path)
    os.symlink(folder, tmp_path / "linked")
    os.symlink(folder / "kb.db", tmp_path / "link.db")
    absolute = MilvusStore(str(folder / "kb.db"), prefix="t")
    dotted = MilvusStore("./data/../data/kb.db", prefix="t")
    other_prefix = MilvusStore(str(folder / "kb.db"), prefix="u")
    other_file = MilvusStore(str(tmp_path / "other.db"), prefix="t")
    opened = [relative, absolute, dotted, other_prefix, other_file]
    try:
        linked = [MilvusStore(str(tmp_path / "linked" / "kb.db"), prefix="t"), MilvusStore(str(tmp_path / "link.db"), prefix="t")]
        opened += linked
        for twin in (absolute, dotted, *linked):
            assert same_store(relative, twin) and same_store(twin, relative)
        assert not same_store(relative, other_prefix) and not same_store(absolute, other_file)
        with pytest.raises(ValidationError, match="same store"):
            copy_collection(relative, absolute, "kb", replace=True)
        info = absolute.get_collection("kb")
        assert info is not None and info.chunks == 1  # nothing lost
    finally:
        for store in opened:
            store.close()


def test_a_server_where_pg_control_system_fails_otherwise_is_named_by_its_start_time(pg_dsn: str) -> None:
    """Review 8 #5: only a permission denial fell back; another failure of that function (a
    fork or managed service without it: here a function of that name first on the search
    path raising feature_not_supported, 0A000) made every identity, so every copy, fail."""
    from plait.stores.postgres_base import server_identity

    schema = f"plait_nosys_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        started = conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()
        assert started is not None
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            conn.execute(
                sql.SQL(
                    "CREATE FUNCTION {}.pg_control_system() RETURNS TABLE (system_identifier bigint) "
                    "LANGUAGE plpgsql AS $$ BEGIN RAISE feature_not_supported USING MESSAGE = 'not here'; END $$"
                ).format(sql.Identifier(schema))
            )
            conn.execute(sql.SQL("SET search_path = {}, pg_catalog").format(sql.Identifier(schema)))
            with pytest.raises(psycopg.errors.FeatureNotSupported):  # the function really fails
                conn.execute("SELECT system_identifier FROM pg_control_system()")
            identity = server_identity(conn)
            assert identity[0] == f"started:{started[0]}" and identity[2] == schema
        finally:
            conn.execute("RESET search_path")
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_the_postgres_refusal_says_how_to_move_between_clones(pg_dsn: str, tmp_path: Path) -> None:
    """Review 8 #2: a promoted clone keeps its primary's system_identifier, so two independent
    clusters are refused as one store; the guard stays (a real same-store pair would lose the
    collection), and the refusal names the way that cannot delete: export, then import."""
    schema = f"plait_clone_{uuid.uuid4().hex[:8]}"
    stores = [PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)]
    sqlite = [SQLiteStore(tmp_path / "one.db"), SQLiteStore(tmp_path / "one.db")]
    try:
        for store in (stores[0], sqlite[0]):
            store.ensure_collection("kb")
            store.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
        with pytest.raises(ValidationError, match="plait export on the source, plait import --replace on the target"):
            copy_collection(stores[0], stores[1], "kb", replace=True)
        with pytest.raises(ValidationError, match="same store") as refused:
            copy_collection(sqlite[0], sqlite[1], "kb", replace=True)
        assert "plait export" not in str(refused.value)  # one SQLite file has no clones
        assert [s.get_collection("kb").chunks for s in (stores[0], sqlite[0])] == [1, 1]  # type: ignore[union-attr]
    finally:
        for store in (*stores, *sqlite):
            store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
