"""`plait mcp` in its own process, driven over stdio by the official MCP client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'plait[mcp]'")

import anyio  # noqa: E402
from http_served import ARTICLE_DOCS, documents  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from plait.service import Plait  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"


def _params(store: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", "from plait.cli import main; main()", "mcp", "--store", store, "--collection", "a", *extra],
        env={"PYTHONPATH": str(SRC)},
    )


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "plait.db")
    with Plait(path, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="a")
        folder = tmp_path / "docs"
        folder.mkdir()
        (folder / "one.md").write_text("# One\n\nThe resolveTenantDB helper.\n", encoding="utf-8")
        engine.index(folder, collection="folder")
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
    assert tools == ["collections", "coverage", "explain", "reindex", "search"]

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

    assert [c["name"] for c in listed.structured_content["result"]] == ["a", "folder"]

    assert missing.is_error
    assert "collection 'nope' does not exist" in missing.content[0].text
    assert invalid.is_error
    assert invalid.content[0].text == "Error executing tool search: k: Input should be greater than or equal to 1"


def test_no_reindex_leaves_the_tool_out(store: str) -> None:
    tools, _ = _run(_params(store, "--no-reindex"), [])
    assert tools == ["collections", "coverage", "explain", "search"]


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
