"""A PostgreSQL primary and its physical replica hold the same data: the copy's same-store
guard must not take them for two stores, or a ``copy --replace`` from the replica onto the
primary would delete the source (the replica replays the delete).

A real streaming replica (:func:`plait.testing.pg.streaming_standby`, ``pg_basebackup``
of a private ``pgserver``), asked the identity a store reports
(:func:`plait.stores.postgres_base.server_identity`, asked on a plain connection; a store
opened on a standby is tested in tests/stores/test_postgres_standby.py). With ``pg_control_system()`` allowed both report the cluster's
``system_identifier``: one store. A role denied it (as on managed servers) was named by
the postmaster's start time alone, which the replica does not share, so the pair counted
as two stores; now the catalog's OIDs (a replica has its primary's) leave the answer
``unknown``, for which the copy refuses ``--replace`` of the same collection (tested on a
Milvus server in test_store_identity.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from plait.copying import same_store
from plait.store_identity import postgres_sameness, store_sameness
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_base import server_identity
from plait.testing.pg import private_postgres, streaming_standby

_DB, _ROLE, _SCHEMA = "plait_rep", "plait_rep_user", "plait_rep"


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[str, str]]:
    """(primary, standby) URIs of one database ``plait_rep``, where ``pg_control_system()``
    is revoked from PUBLIC and role ``plait_rep_user`` may create schemas."""
    with private_postgres("plait-pg-primary-") as primary:
        with psycopg.connect(primary, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(_DB)))
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(_ROLE)))
            conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(_DB), sql.Identifier(_ROLE)))
        with psycopg.connect(make_conninfo(primary, dbname=_DB), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC")
        with streaming_standby(primary) as standby:
            yield make_conninfo(primary, dbname=_DB), make_conninfo(standby, dbname=_DB)


def _replica_identity(standby: str, schema: str, *, user: str | None) -> tuple[str, str, str, str]:
    extra = {} if user is None else {"user": user}
    conninfo = make_conninfo(standby, options=f"-c search_path={schema}", **extra)
    for _ in range(200):  # until the standby has replayed the schema the primary's store made
        with psycopg.connect(conninfo, autocommit=True) as conn:
            found = server_identity(conn)
        if found[3].split(":")[1]:
            return found
        time.sleep(0.05)
    raise AssertionError("the standby did not replay the store's schema")


def test_a_replica_and_its_primary_are_one_store(pair: tuple[str, str]) -> None:
    primary, standby = pair
    main = PostgresStore(primary, schema=f"{_SCHEMA}_{uuid.uuid4().hex[:8]}")  # the superuser
    try:
        mine, replica = main.identity(), _replica_identity(standby, str(main.schema), user=None)
        assert mine[0].startswith("system:") and mine == replica
        assert postgres_sameness(mine, replica) == postgres_sameness(replica, mine) == "same"
    finally:
        main.close()


def test_without_pg_control_system_a_replica_is_not_taken_for_another_store(pair: tuple[str, str]) -> None:
    primary, standby = pair
    schema = f"{_SCHEMA}_{uuid.uuid4().hex[:8]}"
    main = PostgresStore(make_conninfo(primary, user=_ROLE), schema=schema)
    twin = PostgresStore(make_conninfo(primary, user=_ROLE, application_name="twin"), schema=schema)
    other_schema = PostgresStore(make_conninfo(primary, user=_ROLE), schema=f"{schema}_b")
    try:
        mine, replica = main.identity(), _replica_identity(standby, schema, user=_ROLE)
        assert mine[0].startswith("started:") and replica[0].startswith("started:")
        assert mine[0] != replica[0]  # two postmasters
        assert mine[1:] == replica[1:] == (_DB, schema, mine[3])  # one database, schema and catalog
        assert postgres_sameness(mine, replica) == postgres_sameness(replica, mine) == "unknown"
        assert not same_store(main, other_schema) and store_sameness(main, other_schema) == "different"
        assert twin.dsn != main.dsn and same_store(main, twin)  # one postmaster, one catalog
    finally:
        for store in (main, twin, other_schema):
            store.close()
