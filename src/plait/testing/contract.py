"""The store contract: the tests every Store backend must pass.

A backend's test module only provides a ``store`` fixture (a fresh, empty store) and
subclasses :class:`StoreContract`::

    class TestSQLite(StoreContract):
        @pytest.fixture
        def store(self, tmp_path):
            s = SQLiteStore(tmp_path / "db.sqlite"); yield s; s.close()

Expected values are computed by hand in the docstrings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import pytest

from plait.analysis import analyse, analyse_query
from plait.calibration import calibrate
from plait.embeddings.fake import FakeEmbedder
from plait.errors import NotFoundError
from plait.stores.base import Filters, Store, StoredChunk
from plait.types import Chunk, FileOrigin, SessionOrigin
from plait.usage import UsageRow

__all__ = ["SourceEmbedder", "StoreContract", "make_chunk"]


def make_chunk(
    chunk_id: str,
    content: str,
    *,
    source_id: str = "doc.md",
    scope: str = "docs",
    vector: list[float] | None = None,
    metadata: dict[str, object] | None = None,
    session: bool = False,
    ordinal: int = 0,
) -> StoredChunk:
    """A StoredChunk analysed the way the indexer does it."""
    origin = (
        SessionOrigin(session_id=source_id, event_id=f"evt-{chunk_id}", title="s")
        if session
        else FileOrigin(source_path=source_id, heading_path=["H"], title="T")
    )
    chunk = Chunk(
        id=chunk_id,
        source_id=source_id,
        scope=scope,
        content=content,
        content_hash=f"h-{content}",
        origin=origin,
        ordinal=ordinal,
        metadata=metadata or {},
    )
    fields = analyse(content)
    vec = None if vector is None else np.asarray(vector, dtype=np.float32)
    return StoredChunk(chunk, fields.exact, fields.stems, vec)


class SourceEmbedder(FakeEmbedder):
    """Texts made of words ``s<i>w<j>`` embed as the one-hot vector of source ``i``
    (component ``i + 1``; 0 for a text without such a word; sources below
    ``dimension − 1``): the dense arm finds a text's source and cannot tell its chunks apart."""

    def __init__(self, dimension: int = 8) -> None:
        super().__init__(dimension=dimension)

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self._dim, dtype=np.float32)
        found = re.search(r"s(\d+)w", text)
        vector[int(found.group(1)) + 1 if found else 0] = 1.0
        return vector


def _source_words(source: int, words: Sequence[int]) -> str:
    return " ".join(f"s{source}w{j}" for j in words) + "."


def _unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


