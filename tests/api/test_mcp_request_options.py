"""The MCP tools take the HTTP API's request fields (walk-through stop 43).

``explain`` had no ``offset``, ``rerank`` or ``k_overfetch``, so it could not explain the
page or the rerank of the search an agent ran; no tool had ``rrf_k``, ``overfetch``,
``threshold`` or ``metadata``. Each is driven here through ``plait mcp`` over stdio with
the official MCP client, and the same request through the HTTP API (a real server over the
same store): the result is the same and changes as hand-computed, and a bad value is the
422's own line, the field named as the tool's argument.

Query ``ERR-4012 checkout session token`` over the article's five documents (fake
embedder): the lexical arm finds kb-101 (BM25 8.3319) and kb-105 (4.4122), the dense arm
ranks kb-101, kb-105, kb-102, kb-104, kb-103 (cosines 0.3685 and 0.1875 for the first two).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'plait[mcp]'")

import anyio
import httpx
from http_served import ARTICLE_DOCS, documents
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from pydantic.alias_generators import to_camel

from plait.api.http import create_app
from plait.ask import AskRequest
from plait.llm import OllamaLLM
from plait.retrieval.request import SearchRequest
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.testing.asgi_server import UvicornThread
from plait.testing.wire import WireServer
from plait.types import FileOrigin

SRC = Path(__file__).resolve().parents[2] / "src"
QUERY = "ERR-4012 checkout session token"


def _reverse(messages: list[dict[str, Any]]) -> str:
    """The listwise reranker's answer: the candidates it was given, in reverse order."""
    labels = [int(n) for n in re.findall(r"^\[(\d+)\] ", messages[-1]["content"], re.MULTILINE)]
    return json.dumps(labels[::-1])


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def llm() -> Iterator[str]:
    """An Ollama-speaking server whose chat reverses the candidates (a reranker that demotes)."""
    with WireServer(chat=_reverse) as server:
        yield server.url


def _part(source: str, text: str, *heading: str) -> SourcePart:
    return SourcePart(text=text, origin=FileOrigin(source_path=f"{source}.md", title=source, heading_path=list(heading)))


#: Collection 'g': source a in two chunks, both above b's one for "refund window".
TWO_CHUNKS = [
    SourceDocument(source_id="a", scope="docs", metadata={"docId": "a"}, parts=(
        _part("a", "Refund window: a refund within the refund window of 30 days.", "Window"),
        _part("a", "Refund window exceptions: the refund window is 60 days for annual plans.", "Exceptions"),
    )),
    SourceDocument(source_id="b", scope="docs", metadata={"docId": "b"}, parts=(
        _part("b", "Shipping window and a refund note."),
    )),
]


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "plait.db")
    with Plait(path, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="a")
        engine.index_documents(TWO_CHUNKS, collection="g")
    return path


def _mcp(store: str, llm: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each call's result from ``plait mcp`` (stdio, the official client), LLM ``llm``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from plait.cli import main; main()", "mcp", "--store", store, "--collection", "a"],
        env={"PYTHONPATH": str(SRC), "PLAIT_LLM": "ollama", "PLAIT_OLLAMA_URL": llm},
    )

    async def main() -> list[Any]:
        async with Client(params) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def _http(store: str, llm: str, calls: list[tuple[str, dict[str, Any]]]) -> list[httpx.Response]:
    """Each call as the HTTP API's body (camelCase) to ``POST /v1/collections/<collection>/<tool>``
    (the tool's ``collection`` argument, else 'a')."""
    with (
        Plait(store, embedder="fake", llm=OllamaLLM(base_url=llm)) as engine,
        UvicornThread(create_app(engine, auth=False)) as server,
    ):
        return [
            httpx.post(
                f"{server.url}/v1/collections/{args.get('collection', 'a')}/{tool}",
                json={to_camel(name): value for name, value in args.items() if name != "collection"},
                timeout=30,
            )
            for tool, args in calls
        ]


def _untimed(value: Any) -> Any:
    """``value`` without its ``timingsMs`` (the one part two runs of a search differ in)."""
    if isinstance(value, dict):
        return {key: _untimed(item) for key, item in value.items() if key != "timingsMs"}
    if isinstance(value, list):
        return [_untimed(item) for item in value]
    return value


