"""``mode`` passes through every interface unchanged: HTTP (a real uvicorn server), MCP
(the official client over stdio) and the CLI give the library's own answer."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'plait[mcp]'")

import anyio
import httpx
from http_served import Served, serve_engine
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from typer.testing import CliRunner

from plait.cli import app
from plait.types import to_json

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_engine(tmp_path) as s:
        yield s


def _post(served: Served, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {served.tokens['admin_all']}"}
    return httpx.post(f"{served.url}/v1/collections/a/{path}", json=body, headers=headers, timeout=30)


def test_http_search_explain_and_ask_take_mode(served: Served) -> None:
    response = _post(served, "search", {"query": "ERR-4012 checkout", "k": 3, "mode": "lexical"})
    assert response.status_code == 200
    data = response.json()
    assert data == to_json(served.engine.search("ERR-4012 checkout", collection="a", k=3, mode="lexical")) | {
        "timingsMs": data["timingsMs"]
    }
    assert data["mode"] == "lexical" and {h["match"] for h in data["hits"]} == {"lexical"}

    vector = _post(served, "search", {"query": "why was my card refused", "k": 3, "mode": "vector"}).json()
    assert vector["mode"] == "vector" and {h["match"] for h in vector["hits"]} == {"semantic"}
    assert all(h["ranks"]["lexical"] is None and h["lexicalScore"] is None for h in vector["hits"])

    explained = _post(served, "explain", {"query": "ERR-4012", "doc": "kb-101", "mode": "vector"}).json()
    assert explained["mode"] == "vector" and explained["lexical"]["ran"] is False

    answer = _post(served, "ask", {"question": "What does ERR-4012 mean?", "k": 3, "mode": "lexical"}).json()
    assert answer["searchMode"] == "lexical" and answer["vectorAvailable"] is False

    bad = _post(served, "search", {"query": "x", "mode": "dense"})
    assert bad.status_code == 422 and "mode" in bad.json()["error"]


def test_mcp_and_cli_take_mode(served: Served, tmp_path: Path) -> None:
    store = str(tmp_path / "plait.db")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from plait.cli import main; main()", "mcp", "--store", store, "--collection", "a"],
        env={"PYTHONPATH": str(SRC)},
    )

    async def main() -> list[Any]:
        async with Client(params) as client:
            return [
                await client.call_tool("search", {"query": "ERR-4012", "k": 2, "mode": "lexical"}),
                await client.call_tool("explain", {"query": "ERR-4012", "doc": "kb-101", "mode": "vector"}),
                await client.call_tool("ask", {"question": "What does ERR-4012 mean?", "mode": "vector"}),
            ]

    search, explain, ask = anyio.run(main)
    assert search.structured_content["mode"] == "lexical"
    assert [h["match"] for h in search.structured_content["hits"]] == ["lexical"]  # only kb-101 has the term
    assert explain.structured_content["mode"] == "vector" and explain.structured_content["lexical"]["ran"] is False
    assert ask.structured_content["searchMode"] == "vector"

    runner = CliRunner()
    out = runner.invoke(
        app, ["search", "ERR-4012", "--store", store, "-c", "a", "--mode", "lexical", "--json", "-k", "2"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["mode"] == "lexical" and data["vectorUnavailableReason"] == "mode 'lexical': the dense arm does not run"
    table = runner.invoke(app, ["search", "card refused", "--store", store, "-c", "a", "--mode", "vector"])
    assert table.exit_code == 0 and "mode vector" in table.output and "dense arm only" in table.output
    bad = runner.invoke(app, ["search", "x", "--store", store, "-c", "a", "--mode", "dense"])
    assert bad.exit_code == 1 and "mode" in bad.output


def test_http_mcp_and_cli_take_max_per_source_and_group_by(served: Served, tmp_path: Path) -> None:
    body = {"query": "checkout session token", "k": 3, "maxPerSource": 1, "groupBy": "source"}
    data = _post(served, "search", body).json()
    expected = served.engine.search(
        "checkout session token", collection="a", k=3, max_per_source=1, group_by="source"
    )
    assert data["groups"] == to_json(expected)["groups"]
    assert data["maxPerSource"] == 1 and data["groupBy"] == "source"
    assert [g["chunkIds"] for g in data["groups"]] == [[h["chunkId"]] for h in data["hits"]]
    assert all(h["moreFromSource"] == 0 for h in data["hits"])  # one chunk per article document
    bad = _post(served, "search", {"query": "x", "maxPerSource": 0})
    assert bad.status_code == 422 and "maxPerSource" in bad.json()["error"]

    store = str(tmp_path / "plait.db")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from plait.cli import main; main()", "mcp", "--store", store, "--collection", "a"],
        env={"PYTHONPATH": str(SRC)},
    )

    async def main() -> Any:
        async with Client(params) as client:
            return await client.call_tool("search", {"query": "checkout", "max_per_source": 2, "group_by": "source"})

    mcp = anyio.run(main).structured_content
    assert mcp["maxPerSource"] == 2 and len(mcp["groups"]) == len(mcp["hits"])

    out = CliRunner().invoke(
        app, ["search", "checkout", "--store", store, "-c", "a", "--max-per-source", "1", "--json"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["maxPerSource"] == 1
