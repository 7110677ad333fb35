"""`plait mcp` in its own process, driven over stdio by the official MCP client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'plait[mcp]'")

import anyio
from http_served import ARTICLE_DOCS, documents
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from plait.service import Plait

SRC = Path(__file__).resolve().parents[2] / "src"
FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"
ROTATE = "How do I rotate an API key?"


def _params(store: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", "from plait.cli import main; main()", "mcp", "--store", store, "--collection", "a", *extra],
        env={"PYTHONPATH": str(SRC)},
    )


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "plait.db")
    with Plait(path, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="a")
        folder = tmp_path / "docs"
        folder.mkdir()
        (folder / "one.md").write_text("# One\n\nThe resolveTenantDB helper.\n", encoding="utf-8")
        engine.index(folder, collection="folder")
        kb = tmp_path / "kb"
        kb.mkdir()
        (kb / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
        engine.index(kb, collection="kb")
        engine.refinery.run("kb", mode="extractive")
        rotate = next(c for c in engine.refinery.cards("kb") if c.question == ROTATE)
        engine.refinery.approve("kb", rotate.id)
    return path


def _run(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    async def main() -> tuple[list[str], list[Any]]:
        async with Client(params) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            results = [await client.call_tool(name, args) for name, args in calls]
            return tools, results

    return anyio.run(main)


def test_tools_over_stdio(store: str) -> None:
    tools, (search, coverage, reindex, listed, missing, invalid) = _run(
        _params(store),
        [
            ("search", {"query": "ERR-4012", "k": 3}),
            ("coverage", {"collection": "folder"}),
            ("reindex", {"collection": "folder"}),
            ("collections", {}),
            ("search", {"query": "x", "collection": "nope"}),
            ("search", {"query": "x", "k": 0}),
        ],
    )
    assert tools == ["ask", "collections", "coverage", "explain", "faq_list", "reindex", "search"]

    assert not search.is_error
    result = search.structured_content
    assert result["collection"] == "a" and result["k"] == 3 and len(result["hits"]) == 3
    top = result["hits"][0]
    assert top["metadata"]["docId"] == "kb-101" and top["match"] == "both" and top["ranks"]["lexical"] == 1
    assert top["origin"] == {"kind": "file", "sourcePath": "kb-101.md", "headingPath": [], "title": "kb-101"}

    (scope,) = coverage.structured_content["scopes"]
    assert (scope["sourcesPresent"], scope["sourcesIndexed"]) == (1, 1)

    report = reindex.structured_content
    assert report["collection"] == "folder" and report["chunksUnchanged"] == 1 and report["chunksAdded"] == 0

    assert [c["name"] for c in listed.structured_content["result"]] == ["a", "folder", "kb"]

    assert missing.is_error
    assert "collection 'nope' does not exist" in missing.content[0].text
    assert invalid.is_error
    assert invalid.content[0].text == "Error executing tool search: k: Input should be greater than or equal to 1 (got 0)"


def test_no_reindex_leaves_the_tool_out(store: str) -> None:
    tools, _ = _run(_params(store, "--no-reindex"), [])
    assert tools == ["ask", "collections", "coverage", "explain", "faq_list", "search"]


def test_usage_tool_only_when_asked_for(store: str) -> None:
    """An agent is a reader; provider usage is a maintainer's figure over HTTP (403 for a
    reader key), so the MCP server offers it only with ``--usage``."""
    tools, (shown,) = _run(_params(store, "--usage"), [("usage", {"collection": "a", "since": "2021-01-01"})])
    assert tools == ["ask", "collections", "coverage", "explain", "faq_list", "reindex", "search", "usage"]
    with Plait(store, embedder="fake") as engine:
        expected = engine.usage("a", since="2021-01-01").model_dump(mode="json", by_alias=True)
    assert not shown.is_error and shown.structured_content == expected
    assert expected["collection"] == "a"


def test_explain_tool_over_stdio(store: str) -> None:
    _, (found, missing) = _run(
        _params(store),
        [
            ("explain", {"query": "ERR-4012", "doc": "kb-101", "k": 3}),
            ("explain", {"query": "ERR-4012", "doc": "kb-999"}),
        ],
    )
    assert not found.is_error
    result = found.structured_content
    assert result["target"] == {"kind": "doc", "value": "kb-101"}
    assert result["lexical"]["rank"] == 1 and result["fusion"]["returned"] is True
    assert missing.structured_content["diagnosis"]["code"] == "not-indexed"


def test_search_tool_takes_the_http_options(store: str) -> None:
    _, (paged, card, bad_weight, bad_rerank) = _run(
        _params(store),
        [
            ("search", {"query": "ERR-4012", "k": 2, "offset": 1, "lexical_weight": "auto", "fusion": "rrf"}),
            ("search", {"query": "how do I rotate my API keys", "collection": "kb", "qa_first": True}),
            ("search", {"query": "x", "lexical_weight": 1.5}),
            ("search", {"query": "x", "rerank": "magic"}),
        ],
    )
    result = paged.structured_content
    # kb-101 is fused position 1; offset 1 pages to positions 2 and 3 (dense-only hits).
    assert [h["ranks"]["fused"] for h in result["hits"]] == [2, 3]
    assert "kb-101" not in [h["metadata"]["docId"] for h in result["hits"]]
    assert [h["ranks"]["lexical"] for h in result["hits"]] == [None, None]

    served = card.structured_content
    assert served["answeredBy"] == "card" and served["hits"] == []
    assert served["card"]["question"] == ROTATE

    assert bad_weight.is_error and "lexicalWeight" in bad_weight.content[0].text
    assert bad_rerank.is_error and "rerank" in bad_rerank.content[0].text


def test_ask_and_faq_list_tools(store: str) -> None:
    _, (answer, cards, approved, drafts, bad_status, missing) = _run(
        _params(store),
        [
            ("ask", {"question": "What does ERR-4012 mean?", "k": 3}),
            ("faq_list", {"collection": "kb"}),
            ("faq_list", {"collection": "kb", "status": "approved"}),
            ("faq_list", {"collection": "kb", "status": "draft"}),
            ("faq_list", {"collection": "kb", "status": "maybe"}),
            ("ask", {"question": "x", "collection": "nope"}),
        ],
    )
    result = answer.structured_content
    assert result["mode"] == "extractive" and result["grounded"] is True
    assert result["answer"] == "ERR-4012: checkout API rejects the cart when the session token expired. [1]"
    (citation,) = result["citations"]
    assert citation["n"] == 1
    assert citation["origin"] == {"kind": "file", "sourcePath": "kb-101.md", "headingPath": [], "title": "kb-101"}
    assert citation["quote"] == "ERR-4012: checkout API rejects the cart when the session token expired."

    # an agent is a reader: approved cards only (15 of the 16 are drafts)
    (listed,) = cards.structured_content["result"]
    (only,) = approved.structured_content["result"]
    assert listed == only and only["question"] == ROTATE and only["status"] == "approved"
    assert drafts.is_error and "an MCP agent is a reader" in drafts.content[0].text

    assert bad_status.is_error
    assert "unknown card status 'maybe'; allowed: draft, approved, rejected" in bad_status.content[0].text
    assert missing.is_error and "collection 'nope' does not exist" in missing.content[0].text


SEARCH_TAKES = (
    "query, collection, k, offset, fusion, lexical_weight, rrf_k, threshold, language_prior, overfetch, scopes, "
    "metadata, rerank, k_overfetch, qa_first, mode, max_per_source, group_by"
)


def test_arguments_are_checked_as_strictly_as_an_http_body(store: str) -> None:
    """The SDK's own argument model read k: true as k=1, ran {"kk": 3} with k=8, let NaN
    through and reported a wrong type in pydantic's multi-line report. Each is now a tool
    error of one line naming the argument, as a 422 of the HTTP API is. (The official
    client sends a float NaN as null, so NaN and infinity go as the strings an agent may
    send; the strictness checks below see both forms.)"""
    _, results = _run(
        _params(store),
        [
            ("search", {"query": "ERR-4012", "k": True}),
            ("search", {"query": "ERR-4012", "kk": 3}),
            ("search", {"query": "ERR-4012", "fusion": "rrf", "lexical_weight": "NaN"}),
            ("search", {"query": "ERR-4012", "k": "many"}),
            ("ask", {"question": "What does ERR-4012 mean?", "k": True}),
            ("ask", {"question": "What does ERR-4012 mean?", "min_cosine": "Infinity"}),
            ("explain", {"query": "ERR-4012", "doc": "kb-101", "fusion": "rrf", "offset": False}),
            ("faq_list", {"collection": "kb", "statuss": "draft"}),
            ("ask", {"question": "   "}),
            ("ask", {"question": "What does ERR-4012 mean?", "min_term_coverage": 2}),
            ("search", {"query": "ERR-4012", "max_per_source": 0, "group_by": "file"}),
            ("search", {"query": "ERR-4012", "qa_first": "yes"}),  # was read as true
            ("search", {"query": "ERR-4012", "k": 2, "fusion": "rrf", "lexical_weight": 0.5, "scopes": None}),
        ],
    )
    *refused, valid = results
    assert [r.is_error for r in refused] == [True] * 12
    assert [r.content[0].text for r in refused] == [
        "Error executing tool search: k: expected a number, got true",
        f"Error executing tool search: unknown argument 'kk'; search takes: {SEARCH_TAKES}",
        "Error executing tool search: lexical_weight: expected a finite number, got nan",
        "Error executing tool search: k: Input should be a valid integer, unable to parse string as an integer"
        " (got 'many')",
        "Error executing tool ask: k: expected a number, got true",
        "Error executing tool ask: min_cosine: expected a finite number, got inf",
        "Error executing tool explain: offset: expected a number, got false",
        "Error executing tool faq_list: unknown argument 'statuss'; faq_list takes: collection, status",
        # the request model's check: it read "question: Value error, question is empty"
        "Error executing tool ask: question: question is empty (got ' ')",  # one line: spaces collapse
        # the engine's checks name the HTTP API's fields; they said minTermCoverage,
        # maxPerSource and groupBy, which no tool takes
        "Error executing tool ask: min_term_coverage: Input should be less than or equal to 1 (got 2)",
        "Error executing tool search: max_per_source: Input should be greater than or equal to 1 (got 0); "
        "group_by: Input should be 'source' (got 'file')",
        "Error executing tool search: qa_first: Input should be a valid boolean (got 'yes')",
    ]
    assert not valid.is_error
    result = valid.structured_content
    assert result["k"] == 2 and len(result["hits"]) == 2
    assert result["fusion"]["method"] == "rrf" and result["fusion"]["lexicalWeight"] == 0.5
    assert result["hits"][0]["metadata"]["docId"] == "kb-101"


def test_fusion_objects_and_explain_under_the_searchs_fusion(store: str) -> None:
    """search's ``fusion`` took a method name only (no denseWeight for minmax, dbsf or
    adaptive) and explain had no ``fusion``, so an agent could not explain under the fusion
    it searched with. Both take a method name or the HTTP API's fusion object, checked by the
    engine's request model: its one-line errors, and a number inside it is a JSON number."""
    minmax = {"method": "minmax", "denseWeight": 0.8}
    query = "why was my card payment declined"
    _, (searched, explained, default, bare, *refused) = _run(
        _params(store),
        [
            ("search", {"query": query, "k": 1, "fusion": minmax}),
            ("explain", {"query": query, "doc": "kb-104", "k": 1, "fusion": minmax}),
            ("explain", {"query": query, "doc": "kb-104", "k": 1}),
            ("search", {"query": query, "k": 1, "fusion": {"denseWeight": 0.8}}),
            ("search", {"query": query, "fusion": {"method": "minmax", "denseWeight": True}}),
            ("search", {"query": query, "fusion": 3}),
            ("explain", {"query": query, "doc": "kb-104", "fusion": {"method": "rrf", "denseWeight": 0.5}}),
            ("explain", {"query": query, "doc": "kb-104", "fusion": minmax, "lexical_weight": 0.3}),
            ("search", {"query": query, "fusion": {"method": "minmax", "denseWeight": "NaN"}}),
        ],
    )
    # kb-104: lexical 2 of the 2 lexical candidates (min-max 0), dense 1 (min-max 1):
    # 0.2·0 + 0.8·1 = 0.8, fused 1 (kb-102, lexical 1 and dense 2, scores less)
    result = searched.structured_content
    (hit,) = result["hits"]
    assert (hit["metadata"]["docId"], hit["ranks"]["lexical"], hit["ranks"]["dense"], hit["ranks"]["fused"]) == (
        "kb-104", 2, 1, 1)
    assert hit["score"] == pytest.approx(0.8)
    assert result["fusionAsked"] == {"fusion": minmax}
    assert (result["fusionDecided"]["method"], result["fusionDecided"]["parameters"]) == (
        "minmax", {"denseWeight": 0.8, "overfetch": 50})
    fusion = explained.structured_content["fusion"]
    settings = fusion["settings"]
    assert (settings["method"], settings["denseWeight"], settings["denseWeightUsed"]) == ("minmax", 0.8, 0.8)
    assert (fusion["rank"], fusion["returned"]) == (1, True) and fusion["score"] == pytest.approx(hit["score"])
    # without it, explain traced another search: the default adaptive fusion puts kb-104 second
    assert default.structured_content["fusion"]["settings"]["method"] == "adaptive"
    assert (default.structured_content["fusion"]["rank"], default.structured_content["fusion"]["returned"]) == (
        2, False)
    # an object without a method: the collection's own (here the default adaptive) with its knob
    decided = bare.structured_content["fusionDecided"]
    assert (decided["method"], decided["methodFrom"], decided["parameters"]["denseWeight"]) == (
        "adaptive", "default", 0.8)
    assert [r.is_error for r in refused] == [True] * 5
    assert [r.content[0].text for r in refused] == [
        "Error executing tool search: fusion: denseWeight: expected a number, got true",
        "Error executing tool search: fusion: fusion is a method name ('rrf', 'weighted', 'minmax', 'dbsf' or "
        "'adaptive') or a fusion object (got 3)",
        "Error executing tool explain: fusion: denseWeight does not apply to fusion 'rrf' (fusion object): "
        "it takes k, lexicalWeight",
        "Error executing tool explain: lexicalWeight given beside a fusion object: put the knobs inside it "
        "(fusion 'minmax' takes denseWeight)",
        "Error executing tool search: fusion: denseWeight: expected a finite number, got nan",
    ]