def _both(store: str, llm: str, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each call's result, the same over MCP as over HTTP (asserted here)."""
    results = []
    for (tool, args), tool_result, response in zip(calls, _mcp(store, llm, calls), _http(store, llm, calls), strict=True):
        assert response.status_code == 200, (tool, args, response.text)
        assert not tool_result.is_error, (tool, args, tool_result.content)
        assert _untimed(tool_result.structured_content) == _untimed(response.json()), (tool, args)
        results.append(response.json())
    return results


def _refused(store: str, llm: str, calls: list[tuple[str, dict[str, Any], str, str]]) -> None:
    """Each call is a 422 over HTTP with the first message, and a tool error over MCP with
    the second (the same line, naming the field as the tool's argument)."""
    plain = [(tool, args) for tool, args, _, _ in calls]
    outcomes = zip(calls, _mcp(store, llm, plain), _http(store, llm, plain), strict=True)
    for (tool, args, over_http, over_mcp), tool_result, response in outcomes:
        assert (response.status_code, response.json()) == (422, {"error": over_http}), (tool, args)
        assert tool_result.is_error, (tool, args)
        assert tool_result.content[0].text == f"Error executing tool {tool}: {over_mcp}", (tool, args)


def _ids(result: dict[str, Any]) -> list[str]:
    return [hit["metadata"]["docId"] for hit in result["hits"]]


def test_explain_describes_the_page_and_the_rerank_of_the_search_it_explains(store: str, llm: str) -> None:
    """kb-105 is fused position 2: cut from the first page of k 1, returned on the page at
    offset 1. Reranked (the fused top max(k 2, k_overfetch 5), reversed by the LLM),
    kb-101 falls from 1 to 5 and out of the top 2."""
    paged, first_page, page_two, reranked = _both(store, llm, [
        ("search", {"query": QUERY, "k": 1, "offset": 1}),
        ("explain", {"query": QUERY, "doc": "kb-105", "k": 1}),
        ("explain", {"query": QUERY, "doc": "kb-105", "k": 1, "offset": 1}),
        ("explain", {"query": QUERY, "doc": "kb-101", "k": 2, "rerank": "llm", "k_overfetch": 5}),
    ])
    assert _ids(paged) == ["kb-105"] and paged["hits"][0]["ranks"]["fused"] == 2
    fusion = first_page["fusion"]
    assert (fusion["rank"], fusion["offset"], fusion["returned"], fusion["droppedBy"]) == (2, 0, False, "top-k")
    fusion = page_two["fusion"]
    assert (fusion["rank"], fusion["offset"], fusion["returned"], fusion["droppedBy"]) == (2, 1, True, None)
    assert page_two["diagnosis"]["code"] == "found"
    rerank = reranked["rerank"]
    assert (rerank["method"], rerank["reranked"], rerank["kOverfetch"]) == ("llm", True, 5)
    assert (rerank["rankBefore"], rerank["rankAfter"]) == (1, 5)
    assert reranked["fusion"]["returned"] is False and reranked["diagnosis"]["code"] == "rerank-demoted"

    _refused(store, llm, [
        ("explain", {"query": QUERY, "doc": "kb-101", "offset": -1},
         "offset: Input should be greater than or equal to 0 (got -1)",
         "offset: Input should be greater than or equal to 0 (got -1)"),
        ("explain", {"query": QUERY, "doc": "kb-101", "offset": 1001},
         "offset: Input should be less than or equal to 1000 (got 1001)",
         "offset: Input should be less than or equal to 1000 (got 1001)"),
        ("explain", {"query": QUERY, "doc": "kb-101", "rerank": "magic"},
         "rerank: Input should be 'llm' or 'cross-encoder' (got 'magic')",
         "rerank: Input should be 'llm' or 'cross-encoder' (got 'magic')"),
        ("explain", {"query": QUERY, "doc": "kb-101", "rerank": "llm", "k_overfetch": 0},
         "kOverfetch: Input should be greater than or equal to 1 (got 0)",
         "k_overfetch: Input should be greater than or equal to 1 (got 0)"),
        ("explain", {"query": QUERY, "doc": "kb-101", "k_overfetch": True},
         "kOverfetch: expected a number, got true",
         "k_overfetch: expected a number, got true"),
    ])


def test_explain_counts_sources_when_the_search_groups_by_source(store: str, llm: str) -> None:
    """Fused order a (chunk 1), a (chunk 2), b: at k 2, b is cut from the chunks and
    returned among the sources (a, b) when the search groups by source."""
    grouped, by_chunk, by_source = _both(store, llm, [
        ("search", {"query": "refund window", "collection": "g", "k": 2, "group_by": "source"}),
        ("explain", {"query": "refund window", "collection": "g", "doc": "b", "k": 2}),
        ("explain", {"query": "refund window", "collection": "g", "doc": "b", "k": 2, "group_by": "source"}),
    ])
    assert _ids(grouped) == ["a", "a", "b"] and [h["ranks"]["fused"] for h in grouped["hits"]] == [1, 2, 3]
    assert (by_chunk["fusion"]["rank"], by_chunk["fusion"]["returned"], by_chunk["fusion"]["droppedBy"]) == (
        3, False, "top-k")
    assert (by_source["fusion"]["rank"], by_source["fusion"]["returned"]) == (3, True)
    assert by_source["diagnosis"]["code"] == "found"
    _refused(store, llm, [
        ("explain", {"query": "refund window", "collection": "g", "doc": "b", "group_by": "file"},
         "groupBy: Input should be 'source' (got 'file')", "group_by: Input should be 'source' (got 'file')"),
        ("explain", {"query": "refund window", "collection": "g", "doc": "b", "max_per_source": 0},
         "maxPerSource: Input should be greater than or equal to 1 (got 0)",
         "max_per_source: Input should be greater than or equal to 1 (got 0)"),
    ])


def test_rrf_k_and_overfetch_reach_the_fusion_settings(store: str, llm: str) -> None:
    """RRF with weights 2·0.5 = 1 per arm: kb-101 (ranks 1, 1) scores 2/(k + 1), kb-105
    (2, 2) 2/(k + 2), kb-102 (dense 3 only) 1/(k + 3). An over-fetch of 1 keeps each arm's
    first candidate only: kb-105 (second in both) never reaches fusion."""
    searched, explained, shallow, default = _both(store, llm, [
        ("search", {"query": QUERY, "k": 3, "fusion": "rrf", "rrf_k": 10, "overfetch": 7}),
        ("explain", {"query": QUERY, "doc": "kb-105", "k": 1, "fusion": "rrf", "rrf_k": 10, "overfetch": 7}),
        ("explain", {"query": QUERY, "doc": "kb-105", "k": 1, "fusion": "rrf", "overfetch": 1}),
        ("search", {"query": QUERY, "k": 3, "fusion": "rrf"}),
    ])
    assert _ids(searched) == ["kb-101", "kb-105", "kb-102"]
    assert [h["score"] for h in searched["hits"]] == [pytest.approx(2 / 11), pytest.approx(2 / 12), pytest.approx(1 / 13)]
    assert searched["fusionDecided"]["parameters"] == {"k": 10, "lexicalWeight": 0.5, "overfetch": 7}
    assert (searched["fusion"]["rrfK"], searched["fusion"]["overfetch"]) == (10, 7)
    assert searched["fusionAsked"] == {"fusion": "rrf", "rrfK": 10, "overfetch": 7}
    assert [h["score"] for h in default["hits"]] == [pytest.approx(2 / 61), pytest.approx(2 / 62), pytest.approx(1 / 63)]
    assert default["fusionDecided"]["parameters"] == {"k": 60, "lexicalWeight": 0.5, "overfetch": 50}

    settings = explained["fusion"]["settings"]
    assert (settings["method"], settings["rrfK"], settings["overfetch"]) == ("rrf", 10, 7)
    assert (explained["fusion"]["rank"], explained["fusion"]["score"]) == (2, pytest.approx(2 / 12))
    assert shallow["fusion"]["settings"]["overfetch"] == 1 and shallow["fusion"]["rank"] is None
    assert (shallow["lexical"]["rank"], shallow["lexical"]["withinOverfetch"]) == (2, False)
    assert shallow["diagnosis"]["code"] == "beyond-overfetch"

    _refused(store, llm, [
        ("search", {"query": QUERY, "fusion": "rrf", "rrf_k": 0},
         "rrfK: Input should be greater than or equal to 1 (got 0)",
         "rrf_k: Input should be greater than or equal to 1 (got 0)"),
        ("explain", {"query": QUERY, "doc": "kb-101", "fusion": "rrf", "rrf_k": 10_001},
         "rrfK: Input should be less than or equal to 10000 (got 10001)",
         "rrf_k: Input should be less than or equal to 10000 (got 10001)"),
        ("search", {"query": QUERY, "overfetch": 0},
         "overfetch: Input should be greater than or equal to 1 (got 0)",
         "overfetch: Input should be greater than or equal to 1 (got 0)"),
        ("explain", {"query": QUERY, "doc": "kb-101", "overfetch": True},
         "overfetch: expected a number, got true", "overfetch: expected a number, got true"),
        ("search", {"query": QUERY, "overfetch": "many"},
         "overfetch: Input should be a valid integer, unable to parse string as an integer (got 'many')",
         "overfetch: Input should be a valid integer, unable to parse string as an integer (got 'many')"),
    ])


def test_threshold_drops_the_weighted_hits_below_it(store: str, llm: str) -> None:
    """Weighted: 0.6·cosine + 0.4·BM25/best — kb-101 0.6·0.3685 + 0.4 = 0.6211, kb-105
    0.6·0.1875 + 0.4·4.4122/8.3319 = 0.3243, the dense-only rest under 0.2 (the default
    threshold). A threshold of 0.5 keeps kb-101 alone; 0 keeps all five."""
    default, high, zero, explained = _both(store, llm, [
        ("search", {"query": QUERY, "fusion": "weighted"}),
        ("search", {"query": QUERY, "fusion": "weighted", "threshold": 0.5}),
        ("search", {"query": QUERY, "fusion": "weighted", "threshold": 0}),
        ("explain", {"query": QUERY, "doc": "kb-105", "fusion": "weighted", "threshold": 0.5}),
    ])
    assert _ids(default) == ["kb-101", "kb-105"]
    for hit in default["hits"]:
        best = default["hits"][0]["lexicalScore"]
        assert hit["score"] == pytest.approx(0.6 * hit["vectorScore"] + 0.4 * hit["lexicalScore"] / best)
    assert [round(h["score"], 4) for h in default["hits"]] == [0.6211, 0.3243]
    assert _ids(high) == ["kb-101"] and high["fusionDecided"]["parameters"]["threshold"] == 0.5
    assert _ids(zero) == ["kb-101", "kb-105", "kb-102", "kb-104", "kb-103"]
    assert (explained["fusion"]["returned"], explained["fusion"]["droppedBy"]) == (False, "threshold")
    assert explained["diagnosis"]["message"].startswith("dropped by the weighted threshold 0.5")

    _refused(store, llm, [
        ("search", {"query": QUERY, "fusion": "weighted", "threshold": 2},
         "threshold: Input should be less than or equal to 1 (got 2)",
         "threshold: Input should be less than or equal to 1 (got 2)"),
        ("explain", {"query": QUERY, "doc": "kb-101", "fusion": "weighted", "threshold": "NaN"},
         "threshold: expected a finite number, got nan", "threshold: expected a finite number, got nan"),
    ])


def test_metadata_filters_restrict_the_hits(store: str, llm: str) -> None:
    """``{"docId": "kb-103"}`` keeps kb-103 alone (dense only, fused 1); explain of kb-101
    under it says the filter cut it."""
    filtered, explained, unfiltered = _both(store, llm, [
        ("search", {"query": QUERY, "metadata": {"docId": "kb-103"}}),
        ("explain", {"query": QUERY, "doc": "kb-101", "metadata": {"docId": "kb-103"}}),
        ("search", {"query": QUERY, "k": 1, "metadata": {}}),
    ])
    assert _ids(filtered) == ["kb-103"]
    assert filtered["hits"][0]["ranks"] == {"dense": 1, "lexical": None, "fused": 1, "rerank": None}
    assert (explained["fusion"]["droppedBy"], explained["diagnosis"]["code"]) == ("filters", "filtered")
    assert _ids(unfiltered) == ["kb-101"]  # an empty filter filters nothing

    _refused(store, llm, [
        ("search", {"query": QUERY, "metadata": {"doc id": "kb-103"}},
         "metadata: metadata filter key 'doc id' may only hold letters, digits, '_' and '-'",
         "metadata: metadata filter key 'doc id' may only hold letters, digits, '_' and '-'"),
        ("explain", {"query": QUERY, "doc": "kb-101", "metadata": {"docId": ["kb-103"]}},
         "metadata.docId: Input should be a valid string, integer, number or boolean",
         "metadata.docId: Input should be a valid string, integer, number or boolean"),
        ("search", {"query": QUERY, "metadata": "docId=kb-103"},
         "metadata: Input should be a valid dictionary (got 'docId=kb-103')",
         "metadata: Input should be a valid dictionary (got 'docId=kb-103')"),
    ])


def test_an_error_about_the_whole_request_reads_as_over_http(store: str, llm: str) -> None:
    """Knobs that do not fit the method are no one field's error: MCP said
    'request: threshold does not apply …' and HTTP 'body: threshold does not apply …'.
    Both now say the message alone."""
    _refused(store, llm, [
        ("search", {"query": QUERY, "fusion": "rrf", "threshold": 0.3},
         "threshold does not apply to fusion 'rrf': it takes rrfK, lexicalWeight; overfetch applies to every method",
         "threshold does not apply to fusion 'rrf': it takes rrfK, lexicalWeight; overfetch applies to every method"),
        ("explain", {"query": QUERY, "doc": "kb-101", "fusion": {"method": "minmax"}, "lexical_weight": 0.3},
         "lexicalWeight given beside a fusion object: put the knobs inside it (fusion 'minmax' takes denseWeight)",
         "lexicalWeight given beside a fusion object: put the knobs inside it (fusion 'minmax' takes denseWeight)"),
    ])


def test_overfetch_inside_a_fusion_object_is_told_where_it_goes(store: str, llm: str) -> None:
    """The knob error ended '(and overfetch)' after a fusion object's knobs, so an
    overfetch put inside the object was refused with 'it takes k, lexicalWeight (and
    overfetch)'. overfetch goes beside fusion: the message says so, and the object's
    knob list is the object's own."""
    inside = ("fusion: overfetch does not apply to fusion 'rrf' (fusion object): it takes k, lexicalWeight; "
              "overfetch goes beside fusion, not inside it")
    other = "fusion: denseWeight does not apply to fusion 'rrf' (fusion object): it takes k, lexicalWeight"
    _refused(store, llm, [
        ("search", {"query": QUERY, "fusion": {"method": "rrf", "overfetch": 5}}, inside, inside),
        ("explain", {"query": QUERY, "doc": "kb-101", "fusion": {"method": "rrf", "denseWeight": 0.5}}, other, other),
    ])
    (beside,) = _both(store, llm, [("search", {"query": QUERY, "fusion": {"method": "rrf", "k": 10}, "overfetch": 5})])
    assert beside["fusionDecided"]["parameters"] == {"k": 10, "lexicalWeight": 0.5, "overfetch": 5}


def test_every_http_request_field_is_a_tool_argument(store: str, llm: str) -> None:
    """search takes every field of the HTTP search body, explain every one but qaFirst (a
    trace answers no FAQ card) plus the document, ask every field of the ask body but
    includeDrafts (an agent is a reader)."""

    async def schemas() -> dict[str, list[str]]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-c", "from plait.cli import main; main()", "mcp", "--store", store],
            env={"PYTHONPATH": str(SRC)},
        )
        async with Client(params) as client:
            return {t.name: list(t.input_schema["properties"]) for t in (await client.list_tools()).tools}

    takes = anyio.run(schemas)
    search = set(SearchRequest.model_fields)
    assert set(takes["search"]) == search | {"collection"}
    assert set(takes["explain"]) == (search - {"qa_first"}) | {"collection", "doc", "path", "chunk"}
    assert set(takes["ask"]) == (set(AskRequest.model_fields) - {"include_drafts"}) | {"collection"}
    ask = _both(store, llm, [("ask", {"question": "What does ERR-4012 mean?", "k": 1, "min_cosine": 0.3})])[0]
    assert ask["gate"]["minCosine"] == 0.3 and len(ask["sources"]) == 1
    _refused(store, llm, [
        ("ask", {"question": "What does ERR-4012 mean?", "k": 21},
         "k: Input should be less than or equal to 20 (got 21)",
         "k: Input should be less than or equal to 20 (got 21)"),
        ("ask", {"question": "What does ERR-4012 mean?", "min_term_coverage": 0},
         "minTermCoverage: Input should be greater than 0 (got 0)",
         "min_term_coverage: Input should be greater than 0 (got 0)"),
    ])
