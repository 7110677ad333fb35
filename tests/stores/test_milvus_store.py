"""The store contract on Milvus (milvus-lite, in-process), plus what only Milvus has.

One milvus-lite database per module (opening one costs about a second); each test
gets its own collection prefix, so tests never see each other's collections.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError, StoreError
from plait.service import Plait
from plait.stores import open_store
from plait.stores.base import Filters
from plait.stores.milvus import MilvusStore
from plait.stores.milvus_schema import encode_token, filter_expr
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import StoreContract, make_chunk
from plait.testing.corpus import ARTICLE_DOCS, doc_of, documents


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "plait.db")


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def milvus(lite_uri: str) -> Iterator[MilvusStore]:
    s = MilvusStore(lite_uri, prefix=_prefix())
    yield s
    for info in s.list_collections():
        s.delete_collection(info.name)


class TestMilvusContract(StoreContract):
    @pytest.fixture
    def store(self, milvus: MilvusStore) -> MilvusStore:
        return milvus


# the token encoding and the analyzers ---------------------------------------------------
def test_encode_token_keeps_identifiers_one_word() -> None:
    assert encode_token("err-4012") == "err_2d_4012"
    assert encode_token("v3.11.2") == "v3_2e_11_2e_2"
    assert encode_token("a_b") == "a_5f_b"  # "_" is escaped: the encoding is injective
    assert encode_token("sku-88213-b") == "sku_2d_88213_2d_b"
    assert encode_token("ação") == "a_e7__e3_o"


def test_default_analyzer_splits_identifiers_and_whitespace_is_missing(lite_uri: str) -> None:
    """milvus-lite's default (``standard``) analyzer cuts ``ERR-4012`` into ``err`` and
    ``4012``: a query for ERR-4012 scores "ERR-4012 checkout" and "err 4012 inventory"
    the same. Its ``whitespace`` tokenizer does not exist. Encoded tokens keep the
    identifier whole, so only the chunk that holds ERR-4012 matches."""
    from pymilvus import DataType, Function, FunctionType, MilvusClient, MilvusException

    client = MilvusClient(lite_uri)

    def make(name: str, analyzer: dict[str, str]) -> None:
        schema = MilvusClient.create_schema(auto_id=False)
        schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("text", DataType.VARCHAR, max_length=1000, enable_analyzer=True, analyzer_params=analyzer)
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                     input_field_names=["text"], output_field_names=["sparse"]))
        params = client.prepare_index_params()
        params.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        params.add_index(field_name="v", index_type="AUTOINDEX", metric_type="COSINE")
        client.create_collection(name, schema=schema, index_params=params)

    prefix = _prefix()
    with pytest.raises(MilvusException, match="unknown tokenizer type: 'whitespace'"):
        make(f"{prefix}_ws", {"tokenizer": "whitespace"})
    make(f"{prefix}_std", {"tokenizer": "standard"})
    client.load_collection(f"{prefix}_std")
    client.insert(f"{prefix}_std", [
        {"pk": "a", "text": "ERR-4012 checkout", "v": [1, 0]},
        {"pk": "b", "text": "err 4012 inventory", "v": [1, 0]},
        {"pk": "c", "text": f"{encode_token('err-4012')} checkout", "v": [1, 0]},
        {"pk": "d", "text": "cart", "v": [1, 0]},
    ])
    raw = client.search(f"{prefix}_std", data=["ERR-4012"], anns_field="sparse", limit=10)[0]
    assert {h["pk"] for h in raw} == {"a", "b"}
    assert raw[0]["distance"] == pytest.approx(raw[1]["distance"])
    encoded = client.search(f"{prefix}_std", data=[encode_token("err-4012")], anns_field="sparse", limit=10)[0]
    assert [h["pk"] for h in encoded] == ["c"]
    client.drop_collection(f"{prefix}_std")


def test_identifier_stays_whole_in_the_store(milvus: MilvusStore) -> None:
    milvus.ensure_collection("c")
    milvus.replace_source("c", "d", "docs", [
        make_chunk("a", "ERR-4012 checkout", source_id="d"),
        make_chunk("b", "err 4012 inventory", source_id="d", ordinal=1),
    ])
    assert [i for i, _ in milvus.lexical_search("c", ["err-4012"], [], limit=10)] == ["a"]
    assert [i for i, _ in milvus.lexical_search("c", ["4012"], [], limit=10)] == ["b"]


def test_filter_expressions_quote_values() -> None:
    got = filter_expr(Filters(scopes=("adr", 'we"ird'), metadata={"lang": "pt", "n": 2, "ok": True}))
    assert got == 'scope in ["adr", "we\\"ird"] and metadata["lang"] == "pt" and metadata["n"] == 2 and metadata["ok"] == true'
    with pytest.raises(ConfigError, match="cannot filter on"):
        filter_expr(Filters(metadata={"tags": ["x"]}))


# versions and atomicity --------------------------------------------------------------
def test_interrupted_write_stays_invisible_and_is_repaired(milvus: MilvusStore) -> None:
    """A write that reserved a version and died before its commit shows nothing, and the
    next write removes its rows and revives the chunks it had marked dead."""
    milvus.ensure_collection("c")
    milvus.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[1, 0])])
    rec = milvus._record("c")
    version = rec["next_txn"]
    rec["next_txn"] = version + 1
    milvus._put_record(rec)
    old = milvus._query(rec["layout"]["name"], "chunk_id == \"a\"", ["pk"])
    assert len(old) == 1
    row = milvus._row(rec, make_chunk("z", "zebra", source_id="d"), "docs", version, None)
    milvus._client.insert(rec["layout"]["name"], [row])
    full = milvus._query(rec["layout"]["name"], 'chunk_id == "a"', __import__("plait.stores.milvus_schema", fromlist=["x"]).CHUNK_FIELDS)[0]
    milvus._client.upsert(rec["layout"]["name"], [{**full, "died": version}])
    # the half-written version is invisible: "a" is still there, "z" is not
    assert milvus.chunk_ids("c", "d") == ["a"]
    assert milvus.lexical_search("c", ["zebra"], [], limit=5) == []
    assert [i for i, _ in milvus.lexical_search("c", ["alpha"], [], limit=5)] == ["a"]
    counts = milvus.replace_source("c", "e", "docs", [make_chunk("e1", "epsilon", source_id="e")])
    assert counts.added == 1
    assert milvus.chunk_ids("c", "d") == ["a"]
    assert sorted(r["chunk_id"] for r in milvus._query(milvus._record("c")["layout"]["name"], "born >= 0", ["chunk_id"])) == ["a", "e1"]
    # a later commit past the aborted number does not kill "a"
    milvus.replace_source("c", "e", "docs", [make_chunk("e1", "epsilon two", source_id="e")])
    assert milvus.chunk_ids("c", "d") == ["a"]


def test_replace_source_is_versioned_and_cleans_up(milvus: MilvusStore) -> None:
    milvus.ensure_collection("c")
    milvus.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d"), make_chunk("b", "beta", source_id="d", ordinal=1)])
    milvus.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d"), make_chunk("b", "beta two", source_id="d", ordinal=1)])
    rec = milvus._record("c")
    rows = milvus._query(rec["layout"]["name"], "born >= 0", ["pk", "died"])
    assert sorted((r["pk"], r["died"]) for r in rows) == [("1/a", 0), ("2/b", 0)]
    assert rec["committed"] == 2 and rec["next_txn"] == 3


def test_layout_grows_a_dimension_when_vectors_arrive(milvus: MilvusStore) -> None:
    """Chunks written before any vector live in a placeholder layout; the first real
    vector rebuilds it at its dimension; a vector of another dimension is then refused."""
    milvus.ensure_collection("c")
    milvus.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d"), make_chunk("b", "beta", source_id="d", ordinal=1)])
    assert milvus._record("c")["layout"]["dim"] == 2
    assert milvus.set_vectors("c", {"a": np.array([0.0, 0.6, 0.8], np.float32)}) == 1
    assert milvus._record("c")["layout"]["dim"] == 3
    assert milvus.chunks_without_vector("c") == [("b", "beta")]
    assert [i for i, _ in milvus.lexical_search("c", ["beta"], [], limit=5)] == ["b"]
    assert [i for i, _ in milvus.vector_search("c", np.array([0, 0.6, 0.8], np.float32), limit=5)] == ["a"]
    with pytest.raises(StoreError, match="holds 3-d vectors"):
        milvus.set_vectors("c", {"b": np.array([1.0, 0.0], np.float32)})


def test_collection_totals_follow_writes(milvus: MilvusStore) -> None:
    """Chunk, vector and source totals live in the collection's record (committed with
    each version): they match a count of what reads return after every kind of write."""
    milvus.ensure_collection("c")

    def figures() -> tuple[int, int, int]:
        info = milvus.get_collection("c")
        assert info is not None
        return info.chunks, info.chunks_without_vector, info.sources

    milvus.replace_source("c", "x", "docs", [make_chunk("a", "alpha", source_id="x", vector=[1, 0]), make_chunk("b", "beta", source_id="x", ordinal=1)])
    assert figures() == (2, 1, 1)
    milvus.replace_source("c", "y", "docs", [make_chunk("c", "gamma", source_id="y")])
    assert figures() == (3, 2, 2)
    milvus.set_vectors("c", {"b": np.array([0.0, 1.0], np.float32), "c": np.array([1.0, 1.0], np.float32)})
    assert figures() == (3, 0, 2)
    milvus.replace_source("c", "x", "docs", [make_chunk("a", "alpha", source_id="x"), make_chunk("d", "delta", source_id="x", ordinal=1)])
    assert figures() == (3, 1, 2)
    milvus.delete_source("c", "y")
    assert figures() == (2, 1, 1)
    assert len(milvus.chunk_ids("c")) == 2 and len(milvus.chunks_without_vector("c")) == 1


def test_a_new_process_loads_released_collections(milvus: MilvusStore, lite_uri: str) -> None:
    """Milvus keeps collections released until someone loads them (a fresh process
    finds them so): every read and write of a new store handle loads what it touches."""
    milvus.ensure_collection("c")
    milvus.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[1, 0])])
    name = milvus._record("c")["layout"]["name"]
    for operation in ("states", "replace", "lexical", "dense"):
        milvus._client.release_collection(name)
        fresh = MilvusStore(lite_uri, prefix=milvus._prefix)
        if operation == "states":
            assert fresh.chunk_states("c", "d")["a"].has_vector is True
        elif operation == "replace":
            assert fresh.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d")]).unchanged == 1
        elif operation == "lexical":
            assert [i for i, _ in fresh.lexical_search("c", ["alpha"], [], limit=3)] == ["a"]
        else:
            assert [i for i, _ in fresh.vector_search("c", np.array([1.0, 0.0], np.float32), limit=3)] == ["a"]


def test_bm25_params_fixed_at_index_time(milvus: MilvusStore) -> None:
    from plait.stores.base import BM25Params

    milvus.ensure_collection("c")
    with pytest.raises(ConfigError, match="k1=1.2"):
        milvus.lexical_search("c", ["x"], [], limit=5, params=BM25Params(k1=1.2))


def test_weighted_fields_are_summed_past_the_cut(milvus: MilvusStore) -> None:
    """limit=1 in each field still sums both fields' scores for the candidates found."""
    milvus.ensure_collection("c")
    milvus.replace_source("c", "d", "docs", [
        make_chunk("a", "payments declined", source_id="d"),
        make_chunk("b", "payment", source_id="d", ordinal=1),
        make_chunk("c", "other words here", source_id="d", ordinal=2),
    ])
    both = milvus.lexical_search("c", ["payments"], ["payment"], limit=None)
    exact = dict(milvus.lexical_search("c", ["payments"], [], limit=None))
    stems = dict(milvus.lexical_search("c", [], ["payment"], limit=None))
    assert [i for i, _ in both] == sorted(exact.keys() | stems.keys(), key=lambda i: -(exact.get(i, 0) + stems.get(i, 0)))
    for cid, score in both:
        assert score == pytest.approx(exact.get(cid, 0.0) + stems.get(cid, 0.0), rel=1e-6)


