"""Issue 23, explain.path (D3, D10): a path is a source path inside the collection's
roots, compared as text; nothing on the server is resolved or stat'ed for it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from plait.api.http import create_app
from plait.api.keys import KeyStore
from plait.api.mcp import create_mcp_server
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ValidationError
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

_TOKEN: dict[str, str] = {}
ROOT_REQUIRED = "not inside any of the collection's folder or git roots"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Plait, Path]]:
    base = tmp_path_factory.mktemp("explain-path")
    root = base / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\n\nERR-4012 means the token expired.", encoding="utf-8")
    (root / "sub" / "notes.pdf").write_bytes(b"%PDF-1.4")
    (root / "etc").symlink_to("/etc", target_is_directory=True)  # a way out, never walked
    with Plait(str(base / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index(root)
        keys = KeyStore(base / "keys.db")
        _TOKEN["reader"] = keys.create(role="reader", collection="default")[1]
        try:
            with UvicornThread(create_app(engine, keys=keys)) as server:
                yield server.url, engine, root
        finally:
            keys.close()


def _explain(url: str, path: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/collections/default/explain", json={"query": "ERR-4012", "path": path},
        headers={"Authorization": f"Bearer {_TOKEN['reader']}"}, timeout=30,
    )


def test_absolute_paths_outside_the_roots_get_one_answer_whatever_exists(served: tuple[str, Plait, Path]) -> None:
    url, _, root = served
    fd = os.open(__file__, os.O_RDONLY)  # an open descriptor the server process can see
    try:
        probes = ["/etc/shadow", "/etc/nope", "/proc/self/cwd", f"/proc/self/fd/{fd}", "/", f"{root}/../p.db"]
        answers = [_explain(url, p) for p in probes]
    finally:
        os.close(fd)
    assert [r.status_code for r in answers] == [422] * len(probes)
    bodies = {r.json()["error"] for r in answers}
    assert len(bodies) == 1 and ROOT_REQUIRED in bodies.pop()
    assert all(str(Path.cwd()) not in r.text and __file__ not in r.text for r in answers)


def test_paths_through_a_symlink_inside_the_root_are_not_stat_ed(served: tuple[str, Plait, Path]) -> None:
    url, _, root = served
    shadow = _explain(url, "etc/shadow").json()
    nope = _explain(url, "etc/nope").json()
    assert shadow["ingestion"]["message"] == nope["ingestion"]["message"].replace("etc/nope", "etc/shadow")
    assert shadow["ingestion"]["skipped"] is False and "the index holds no chunk of it" in shadow["ingestion"]["message"]
    assert _explain(url, f"{root}/etc/shadow").json()["target"] == {"kind": "path", "value": "etc/shadow"}
    escape = _explain(url, "sub/../../outside.md")
    assert escape.status_code == 422 and "leads outside the collection's roots" in escape.json()["error"]


def test_long_and_tilde_paths_are_clean_422s(served: tuple[str, Plait, Path]) -> None:
    url, _, _ = served
    long = _explain(url, "a" * 6000)
    assert long.status_code == 422
    assert long.json() == {"error": "path is 6000 characters long; a source path has at most 4096"}
    for path in ("~nosuchuser/x", "~/x.md"):
        tilde = _explain(url, path)
        assert tilde.status_code == 422 and "starts with '~', which is not expanded" in tilde.json()["error"]


def test_source_paths_still_resolve_as_text(served: tuple[str, Plait, Path]) -> None:
    _, engine, root = served
    assert engine.explain("ERR-4012", path=f"{root}/guide.md").target == {"kind": "path", "value": "guide.md"}
    assert engine.explain("ERR-4012", path="./sub/../guide.md").ingestion.indexed is True
    pdf = engine.explain("ERR-4012", path=str(root / "sub" / "notes.pdf"))
    assert pdf.ingestion.skipped is True and "matches none of the root's globs" in pdf.ingestion.message
    never = engine.explain("ERR-4012", path="sub/missing.pdf")  # same glob miss, but never seen
    assert never.ingestion.skipped is False and "the index holds no chunk of it" in never.ingestion.message
    with pytest.raises(ValidationError, match=ROOT_REQUIRED):
        engine.explain("ERR-4012", path="/etc/shadow")


def test_mcp_explain_gives_the_same_clean_errors(served: tuple[str, Plait, Path]) -> None:
    _, engine, _ = served
    server = create_mcp_server(engine)

    async def call(path: str) -> Any:
        return await server.call_tool("explain", {"query": "ERR-4012", "path": path})

    for path, expected in (("/etc/shadow", ROOT_REQUIRED), ("~nosuchuser/x", "not expanded"), ("b" * 6000, "at most 4096")):
        with pytest.raises(ToolError, match=expected):  # the SDK turns it into an is_error result
            anyio.run(call, path)
