"""`plait mcp --transport streamable-http` in its own process, driven by the official MCP
client over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'plait[mcp]'")

import anyio
from http_served import ARTICLE_DOCS, documents
from mcp.client import Client

from plait.service import Plait

SRC = Path(__file__).resolve().parents[2] / "src"
CLI = ["-c", "from plait.cli import main; main()", "mcp"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen[bytes], *, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"plait mcp exited with {process.returncode}: {process.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"plait mcp did not listen on port {port} within {timeout}s")


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)
    store = str(tmp_path / "plait.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="a")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, *CLI, "--transport", "streamable-http", "--port", str(port),
         "--store", store, "--collection", "a", "--no-reindex"],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def _run(url: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    async def main() -> tuple[list[str], list[Any]]:
        async with Client(url) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def test_tools_over_streamable_http(url: str) -> None:
    tools, (search, answer, missing) = _run(
        url,
        [
            ("search", {"query": "ERR-4012", "k": 3, "lexical_weight": "auto", "fusion": "rrf"}),
            ("ask", {"question": "What does ERR-4012 mean?", "k": 3}),
            ("search", {"query": "x", "collection": "nope"}),
        ],
    )
    assert tools == ["ask", "collections", "coverage", "explain", "faq_list", "search"]

    result = search.structured_content
    assert result["collection"] == "a" and len(result["hits"]) == 3
    top = result["hits"][0]
    assert top["metadata"]["docId"] == "kb-101" and top["match"] == "both" and top["ranks"]["lexical"] == 1

    (citation,) = answer.structured_content["citations"]
    assert citation["origin"]["sourcePath"] == "kb-101.md"
    assert citation["quote"] == "ERR-4012: checkout API rejects the cart when the session token expired."

    assert missing.is_error and "collection 'nope' does not exist" in missing.content[0].text


def test_an_empty_collection_argument_is_an_error_not_the_default(url: str) -> None:
    """``collection: ""`` searched the server's default collection ('a'), as if none were given."""
    empty = "the collection name is empty: name one, or leave it out for 'a'"
    _, results = _run(
        url,
        [
            ("search", {"query": "ERR-4012", "collection": ""}),
            ("coverage", {"collection": ""}),
            ("search", {"query": "ERR-4012"}),
        ],
    )
    search, coverage, default = results
    assert [(r.is_error, r.content[0].text) for r in (search, coverage)] == [
        (True, f"Error executing tool search: {empty}"),
        (True, f"Error executing tool coverage: {empty}"),
    ]
    assert not default.is_error and default.structured_content["collection"] == "a"


def test_arguments_are_checked_over_streamable_http(url: str) -> None:
    """As over stdio: true is not a number, an unknown argument, NaN and a wrong type are
    one-line tool errors naming the argument (the SDK's model took the first three and
    answered the last in pydantic's multi-line report); a valid call still runs."""
    _, (as_bool, unknown, nan, wrong, valid) = _run(
        url,
        [
            ("search", {"query": "ERR-4012", "k": True}),
            ("ask", {"question": "What does ERR-4012 mean?", "kk": 3}),
            ("ask", {"question": "What does ERR-4012 mean?", "min_cosine": "NaN"}),
            ("search", {"query": "ERR-4012", "offset": "many"}),
            ("search", {"query": "ERR-4012", "k": 3, "offset": 0, "fusion": "rrf", "lexical_weight": "auto"}),
        ],
    )
    assert [r.is_error for r in (as_bool, unknown, nan, wrong, valid)] == [True, True, True, True, False]
    assert as_bool.content[0].text == "Error executing tool search: k: expected a number, got true"
    assert unknown.content[0].text == (
        "Error executing tool ask: unknown argument 'kk'; ask takes: question, collection, k, qa_first, "
        "rerank, scopes, mode, min_cosine, min_term_coverage"
    )
    assert nan.content[0].text == "Error executing tool ask: min_cosine: expected a finite number, got nan"
    assert wrong.content[0].text == (
        "Error executing tool search: offset: Input should be a valid integer, unable to parse string as an "
        "integer (got 'many')"
    )
    result = valid.structured_content
    assert result["k"] == 3 and result["hits"][0]["metadata"]["docId"] == "kb-101"


def test_streamable_http_refuses_a_public_host(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, *CLI, "--transport", "streamable-http", "--host", "0.0.0.0",
         "--store", str(tmp_path / "p.db")],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "COLUMNS": "200"},
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 1
    assert "only binds to loopback" in done.stderr and "'0.0.0.0'" in done.stderr


def test_unknown_transport_is_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, *CLI, "--transport", "carrier-pigeon", "--store", str(tmp_path / "p.db")],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "COLUMNS": "200"},
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 1
    assert "'carrier-pigeon' is not one of: stdio, streamable-http" in done.stderr