# URLs and the service -----------------------------------------------------------------
def test_open_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(f"milvus://{tmp_path}/lite.db")
    assert isinstance(store, MilvusStore) and store.uri == f"{tmp_path}/lite.db"
    store.close()
    with pytest.raises(ConfigError, match=r"\.db"):
        open_store(f"milvus://{tmp_path}/lite.sqlite")


def test_server_url_over_grpc(tmp_path: Path) -> None:
    """``http://host:port?prefix=&token=`` talks gRPC to a Milvus server — here
    milvus-lite's own server on 127.0.0.1 — and reads page through query iterators."""
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    server, db, port = start_server_in_thread(data_dir=str(tmp_path / "server"), host="127.0.0.1", port=0)
    try:
        store = open_store(f"http://127.0.0.1:{port}?prefix=srv&token=unused")
        assert isinstance(store, MilvusStore) and store.uri == f"http://127.0.0.1:{port}"
        store.ensure_collection("c")
        store.replace_source("c", "d", "docs", [make_chunk("a", "ERR-4012 checkout", source_id="d", vector=[1, 0])])
        assert [i for i, _ in store.lexical_search("c", ["err-4012"], [], limit=5)] == ["a"]
        assert store.chunk_ids("c") == ["a"]
        assert [c.name for c in store.list_collections()] == ["c"]
        store.close()
    finally:
        server.stop(grace=0)
        db.close()
    with pytest.raises(ConfigError, match="unknown Milvus URL option"):
        open_store("http://127.0.0.1:1?tokn=x")
    with pytest.raises(ConfigError, match="shards=0 is out of range"):
        open_store("http://127.0.0.1:1?shards=0")


