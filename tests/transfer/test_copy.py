"""Issue 27 items 1 and 5: ``copy_collection`` between every pair of real stores, with no
embedding call, verified, refusing a non-empty target unless ``replace``."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from plait.api.keys import KeyStore
from plait.copying import copy_collection, copy_usage
from plait.embeddings.base import TextKind
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConflictError, ModelMismatchError
from plait.refinery.models import CardMode
from plait.refinery.store import RefineryStore
from plait.service import Plait
from plait.stores.base import Store
from plait.testing.contract import make_chunk
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.usage import UsageRow

from .conftest import StoreFactory


class RaisingEmbedder(FakeEmbedder):
    """The model the collection was indexed with, but any embedding call fails the test."""

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        raise AssertionError(f"copy embedded {len(texts)} texts")


USAGE = [
    UsageRow(bucket="2026-11-30T09:00:00Z", kind="embedding", purpose="index", provider="ollama",
             model="nomic-embed-text", calls=3, texts=12, characters=4800, input_tokens=1200),
    UsageRow(bucket="2026-11-30T10:00:00Z", kind="llm", purpose="ask", provider="openai", model="gpt-4o-mini",
             estimated=True, calls=1, texts=1, characters=400, input_tokens=100, output_tokens=20),
]


def fill(store: Store) -> tuple[str, str]:
    """The article's documents in collection kb, a card, a run, a kb key and a * key, a
    saved fusion setting, two usage rows. Returns (kb token, * token)."""
    engine = Plait(store, embedder=FakeEmbedder(dimension=16))  # not closed: that would close the store
    engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    first = store.chunk_ids("kb")[0]
    store.update_settings("kb", {"fusion": {"method": "rrf", "rrfK": 30}})
    refinery = RefineryStore(store.records())
    run = refinery.create_run("kb", CardMode.EXTRACTIVE)
    refinery.add_card("kb", question="What does ERR-4012 mean?", answer="down", sources=[first],
                      mode=CardMode.EXTRACTIVE, run_id=run.id)
    keys = KeyStore(store.records())
    _, token = keys.create(role="reader", collection="kb")
    _, everything = keys.create(role="admin", collection="*")
    keys.create(role="reader", collection="other")  # not copied: it does not cover kb
    store.add_usage("kb", USAGE)
    return token, everything


def _top(store: Store, query: str) -> list[str]:
    engine = Plait(store, embedder=FakeEmbedder(dimension=16))
    return [h.chunk_id for h in engine.search(query, collection="kb", k=5).hits]


PAIRS = [
    ("sqlite", "postgres"), ("postgres", "sqlite"), ("sqlite", "milvus"),
    ("milvus", "sqlite"), ("postgres", "milvus"), ("milvus", "postgres"), ("sqlite", "sqlite"),
]


@pytest.mark.parametrize(("from_kind", "to_kind"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_copy_moves_everything_without_embedding(make_store: StoreFactory, from_kind: str, to_kind: str) -> None:
    source, target = make_store(from_kind), make_store(to_kind)
    token, everything = fill(source)
    engine = Plait(source, embedder=RaisingEmbedder(dimension=16))
    seen: list[tuple[int, int]] = []
    report = engine.copy_collection(target, collection="kb", progress=lambda d, t, c: seen.append((d, t)))
    n = len(ARTICLE_DOCS)
    assert (report.sources_copied, report.sources_already_there, report.chunks_copied) == (n, 0, n)
    assert (report.vectors_copied, report.runs, report.cards, report.keys, report.usage_rows) == (n, 1, 1, 2, 2)
    assert target.usage("kb") == source.usage("kb") == USAGE
    assert seen == [(i, n) for i in range(1, n + 1)]
    check = report.verification
    assert check is not None and check.ok, check
    assert (check.target_chunks, check.target_sources, check.target_without_vector) == (n, n, 0)
    assert check.queries == n and check.query_mismatches == [] and check.checksum_mismatches == []
    a, b = source.get_collection("kb"), target.get_collection("kb")
    assert a is not None and b is not None
    assert (b.embedder_provider, b.embedder_model, b.dimension) == (a.embedder_provider, a.embedder_model, 16)
    ids = source.chunk_ids("kb")
    hashes = [c.content_hash for c in source.get_chunks("kb", ids).values()]
    left, right = source.vectors_by_hash("kb", hashes), target.vectors_by_hash("kb", hashes)
    assert sorted(left) == sorted(right) and all(np.allclose(left[h], right[h], atol=1e-6) for h in left)
    assert source.get_chunks("kb", ids) == target.get_chunks("kb", ids)
    copied = dict(target.get_settings("kb"))
    assert "copyInProgress" not in copied and copied == source.get_settings("kb")  # the finished marker leaves no null
    assert [s.scope for s in target.scopes("kb")] == [s.scope for s in source.scopes("kb")]
    assert [(c.question, c.run_id is not None) for c in RefineryStore(target.records()).list_cards("kb")] == [
        ("What does ERR-4012 mean?", True)
    ]
    keys = KeyStore(target.records())
    assert keys.authenticate(token) is not None and keys.authenticate(everything) is not None
    assert sorted(k.collection for k in keys.list_keys()) == ["*", "kb"]
    for query in ("ERR-4012", "bank rejected my purchase"):
        before, after = _top(source, query), _top(target, query)
        if "milvus" in (from_kind, to_kind):
            # Milvus scores BM25 itself (float32, its own idf rounding): each arm's top 10 is
            # the same (verified above), fused near-ties may swap below the first hit
            assert after[0] == before[0] and sorted(after) == sorted(before)
        else:
            assert after == before
    # the target is not empty any more: refused, then replaced on request
    with pytest.raises(ConflictError, match=r"already holds 5 chunks of 5 sources: pass --replace"):
        engine.copy_collection(target, collection="kb")
    again = engine.copy_collection(target, collection="kb", replace=True)
    assert again.sources_copied == n and again.verification is not None and again.verification.ok
    assert again.cards == 1 and len(RefineryStore(target.records()).list_cards("kb")) == 1
    assert target.usage("kb") == USAGE  # replaced, not added up


def test_copy_usage_adds_the_source_rows_to_what_the_target_holds(make_store: StoreFactory) -> None:
    """The target's own calls in the same hour stay counted (review 1, finding 7: it wrote
    source minus target); once-only is copy_collection's marker (test_copy_review)."""
    source, target = make_store("sqlite"), make_store("sqlite")
    for store in (source, target):
        store.ensure_collection("kb")
    source.add_usage("kb", USAGE)
    target.add_usage("kb", [USAGE[0].model_copy(update={"calls": 2, "texts": 12, "characters": 4000, "input_tokens": 700})])
    assert copy_usage(source, target, "kb") == 2
    assert [(r.calls, r.texts, r.characters, r.input_tokens) for r in target.usage("kb")] == [
        (5, 24, 8800, 1900), (1, 1, 400, 100)
    ]
    target.ensure_collection("renamed")
    assert copy_usage(source, target, "kb", target_name="renamed") == 2
    assert [(r.calls, r.input_tokens, r.output_tokens) for r in target.usage("renamed")] == [(3, 1200, 0), (1, 100, 20)]


