"""The PostgreSQL store's lexical indexes are bounded in bytes in all, not only per index
(``lexical_total_bytes``; before, 16 collections × 256 MiB each): past the total the least
recently searched collections' indexes are dropped whole, and searching one again reloads
it with the same scores.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from plait.analysis import analyse_query
from plait.stores.lexical_index import ENTRY_OVERHEAD
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_lexicons import fixed_bytes
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema

#: One collection's index after the query "card": 10 chunks "k0".."k9" (row ids 8 B,
#: lengths 2 × 8 B, score buffers 2 × 8 B, 57 B per chunk id + 20 characters), and two
#: cached terms (exact and stems "card", in all 10 chunks: positions 8 B, term
#: frequencies 8 B and the score row 8 B per posting, plus ENTRY_OVERHEAD each).
FIXED = 10 * (8 + 16 + 16 + 57) + 20
PER_INDEX = FIXED + 2 * (10 * 24 + ENTRY_OVERHEAD)


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-lexicons-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_lx_") as name:
        yield name


def _fill(store: PostgresStore, names: list[str]) -> None:
    for name in names:
        store.ensure_collection(name)
        store.replace_source(name, "s", "docs", [
            make_chunk(f"k{i}", "card " * (i % 3 + 1) + f"w{i}", source_id="s", ordinal=i) for i in range(10)
        ])


def _card(store: PostgresStore, name: str) -> list[tuple[str, float]]:
    q = analyse_query("card")
    return store.lexical_search(name, q.exact, q.stems, limit=10)


def test_the_indexes_stay_within_the_total_least_recently_searched_dropped(pg_dsn: str, schema: str) -> None:
    """A total of two indexes: searching a, b, c keeps b and c (a dropped); searching a
    again reloads it (same scores) and drops b. (Read per term: the byte counts are of the
    terms queried; whole loads are bounded the same way, test_postgres_whole.)"""
    pg = PostgresStore(pg_dsn, schema=schema, lexical_total_bytes=2 * PER_INDEX, whole_bytes=0)
    try:
        _fill(pg, ["a", "b", "c"])
        first = _card(pg, "a")
        assert len(first) == 10
        cid = {name: pg._known[name][0] for name in "a"}
        index = pg._lexicon[cid["a"]][1]
        assert fixed_bytes(index) == FIXED
        assert pg._lexicon.bytes == PER_INDEX
        assert _card(pg, "b") == first and _card(pg, "c") == first
        cid.update({name: pg._known[name][0] for name in "bc"})
        assert list(pg._lexicon) == [cid["b"], cid["c"]]
        assert pg._lexicon.bytes == 2 * PER_INDEX
        assert _card(pg, "a") == first  # read again
        assert pg._lexicon[cid["a"]][1] is not index
        assert list(pg._lexicon) == [cid["c"], cid["a"]]
    finally:
        pg.close()


def test_without_a_smaller_total_every_searched_index_is_kept(pg_dsn: str, schema: str) -> None:
    """The default total (1 GiB) holds all three (read per term, as above)."""
    pg = PostgresStore(pg_dsn, schema=schema, whole_bytes=0)
    try:
        _fill(pg, ["a", "b", "c"])
        for name in "abc":
            assert len(_card(pg, name)) == 10
        assert len(pg._lexicon) == 3 and pg._lexicon.bytes == 3 * PER_INDEX
    finally:
        pg.close()


def test_one_index_past_the_total_is_held_alone_and_the_per_index_budget_is_capped(pg_dsn: str, schema: str) -> None:
    """A total smaller than one index: the collection searched last is the only one held;
    ``lexical_cache_bytes`` above the total is capped at it (one index never outgrows it)."""
    pg = PostgresStore(pg_dsn, schema=schema, lexical_cache_bytes=2**30, lexical_total_bytes=FIXED)
    try:
        assert pg._lexical_budget == FIXED
        _fill(pg, ["a", "b"])
        assert len(_card(pg, "a")) == 10
        assert len(_card(pg, "b")) == 10
        assert list(pg._lexicon) == [pg._known["b"][0]]
        assert pg._lexicon.bytes <= FIXED + 2 * (10 * 24 + ENTRY_OVERHEAD)
    finally:
        pg.close()


def test_a_warm_search_counts_its_index_once(pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-chunk bytes of an index (O(chunks) to count) are counted when it is first
    kept, not again on each search that keeps the same index."""
    import plait.stores.postgres_lexicons as lexicons

    counted: list[int] = []
    real = lexicons.fixed_bytes

    def counting(index: object) -> int:
        counted.append(1)
        return real(index)  # type: ignore[arg-type]

    monkeypatch.setattr(lexicons, "fixed_bytes", counting)
    pg = PostgresStore(pg_dsn, schema=schema)
    try:
        _fill(pg, ["a"])
        first = _card(pg, "a")
        for _ in range(5):
            assert _card(pg, "a") == first
        assert counted == [1]
    finally:
        pg.close()