def test_article_top3_matches_sqlite(tmp_path: Path, lite_uri: str) -> None:
    """The article's five documents: every fixed query has the same top 3 on both stores."""
    queries = [
        "what does ERR-4012 mean",
        "stock wrong for SKU-88213-B",
        "the bank rejected my purchase",
        "checkout session expired",
        "ERR-4012 checkout",
        "retry declined card",
    ]
    results = {}
    milvus = MilvusStore(lite_uri, prefix=_prefix())
    for name, store in (("sqlite", SQLiteStore(tmp_path / "p.db")), ("milvus", milvus)):
        with Plait(store, embedder=FakeEmbedder(dimension=64)) as engine:
            engine.index_documents(documents(ARTICLE_DOCS))
            results[name] = {
                q: [(doc_of(h), h.match, h.ranks.lexical, h.ranks.dense) for h in engine.search(q, k=3).hits]
                for q in queries
            }
            for fusion in ("weighted",):
                results[name]["w"] = [doc_of(h) for h in engine.search("ERR-4012 checkout", fusion=fusion, k=3).hits]
    assert results["milvus"] == results["sqlite"]
    assert results["milvus"]["what does ERR-4012 mean"][0][0] == "kb-101"
    assert results["milvus"]["stock wrong for SKU-88213-B"][0][0] == "kb-103"