class StoreContract:
    """Behaviour every backend shares. Subclasses provide the ``store`` fixture."""

    @pytest.fixture
    def store(self) -> Store:  # pragma: no cover - overridden
        raise NotImplementedError

    # collections ----------------------------------------------------------------
    def test_collections_lifecycle(self, store: Store) -> None:
        assert store.get_collection("a") is None
        info = store.ensure_collection("a")
        assert info.name == "a" and info.chunks == 0 and info.embedder_model is None
        store.ensure_collection("a")
        assert [c.name for c in store.list_collections()] == ["a"]
        store.set_embedder("a", provider="fake", model="m", dimension=3)
        stored = store.get_collection("a")
        assert stored is not None
        assert (stored.embedder_provider, stored.embedder_model, stored.dimension) == ("fake", "m", 3)
        assert store.delete_collection("a") is True
        assert store.delete_collection("a") is False
        assert store.get_collection("a") is None

    def test_ping_answers(self, store: Store) -> None:
        store.ping()  # readiness of a reachable store: no error raised

    def test_settings_merge(self, store: Store) -> None:
        store.ensure_collection("a")
        assert store.get_settings("a") == {}
        store.update_settings("a", {"embedder": "e5"})
        assert store.update_settings("a", {"fusion": {"rrfK": 30}}) == {
            "embedder": "e5",
            "fusion": {"rrfK": 30},
        }

    def test_settings_remove(self, store: Store) -> None:
        """``remove`` deletes keys (absent ones ignored) in the same step as the merge; a
        key merged as None stays, as null."""
        store.ensure_collection("a")
        store.update_settings("a", {"embedder": "e5", "probe": "x", "keep": None})
        assert store.update_settings("a", {"n": 1}, remove=["probe", "absent"]) == {"embedder": "e5", "keep": None, "n": 1}
        assert store.get_settings("a") == {"embedder": "e5", "keep": None, "n": 1}

    def test_settings_increment(self, store: Store) -> None:
        """Counts add to the stored value (absent: 0, 2 + 3 = 5), other keys are kept and
        ``settings`` merged in the same step; an unknown collection is NotFoundError."""
        store.ensure_collection("a")
        store.update_settings("a", {"embedder": "e5", "n": 2})
        assert store.increment_settings("a", {"n": 3, "m": 4}, settings={"v": 1}) == {
            "embedder": "e5", "n": 5, "m": 4, "v": 1,
        }
        assert store.get_settings("a") == {"embedder": "e5", "n": 5, "m": 4, "v": 1}
        with pytest.raises(NotFoundError):
            store.increment_settings("nope", {"n": 1})

    def test_unknown_collection_raises_not_found(self, store: Store) -> None:
        with pytest.raises(NotFoundError):
            store.lexical_search("nope", ["x"], [], limit=5)

    # writes ---------------------------------------------------------------------
    def test_replace_source_counts_and_idempotence(self, store: Store) -> None:
        store.ensure_collection("c")
        first = [make_chunk("a", "alpha beta"), make_chunk("b", "gamma delta")]
        counts = store.replace_source("c", "doc.md", "docs", first)
        assert (counts.added, counts.updated, counts.unchanged, counts.deleted) == (2, 0, 0, 0)
        again = store.replace_source("c", "doc.md", "docs", first)
        assert (again.added, again.updated, again.unchanged, again.deleted) == (0, 0, 2, 0)
        edited = [make_chunk("a", "alpha beta changed"), make_chunk("c", "epsilon")]
        counts = store.replace_source("c", "doc.md", "docs", edited)
        assert (counts.added, counts.updated, counts.unchanged, counts.deleted) == (1, 1, 0, 1)
        assert sorted(store.chunk_ids("c", "doc.md")) == ["a", "c"]
        info = store.get_collection("c")
        assert info is not None and info.chunks == 2 and info.sources == 1

    def test_delete_source_removes_both_arms(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "x.md", "docs", [make_chunk("x1", "zebra", source_id="x.md", vector=[1, 0])])
        store.replace_source("c", "y.md", "docs", [make_chunk("y1", "zebra", source_id="y.md", vector=[0, 1])])
        assert store.delete_source("c", "x.md") == 1
        assert [i for i, _ in store.lexical_search("c", ["zebra"], [], limit=10)] == ["y1"]
        assert [i for i, _ in store.vector_search("c", np.array([1.0, 0.0], np.float32), limit=10)] == ["y1"]
        assert [s.source_id for s in store.list_sources("c")] == ["y.md"]

    def test_unchanged_chunk_keeps_vector(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[1, 0])])
        store.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d")])
        states = store.chunk_states("c", "d")
        assert states["a"].has_vector is True
        assert store.chunks_without_vector("c") == []

    def test_unchanged_chunk_vector_is_overwritten_when_given(self, store: Store) -> None:
        """A full reindex re-embeds in place: same id and content, a new vector replaces
        the stored one in both the row and the dense arm; no vector keeps it.

        Stored [1, 0]; rewritten with [0, 1]: a query [0, 1] scores cos = 1, a query
        [1, 0] scores 0. Rewritten again without a vector: still [0, 1].
        """
        store.ensure_collection("c")
        other = make_chunk("b", "beta", source_id="d", vector=_unit(1, 1), ordinal=1)
        store.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[1, 0]), other])
        # searched once before the rewrite, so an ANN graph (if any) holds the old vector
        assert [i for i, _ in store.vector_search("c", np.array([0.0, 1.0], np.float32), limit=1)] == ["b"]
        counts = store.replace_source(
            "c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[0, 1]), other]
        )
        assert (counts.added, counts.updated, counts.unchanged, counts.deleted) == (0, 0, 2, 0)
        assert store.chunk_ids("c", "d") == ["a", "b"]
        np.testing.assert_allclose(store.vectors_by_hash("c", ["h-alpha"])["h-alpha"], [0, 1], atol=1e-6)
        ranked = dict(store.vector_search("c", np.array([0.0, 1.0], np.float32), limit=None))
        assert ranked["a"] == pytest.approx(1.0, abs=1e-5)
        assert ranked["b"] == pytest.approx(math.sqrt(0.5), abs=1e-5)
        assert [i for i, _ in store.vector_search("c", np.array([0.0, 1.0], np.float32), limit=1)] == ["a"]
        assert dict(store.vector_search("c", np.array([1.0, 0.0], np.float32), limit=None))["a"] == pytest.approx(0.0, abs=1e-5)
        store.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d"), other])
        np.testing.assert_allclose(store.vectors_by_hash("c", ["h-alpha"])["h-alpha"], [0, 1], atol=1e-6)
        assert [i for i, _ in store.vector_search("c", np.array([0.0, 1.0], np.float32), limit=1)] == ["a"]
        assert store.chunks_without_vector("c") == []
        info = store.get_collection("c")
        assert info is not None and (info.chunks, info.sources) == (2, 1)

    def test_vectors_by_hash_and_backfill(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[0.6, 0.8]), make_chunk("b", "beta", source_id="d")])
        found = store.vectors_by_hash("c", ["h-alpha", "h-beta", "h-none"])
        assert list(found) == ["h-alpha"]
        np.testing.assert_allclose(found["h-alpha"], [0.6, 0.8], rtol=1e-6)
        assert store.chunks_without_vector("c") == [("b", "beta")]
        assert store.set_vectors("c", {"b": np.array([1.0, 0.0], np.float32)}) == 1
        assert store.chunks_without_vector("c") == []
        assert [i for i, _ in store.vector_search("c", np.array([1.0, 0.0], np.float32), limit=1)] == ["b"]

    # backfill claims --------------------------------------------------------------
    def _four(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "d", "docs", [
            make_chunk("a", "alpha", source_id="d", vector=[1, 0], ordinal=0),
            make_chunk("b", "beta", source_id="d", ordinal=1),
            make_chunk("c2", "gamma", source_id="d", ordinal=2),
            make_chunk("e", "epsilon", source_id="d", ordinal=3),
        ])

    def test_claims_partition_the_chunks_without_vector(self, store: Store) -> None:
        """Three vector-less chunks b, c2, e (store order). Owner A claims 2 → b, c2;
        B claims 2 → only e is left; C gets nothing. A vector for b leaves A holding
        one live claim; A's next claim replaces its previous one (c2 comes back to it);
        releasing B frees e for C."""
        self._four(store)
        assert store.claim_without_vector("c", owner="A", limit=2, lease_seconds=600) == [("b", "beta"), ("c2", "gamma")]
        assert store.claim_without_vector("c", owner="B", limit=2, lease_seconds=600) == [("e", "epsilon")]
        assert store.claim_without_vector("c", owner="C", limit=5, lease_seconds=600) == []
        assert store.claim_owners("c") == {"A": 2, "B": 1}
        assert store.set_vectors("c", {"b": np.array([0.0, 1.0], np.float32)}) == 1
        assert store.claim_owners("c") == {"A": 1, "B": 1}
        assert store.without_vector("c", ["a", "b", "c2", "e", "missing"]) == {"c2", "e"}
        assert store.claim_without_vector("c", owner="A", limit=5, lease_seconds=600) == [("c2", "gamma")]
        assert store.release_claims("c", "B") == 1
        assert store.release_claims("c", "B") == 0
        assert store.claim_without_vector("c", owner="C", limit=5, lease_seconds=600) == [("e", "epsilon")]
        assert store.claim_owners("c") == {"A": 1, "C": 1}

    def test_expired_claims_are_taken_over(self, store: Store) -> None:
        """A lease of 0 s is over at once: the chunks go to the next claimer and the
        expired owner is no longer listed."""
        self._four(store)
        assert [i for i, _ in store.claim_without_vector("c", owner="A", limit=3, lease_seconds=0)] == ["b", "c2", "e"]
        assert store.claim_owners("c") == {}
        assert [i for i, _ in store.claim_without_vector("c", owner="B", limit=3, lease_seconds=600)] == ["b", "c2", "e"]
        assert store.claim_owners("c") == {"B": 3}
        store.delete_collection("c")
        self._four(store)
        assert store.claim_owners("c") == {}  # a deleted collection's claims went with it

    # lexical arm ------------------------------------------------------------------
    def test_bm25_hand_computed(self, store: Store) -> None:
        """Three one-field documents; k1=0.9, b=0.4, Lucene idf.

        d1 = "err-4012 checkout" (exact len 2), d2 = "checkout cart cart" (len 3),
        d3 = "inventory" (len 1); avgdl = 2. Query exact term "err-4012": df=1, N=3,
        idf = ln(1 + 2.5/1.5) = ln(8/3). d1: tf=1, norm = 0.9·(0.6 + 0.4·2/2) = 0.9,
        score = idf·1·1.9/1.9 = ln(8/3) ≈ 0.980829.
        """
        from plait.stores.base import BM25Params

        store.ensure_collection("c")
        store.replace_source("c", "d", "docs", [
            make_chunk("d1", "ERR-4012 checkout", source_id="d"),
            make_chunk("d2", "checkout cart cart", source_id="d"),
            make_chunk("d3", "inventory", source_id="d"),
        ])
        params = BM25Params(stems_weight=0.0)
        ranked = store.lexical_search("c", ["err-4012"], [], limit=10, params=params)
        assert [i for i, _ in ranked] == ["d1"]
        assert ranked[0][1] == pytest.approx(math.log(8 / 3), rel=1e-6)
        # "checkout": df=2, idf = ln(1 + 1.5/2.5) = ln(1.6); d1 len 2 → 1.9/1.9 = 1,
        # d2 len 3 → norm 0.9·(0.6+0.6)=1.08, tf part 1.9/2.08.
        ranked = store.lexical_search("c", ["checkout"], [], limit=10, params=params)
        assert [i for i, _ in ranked] == ["d1", "d2"]
        assert ranked[0][1] == pytest.approx(math.log(1.6), rel=1e-6)
        assert ranked[1][1] == pytest.approx(math.log(1.6) * 1.9 / 2.08, rel=1e-6)

    def test_limited_lexical_search_is_the_exhaustive_top_k(self, store: Store) -> None:
        """200 look-alike chunks (40 words drawn from 12): many chunks score close to the
        10th hit, and a chunk one field ranks in its top ``k`` is often cut from the
        other's. ``limit=k`` must be ``limit=None``'s first ``k`` (ids and scores), and
        every score the Okapi BM25 of the docstring above, computed here from the chunks'
        own analysed tokens over all 200 chunks (on Milvus, the fill-in used to score a
        field with a search filtered to the missing ids: BM25 over that subset, c0-32's
        exact-field 0.457 came back 3.485 and 79 of 80 top-k sets differed)."""
        import random
        from collections import Counter

        words = ["checkout", "payment", "declined", "card", "token", "session", "refund",
                 "ledger", "invoice", "ERR-4012", "SKU-88213-B", "resolve_tenant_db"]
        rng = random.Random(7)
        store.ensure_collection("c")
        docs: dict[str, StoredChunk] = {}
        for s in range(4):
            batch = [
                make_chunk(f"c{s}-{i}", " ".join(rng.choice(words) for _ in range(40)),
                           source_id=f"doc{s}.md", ordinal=i)
                for i in range(50)
            ]
            store.replace_source("c", f"doc{s}.md", "docs", batch)
            docs.update({c.chunk.id: c for c in batch})

        def bm25(field: str, terms: list[str], cid: str) -> float:
            bags = {i: Counter(getattr(c, field)) for i, c in docs.items()}
            avgdl = sum(sum(b.values()) for b in bags.values()) / len(bags)
            bag, total = bags[cid], 0.0
            norm = 0.9 * (0.6 + 0.4 * sum(bag.values()) / avgdl)
            for t in dict.fromkeys(terms):
                df = sum(1 for b in bags.values() if t in b)
                if bag[t]:
                    total += math.log(1 + (len(bags) - df + 0.5) / (df + 0.5)) * bag[t] * 1.9 / (bag[t] + norm)
            return total

        for cid in sorted(docs)[::10]:
            q = analyse_query(" ".join(docs[cid].chunk.content.split()[:12]))
            full = store.lexical_search("c", q.exact, q.stems, limit=None)
            for k in (10, 50):
                assert store.lexical_search("c", q.exact, q.stems, limit=k) == full[:k], (cid, k)
            for hit, score in full[:50:7]:
                want = bm25("exact", q.exact, hit) + bm25("stems", q.stems, hit)
                assert score == pytest.approx(want, rel=2e-3), (cid, hit)

    def test_lexical_limit_filters_and_no_match(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "a.md", "adr", [make_chunk("a1", "tenant routing", source_id="a.md", scope="adr", metadata={"lang": "en"})])
        store.replace_source("c", "b.md", "docs", [make_chunk("b1", "tenant routing tenant", source_id="b.md", metadata={"lang": "pt"})])
        assert store.lexical_search("c", ["absent"], ["absent"], limit=10) == []
        assert len(store.lexical_search("c", ["tenant"], [], limit=1)) == 1
        assert [i for i, _ in store.lexical_search("c", ["tenant"], [], limit=10, filters=Filters(scopes=("adr",)))] == ["a1"]
        assert [i for i, _ in store.lexical_search("c", ["tenant"], [], limit=10, filters=Filters(metadata={"lang": "pt"}))] == ["b1"]

    def test_stemmed_field_matches_inflections(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "d", "docs", [make_chunk("a", "The payments were declined", source_id="d")])
        assert store.lexical_search("c", ["declining"], [], limit=5) == []
        stems = analyse("declining payment").stems
        assert [i for i, _ in store.lexical_search("c", [], stems, limit=5)] == ["a"]

    # dense arm ------------------------------------------------------------------
    def test_vector_search_cosine_order(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "d", "docs", [
            make_chunk("x", "x", source_id="d", vector=_unit(1, 0, 0)),
            make_chunk("y", "y", source_id="d", vector=_unit(1, 1, 0)),
            make_chunk("z", "z", source_id="d", vector=_unit(0, 0, 1)),
            make_chunk("n", "no vector", source_id="d"),
        ])
        ranked = store.vector_search("c", np.array(_unit(1, 0.2, 0), np.float32), limit=None)
        assert [i for i, _ in ranked] == ["x", "y", "z"]
        assert ranked[0][1] == pytest.approx(1 / math.sqrt(1.04), rel=1e-5)
        assert ranked[2][1] == pytest.approx(0.0, abs=1e-6)
        assert [i for i, _ in store.vector_search("c", np.array(_unit(1, 0.2, 0), np.float32), limit=2)] == ["x", "y"]

    def test_vector_search_filters(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "a", "adr", [make_chunk("a", "a", source_id="a", scope="adr", vector=[1, 0])])
        store.replace_source("c", "b", "docs", [make_chunk("b", "b", source_id="b", vector=[1, 0])])
        got = store.vector_search("c", np.array([1.0, 0.0], np.float32), limit=5, filters=Filters(scopes=("docs",)))
        assert [i for i, _ in got] == ["b"]

    def test_calibration_judges_chunks_and_sources(self, store: Store) -> None:
        """Three sources of two chunks; each chunk's words are its own, each source's two
        vectors equal. Every chunk is a pseudo-query: BM25 returns its chunk first (chunk
        and source MRR 1); the dense arm returns the source's two chunks tied, in one
        order for both of their queries, so one query finds its chunk first and the other
        second: chunk MRR (3·1 + 3·½) / 6 = 0.75, source MRR 1."""
        store.ensure_collection("c")
        embedder = SourceEmbedder()
        for source in range(3):
            texts = [_source_words(source, range(0, 8)), _source_words(source, range(8, 16))]
            store.replace_source("c", f"s{source}.md", "docs", [
                make_chunk(f"s{source}c{n}", text, source_id=f"s{source}.md", ordinal=n,
                           vector=[float(v) for v in embedder.embed_query(text)])
                for n, text in enumerate(texts)
            ])
        measured = calibrate(store, "c", embedder, samples=6)
        assert measured.samples == 6
        assert (measured.lexical_mrr, measured.lexical_source_mrr) == (1.0, 1.0)
        assert (measured.dense_mrr, measured.dense_source_mrr) == (0.75, 1.0)

    # reads ------------------------------------------------------------------------
    def test_get_chunks_round_trip(self, store: Store) -> None:
        store.ensure_collection("c")
        item = make_chunk("s1", "olá sessão", source_id="sess-1", scope="session", session=True, metadata={"k": 1})
        store.replace_source("c", "sess-1", "session", [item])
        got = store.get_chunks("c", ["s1", "missing"])
        assert list(got) == ["s1"]
        assert got["s1"] == item.chunk.model_copy(update={"scope": "session"})

    def test_collections_are_isolated(self, store: Store) -> None:
        for name in ("one", "two"):
            store.ensure_collection(name)
        store.replace_source("one", "d", "docs", [make_chunk("c1", "shared words", source_id="d", vector=[1, 0])])
        store.replace_source("two", "d", "docs", [make_chunk("c2", "shared words", source_id="d", vector=[1, 0])])
        assert [i for i, _ in store.lexical_search("one", ["shared"], [], limit=10)] == ["c1"]
        assert [i for i, _ in store.vector_search("two", np.array([1.0, 0.0], np.float32), limit=10)] == ["c2"]
        store.delete_collection("one")
        assert [i for i, _ in store.lexical_search("two", ["shared"], [], limit=10)] == ["c2"]

    def test_scopes_and_sources(self, store: Store) -> None:
        store.ensure_collection("c")
        store.replace_source("c", "a.md", "adr", [make_chunk("a", "a", source_id="a.md", scope="adr", vector=[1, 0])])
        store.replace_source("c", "b.md", "docs", [make_chunk("b", "b", source_id="b.md"), make_chunk("b2", "bb", source_id="b.md", ordinal=1)])
        store.mark_scope_indexed("c", "docs", "2026-01-01T00:00:00+00:00")
        scopes = {s.scope: s for s in store.scopes("c")}
        assert (scopes["docs"].sources, scopes["docs"].chunks, scopes["docs"].chunks_without_vector) == (1, 2, 2)
        assert scopes["docs"].last_indexed_at == "2026-01-01T00:00:00+00:00"
        assert scopes["adr"].last_indexed_at is None
        sources = store.list_sources("c", scope="docs")
        assert [(s.source_id, s.chunks, s.chunks_without_vector) for s in sources] == [("b.md", 2, 2)]

    def test_sources_remember_their_root(self, store: Store) -> None:
        """``replace_source(..., root=)`` is stored, replaced on rewrite, and filters ``list_sources``."""
        store.ensure_collection("c")
        store.replace_source("c", "a.md", "docs", [make_chunk("a", "a", source_id="a.md")], root="folder:/r1")
        store.replace_source("c", "b.md", "adr", [make_chunk("b", "b", source_id="b.md", scope="adr")], root="folder:/r1")
        store.replace_source("c", "s-1", "sessions", [make_chunk("s", "s", source_id="s-1", session=True)], root="sessions:/log")
        store.replace_source("c", "code", "docs", [make_chunk("k", "k", source_id="code")])
        assert [s.source_id for s in store.list_sources("c", root="folder:/r1")] == ["a.md", "b.md"]
        assert [s.source_id for s in store.list_sources("c", "adr", root="folder:/r1")] == ["b.md"]
        assert [(s.source_id, s.root) for s in store.list_sources("c", root="")] == [("code", "")]
        assert {s.source_id: s.root for s in store.list_sources("c")}["s-1"] == "sessions:/log"
        store.replace_source("c", "a.md", "docs", [make_chunk("a", "a", source_id="a.md")], root="git:/r2")
        assert [s.source_id for s in store.list_sources("c", root="folder:/r1")] == ["b.md"]
        store.delete_source("c", "b.md")
        assert store.list_sources("c", root="folder:/r1") == []

    def test_claim_leaves_another_roots_source_untouched(self, store: Store) -> None:
        """``claim=True``: a source owned by another root is not written and the counts name
        the owner; one owned by the same root, by no root, or not stored yet is written."""
        store.ensure_collection("c")
        store.replace_source("c", "a.md", "docs", [make_chunk("a", "from one", source_id="a.md")], root="folder:/one")
        lost = store.replace_source(
            "c", "a.md", "docs", [make_chunk("a2", "from two", source_id="a.md")], root="folder:/two", claim=True
        )
        assert (lost.conflict, lost.added, lost.deleted) == ("folder:/one", 0, 0)
        assert list(store.get_chunks("c", ["a", "a2"])) == ["a"]
        assert [(s.source_id, s.root) for s in store.list_sources("c")] == [("a.md", "folder:/one")]
        same = store.replace_source(
            "c", "a.md", "docs", [make_chunk("a3", "again", source_id="a.md")], root="folder:/one", claim=True
        )
        assert (same.conflict, same.added, same.deleted) == (None, 1, 1)
        new = store.replace_source("c", "n.md", "docs", [make_chunk("n", "n", source_id="n.md")], root="folder:/two", claim=True)
        assert (new.conflict, new.added) == (None, 1)

    # records: refinery runs and cards, API keys (issue 19 item 3) ----------------------
    def test_records_keep_runs_and_cards_in_the_store(self, store: Store) -> None:
        """Runs and cards live in the store's record tables: one active run per
        collection, newest run first, cards oldest first, per-collection deletion."""
        from plait.errors import ConflictError
        from plait.refinery.models import CardMode, CardStatus, RunStatus
        from plait.refinery.store import RefineryStore

        refinery = RefineryStore(store.records())
        first = refinery.create_run("c", CardMode.EXTRACTIVE, exclusive=True)
        assert (first.collection, first.status) == ("c", RunStatus.QUEUED)
        with pytest.raises(ConflictError, match=f"already has an active refinery run {first.id}"):
            refinery.create_run("c", CardMode.EXTRACTIVE, exclusive=True)
        assert refinery.claim_run(first.id, pid=4242) is True
        assert refinery.claim_run(first.id, pid=4242) is False  # running, not queued
        assert refinery.finish_run(first.id, RunStatus.SUCCEEDED) is True
        assert refinery.finish_run(first.id, RunStatus.FAILED) is False
        second = refinery.create_run("c", CardMode.LLM, exclusive=True)
        refinery.create_run("other", CardMode.LLM)
        assert [r.id for r in refinery.list_runs("c")] == [second.id, first.id]
        assert [r.id for r in refinery.active_runs("c")] == [second.id]
        one = refinery.add_card("c", question="q1?", answer="a1", sources=["x", "y"], mode=CardMode.EXTRACTIVE)
        two = refinery.add_card("c", question="q2?", answer="a2", sources=["z"], mode=CardMode.LLM)
        refinery.update_card("c", two.id, {"status": "approved"})
        assert [(c.id, c.sources) for c in refinery.list_cards("c")] == [(one.id, ["x", "y"]), (two.id, ["z"])]
        assert [c.id for c in refinery.list_cards("c", status=CardStatus.APPROVED)] == [two.id]
        assert refinery.count_cards("c", exclude=CardStatus.APPROVED) == 1
        assert refinery.delete_collection("c") == (2, 2)
        assert refinery.list_cards("c") == [] and [r.collection for r in refinery.list_runs()] == ["other"]

    def test_records_keep_api_keys_in_the_store(self, store: Store) -> None:
        """Keys are hashed in the store: ids count from 1, a token authenticates until its
        key is revoked, revoking a collection keeps ``*`` keys."""
        from plait.api.keys import KeyStore, hash_token

        keys = KeyStore(store.records())
        reader, token = keys.create(role="reader", collection="docs")
        admin, admin_token = keys.create(role="admin", collection="*")
        assert (reader.id, admin.id) == (1, 2)
        assert keys.authenticate(token) == reader and keys.authenticate(token + "x") is None
        assert keys.token_hashes([reader.id]) == {hash_token(token)}
        assert [k.id for k in keys.revoke_collection("docs")] == [reader.id]
        assert keys.authenticate(token) is None and keys.authenticate(admin_token) == admin
        assert [(k.id, k.revoked_at is not None) for k in keys.list_keys()] == [(1, True), (2, False)]
        assert store.records() is store.records()  # one handle per store: imported once
    def test_usage_sums_per_key_and_filters_by_bucket(self, store: Store) -> None:
        """Usage rows of one (bucket, kind, purpose, provider, model, estimated) add up;
        ``since`` keeps buckets from that hour on; collections do not share usage."""
        store.ensure_collection("c")
        store.ensure_collection("other")
        early = UsageRow(
            bucket="2026-12-01T10:00:00Z", kind="embedding", purpose="index", provider="ollama",
            model="nomic-embed-text", calls=2, texts=10, characters=400, input_tokens=95,
        )
        store.add_usage("c", [early])
        store.add_usage("c", [early.model_copy(update={"calls": 1, "texts": 3, "characters": 30, "input_tokens": 8})])
        later = UsageRow(
            bucket="2026-12-01T11:00:00Z", kind="llm", purpose="ask", provider="openai", model="gpt-4o-mini",
            calls=1, texts=2, characters=900, input_tokens=250, output_tokens=40,
        )
        guessed = early.model_copy(update={"estimated": True, "calls": 1, "input_tokens": 5})
        store.add_usage("c", [later, guessed])
        store.add_usage("c", [])
        rows = store.usage("c")
        assert [(r.bucket, r.kind, r.estimated) for r in rows] == [
            ("2026-12-01T10:00:00Z", "embedding", False),
            ("2026-12-01T10:00:00Z", "embedding", True),
            ("2026-12-01T11:00:00Z", "llm", False),
        ]
        assert (rows[0].calls, rows[0].texts, rows[0].characters, rows[0].input_tokens) == (3, 13, 430, 103)
        assert rows[1].input_tokens == 5 and rows[2] == later
        assert store.usage("c", since="2026-12-01T11:00:00Z") == [later]
        assert store.usage("other") == []
        store.delete_collection("c")
        store.ensure_collection("c")
        assert store.usage("c") == []
