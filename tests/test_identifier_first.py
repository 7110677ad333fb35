"""Identifier precedence (plait.retrieval.identifier_first): a chunk holding the query's
exact identifier is not ranked below a look-alike the dense arm prefers."""

from __future__ import annotations

from pathlib import Path

import pytest

from angles import DIM, angle
from plait.analysis import analyse
from plait.embeddings.fake import FakeEmbedder
from plait.fusion import Fused
from plait.retrieval.identifier_first import PRECEDENCE_DEPTH, holder_text, identifier_first, query_identifiers
from plait.service import Plait
from plait.testing.corpus import documents


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
    order, moved, held = identifier_first(_fused("abcd"), contents, ["err-7"])
    assert [f.chunk_id for f in order] == ["b", "d", "a", "c"]
    assert moved == ["b", "d"] and held == ["b", "d"]


def test_a_holder_already_ahead_is_held_but_does_not_move() -> None:
    contents = {"a": "ERR-7 first", "b": "plain", "c": "err-7 later", "d": "plain too"}
    order, moved, held = identifier_first(_fused("abcd"), contents, ["err-7"])
    assert [f.chunk_id for f in order] == ["a", "c", "b", "d"]
    assert moved == ["c"] and held == ["a", "c"]


def test_every_identifier_must_be_held() -> None:
    contents = {"a": "ERR-7 only", "b": "ERR-7 and ERR-8", "c": "ERR-8 only"}
    order, moved, held = identifier_first(_fused("abc"), contents, ["err-7", "err-8"])
    assert [f.chunk_id for f in order] == ["b", "a", "c"] and moved == held == ["b"]


def test_nothing_moves_outside_the_window_or_when_all_or_none_hold() -> None:
    ids = "abcdefghijkl"  # 12 candidates; only the 12th holds the identifier
    contents = dict.fromkeys(ids, "text") | {"l": "ERR-7"}
    order, moved, held = identifier_first(_fused(ids), contents, ["err-7"])
    assert PRECEDENCE_DEPTH == 10 and [f.chunk_id for f in order] == list(ids) and moved == held == []
    everyone = dict.fromkeys("abc", "ERR-7")
    assert identifier_first(_fused("abc"), everyone, ["err-7"])[1:] == ([], [])
    assert identifier_first(_fused("abc"), {}, ["err-7"])[1:] == ([], [])
    assert identifier_first(_fused("abc"), everyone, [])[1:] == ([], [])


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


def test_the_reason_counts_every_holder_and_the_cli_says_the_hits_were_reordered(tmp_path: Path) -> None:
    """Two chunks hold the identifier, one already first: the reason said "1 of the first 4
    fused chunks hold every identifier" (it counted the chunk that moved), and the search's
    text output, whose scores were then out of rank order, never said why."""
    from plait.cli.options import console
    from plait.cli.search import _print_result

    docs = {"first": "ERR-4012 rejects the cart", "other": "the cart page lists prices",
            "second": "retry after ERR-4012 expires", "far": "deploys happen on Tuesdays"}
    query = "ERR-4012"
    overrides = {query: angle(0), docs["first"]: angle(1), docs["other"]: angle(5), docs["second"]: angle(10),
                 docs["far"]: angle(80)}
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=DIM, overrides=overrides)) as engine:
        engine.index_documents(documents(docs))
        # RRF, lexical weight 0.01: other 0.99/62 = 0.01597 > second 0.99/63 + 0.01/(60 + 1 or 2) ≈ 0.01587
        result = engine.search(query, k=4, fusion="rrf", lexical_weight=0.01)
    assert [h.metadata["docId"] for h in result.hits] == ["first", "second", "other", "far"]
    assert result.hits[1].score < result.hits[2].score  # second moved up past other's higher fused score
    assert result.fusion.identifier_reason == (
        "2 of the first 4 fused chunks hold every identifier of the query (err-4012) and rank ahead of the 2 "
        "that do not, each group in fused order (1 moved up; the scores stay the fused ones)"
    )
    with console.capture() as captured:
        _print_result(result, False)
    assert f"identifier precedence reordered the hits: {result.fusion.identifier_reason}" in " ".join(
        captured.get().split()
    )


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


def test_pages_reorder_the_same_window_whatever_their_size(tmp_path: Path) -> None:
    # overfetch 2: a page of 2 would fuse only 2 candidates; with an identifier the search
    # fuses the whole window, so five pages of 2 are the one page of 10, cut in five
    docs = {f"d{i:02d}": f"contingency note {i} " + ("ERR-4012 appears here" if i % 3 == 0 else "nothing else")
            for i in range(14)}
    query = "what is ERR-4012"
    overrides = {query: angle(0)} | {text: angle(3 * n) for n, text in enumerate(docs.values())}
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=DIM, overrides=overrides)) as engine:
        engine.index_documents(documents(docs))
        whole = engine.search(query, k=10, overfetch=2, fusion="rrf", lexical_weight=0.2)
        pages = [engine.search(query, k=2, offset=o, overfetch=2, fusion="rrf", lexical_weight=0.2) for o in range(0, 10, 2)]
    assert whole.fusion.identifier_reason is not None
    assert [h.chunk_id for p in pages for h in p.hits] == [h.chunk_id for h in whole.hits]
    assert [h.ranks.fused for p in pages for h in p.hits] == list(range(1, 11))


def test_a_holder_is_judged_on_what_the_lexical_arm_indexes(tmp_path: Path) -> None:
    # escaped Markdown: the lexical arm reads AUTHENTICATION_FALLBACK; so does the precedence
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "dsi.md").write_text("# DSI\n\nSet AUTHENTICATION\\_FALLBACK to true for hiring staff.\n", encoding="utf-8")
    (folder / "jobseekers.md").write_text("# Jobseekers\n\nSet AUTHENTICATION_FALLBACK_FOR_JOBSEEKERS to true.\n", encoding="utf-8")
    query = "AUTHENTICATION_FALLBACK"
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=DIM)) as engine:
        engine.index(folder)
        hits = engine.search(query, k=5, mode="lexical").hits
        found = engine.store.get_chunks("default", [h.chunk_id for h in hits])
    chunks = {c.origin.source_path: c for c in found.values()}  # type: ignore[union-attr]
    assert hits[0].origin.source_path == "dsi.md"  # type: ignore[union-attr]  # the lexical arm matched the escaped spelling
    assert "authentication_fallback" in set(analyse(holder_text(chunks["dsi.md"])).exact)
    assert "authentication_fallback" not in set(analyse(chunks["dsi.md"].content).exact)  # the raw text splits it


def test_the_window_is_read_with_the_page_in_one_store_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _engine_docs()
    query = "AUTHENTICATION_FALLBACK"
    with Plait(str(tmp_path / "p.db"), embedder=_fake(docs, query)) as engine:
        engine.index_documents(documents(docs))
        calls: list[list[str]] = []
        real = engine.store.get_chunks

        def spy(collection: str, ids: list[str]) -> dict[str, object]:
            calls.append(list(ids))
            return real(collection, ids)  # type: ignore[return-value]

        monkeypatch.setattr(engine.store, "get_chunks", spy)
        result = engine.search(query, k=2, offset=1, fusion="rrf", lexical_weight=0.02)
    assert result.fusion.identifier_reason is not None and len(calls) == 1
    assert len(calls[0]) == 4  # the window (all 4 fused) and the page within it: nothing before it twice
