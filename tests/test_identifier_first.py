"""Identifier precedence (plait.retrieval.identifier_first): a chunk holding the query's
exact identifier is not ranked below a look-alike the dense arm prefers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from plait.embeddings.fake import FakeEmbedder
from plait.fusion import Fused
from plait.retrieval.identifier_first import PRECEDENCE_DEPTH, identifier_first, query_identifiers
from plait.service import Plait
from plait.testing.corpus import documents

DIM = 8


def angle(degrees: float) -> list[float]:
    r = math.radians(degrees)
    v = np.zeros(DIM)
    v[0], v[1] = math.cos(r), math.sin(r)
    return list(v)


def _fused(ids: str) -> list[Fused]:
    return [Fused(c, 1.0 - n / 100, None, n + 1, None, 0.9) for n, c in enumerate(ids)]


def test_query_identifiers_are_the_exact_field_terms_of_identifier_tokens() -> None:
    assert query_identifiers("Why does ERR-4012. fire in resolveTenantDB?") == ("err-4012", "resolvetenantdb")
    assert query_identifiers("set AUTHENTICATION_FALLBACK, then AUTHENTICATION_FALLBACK again") == ("authentication_fallback",)
    # prose hyphenation, plain numbers and ordinary words are not identifiers
    assert query_identifiers("a well-known outage in 1964 and 1,000 users") == ()
    # short names the literature spells several ways are left to fusion (SciFact test lost 0.009 with them)
    assert query_identifiers("does IL-6 bind p53 or BRCA1 after COVID-19 in mRNA assays?") == ()
    assert query_identifiers("v3.11.2 and plait.search and PIX-2024-88317") == ("v3.11.2", "plait.search", "pix-2024-88317")


def test_holders_move_ahead_in_fused_order_and_the_rest_keep_theirs() -> None:
    contents = {"a": "nothing", "b": "uses ERR-7 here", "c": "plain", "d": "err-7 and more"}
    order, moved = identifier_first(_fused("abcd"), contents, ["err-7"])
    assert [f.chunk_id for f in order] == ["b", "d", "a", "c"]
    assert moved == ["b", "d"]


def test_every_identifier_must_be_held() -> None:
    contents = {"a": "ERR-7 only", "b": "ERR-7 and ERR-8", "c": "ERR-8 only"}
    order, moved = identifier_first(_fused("abc"), contents, ["err-7", "err-8"])
    assert [f.chunk_id for f in order] == ["b", "a", "c"] and moved == ["b"]


def test_nothing_moves_outside_the_window_or_when_all_or_none_hold() -> None:
    ids = "abcdefghijkl"  # 12 candidates; only the 12th holds the identifier
    contents = dict.fromkeys(ids, "text") | {"l": "ERR-7"}
    order, moved = identifier_first(_fused(ids), contents, ["err-7"])
    assert PRECEDENCE_DEPTH == 10 and [f.chunk_id for f in order] == list(ids) and moved == []
    everyone = dict.fromkeys("abc", "ERR-7")
    assert identifier_first(_fused("abc"), everyone, ["err-7"])[1] == []
    assert identifier_first(_fused("abc"), {}, ["err-7"])[1] == []
    assert identifier_first(_fused("abc"), everyone, [])[1] == []


def _engine_docs() -> dict[str, str]:
    return {
        "look": "AUTHENTICATION_FALLBACK_FOR_JOBSEEKERS switches jobseekers to the contingency sign-in",
        "exact": "Set AUTHENTICATION_FALLBACK to true and hiring staff sign in through the contingency path",
        "near": "the contingency sign-in page lists who to call",
        "far": "deploys happen on Tuesdays",
    }


def _fake(docs: dict[str, str], query: str) -> FakeEmbedder:
    # dense: the look-alike first, another chunk second, the exact holder third
    overrides = {query: angle(0), docs["look"]: angle(1), docs["near"]: angle(5), docs["exact"]: angle(10),
                 docs["far"]: angle(80)}
    return FakeEmbedder(dimension=DIM, overrides=overrides)


def test_search_puts_the_exact_identifier_first_and_says_why(tmp_path: Path) -> None:
    docs = _engine_docs()
    query = "AUTHENTICATION_FALLBACK"
    with Plait(str(tmp_path / "p.db"), embedder=_fake(docs, query)) as engine:
        engine.index_documents(documents(docs))
        # dense-heavy RRF: look 1.96/61 = 0.03213 > exact 1.96/63 + 0.04/61 = 0.03177 by fusion alone
        result = engine.search(query, k=4, fusion="rrf", lexical_weight=0.02)
        explained = engine.explain(query, doc="exact", k=4, fusion="rrf", lexical_weight=0.02)
    order = [h.metadata["docId"] for h in result.hits]
    assert order[0] == "exact" and order.index("look") > 0
    assert result.hits[0].ranks.fused == 1 and result.hits[0].ranks.lexical == 1 and result.hits[0].ranks.dense == 3
    reason = result.fusion.identifier_reason
    assert reason is not None and "authentication_fallback" in reason
    assert explained.fusion.rank == 1 and explained.fusion.settings.identifier_reason == reason


def test_a_query_without_identifiers_is_fused_as_before(tmp_path: Path) -> None:
    docs = _engine_docs()
    query = "contingency sign in for staff"
    with Plait(str(tmp_path / "p.db"), embedder=_fake(docs, query)) as engine:
        engine.index_documents(documents(docs))
        result = engine.search(query, k=4, fusion="rrf", lexical_weight=0.02)
    assert result.fusion.identifier_reason is None
    assert [h.ranks.fused for h in result.hits] == [1, 2, 3, 4]
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