def test_a_copy_to_milvus_of_look_alike_chunks_verifies(make_store: StoreFactory) -> None:
    """200 chunks drawn from 12 words: many chunks score close to the 10th lexical hit.
    The verification compares the production path (limit=10); Milvus's limited lexical
    arm used to score a field a chunk missed with a search filtered to that chunk (BM25
    over the filtered subset, inflated), and now reads the fields' unfiltered lists deep
    enough to be exact (plait.stores.field_topk)."""
    pytest.importorskip("milvus_lite")
    source, target = make_store("sqlite"), make_store("milvus")
    words = ["checkout", "payment", "declined", "card", "token", "session", "refund", "ledger",
             "invoice", "ERR-4012", "SKU-88213-B", "resolve_tenant_db"]
    rng = random.Random(7)
    source.ensure_collection("kb")
    source.set_embedder("kb", provider="fake", model="random-4", dimension=4)
    for s in range(4):
        sid = f"doc{s}.md"
        source.replace_source("kb", sid, "docs", [
            make_chunk(f"c{s}-{i}", " ".join(rng.choice(words) for _ in range(40)), source_id=sid,
                       vector=_unit([rng.uniform(-1, 1) for _ in range(4)]), ordinal=i)
            for i in range(50)
        ])
    report = copy_collection(source, target, "kb", sample_queries=10)
    assert report.verification is not None and report.verification.query_mismatches == [], report.verification
    assert report.verification.ok


def _unit(values: list[float]) -> list[float]:
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


@pytest.mark.parametrize("to_kind", ["sqlite", "postgres"])
def test_copy_embedder_must_be_the_collections_model(make_store: StoreFactory, to_kind: str) -> None:
    """``copy_collection(embedder=...)`` (``plait copy --embedder``) was accepted and dropped:
    the vectors went over whatever it named. A copy embeds nothing, so it must be the model
    of the collection's vectors: another one (or none) is refused before the target is
    touched; a collection never embedded takes it as the copy's embedder."""
    source, target = make_store("sqlite"), make_store(to_kind)
    Plait(source, embedder="fake").index_documents(documents(ARTICLE_DOCS), collection="kb")  # fake/hash-64, 64-d
    said = {"e5": "local/multilingual-e5-small (384-d)", "none": "none (no vectors)"}
    for name, model in said.items():
        with pytest.raises(ModelMismatchError) as refused:
            copy_collection(source, target, "kb", embedder=name)
        assert str(refused.value) == (
            f"the vectors of collection 'kb' are from fake/hash-64 (64-d); embedder {name!r} is {model}. A "
            "collection's vectors come from one model and a copy embeds nothing: leave the embedder out, or "
            "name the collection's, 'fake'"
        )
    assert target.list_collections() == []  # nothing written, not even the copy's identity probe
    report = copy_collection(source, target, "kb", embedder="fake")
    assert (report.chunks_copied, report.vectors_copied) == (5, 5)
    assert report.verification is not None and report.verification.ok
    Plait(source, embedder="none").index_documents(documents({"z": "zebra crossing"}), collection="plain")
    report = copy_collection(source, target, "plain", embedder="fake")
    assert (report.chunks_copied, report.vectors_copied) == (1, 0)
    assert report.verification is not None and report.verification.ok
    plain = target.get_collection("plain")
    assert plain is not None
    assert (plain.embedder_provider, plain.embedder_model, plain.dimension, plain.chunks_without_vector) == (
        "fake", "hash-64", 64, 1
    )
    assert target.get_settings("plain")["embedder"] == "fake"
    assert "embedder" not in source.get_settings("plain")  # the source is as it was
