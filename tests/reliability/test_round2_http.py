"""Issue 23, HTTP admission (D1) and browser-facing checks (D5), on real uvicorn servers."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from http_served import Served, serve_engine

from plait.api.guards import Admission
from plait.api.http import create_app
from plait.api.keys import KeyStore
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread
from plait.testing.corpus import ARTICLE_DOCS, documents

# ---------------------------------------------------------------------------- D5


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_engine(tmp_path_factory.mktemp("noauth"), auth=False) as s:
        yield s


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "127.0.0.1.nip.io", "localhost.attacker.example"])
def test_without_auth_a_foreign_host_name_is_refused(open_server: Served, host: str) -> None:
    response = httpx.get(f"{open_server.url}/v1/collections", headers={"Host": host}, timeout=30)
    assert response.status_code == 403
    assert response.json()["error"].startswith(f"Host {host.rsplit(':', 1)[0] if host.count(':') == 1 else host!r} is not served")
    page = httpx.get(f"{open_server.url}/", headers={"Host": host}, timeout=30)
    assert page.status_code == 403


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST:8000", "[::1]:9", "localhost."])
def test_without_auth_loopback_host_names_are_served(open_server: Served, host: str) -> None:
    response = httpx.get(f"{open_server.url}/v1/collections", headers={"Host": host}, timeout=30)
    assert response.status_code == 200 and sorted(c["name"] for c in response.json()) == ["a", "b"]


@pytest.mark.parametrize(
    ("route", "headers", "body"),
    [
        ("a/reindex", {}, None),
        ("a/reindex", {"Content-Type": "text/plain"}, b"x"),
        ("a/refinery/runs", {"Content-Type": "text/plain"}, b""),
        ("a/search", {"Content-Type": "text/plain"}, b'{"query": "release"}'),
        ("a/search", {"Content-Type": "application/x-www-form-urlencoded"}, b"query=release"),
    ],
)
def test_without_auth_simple_cross_site_posts_are_refused(
    open_server: Served, route: str, headers: dict[str, str], body: bytes | None
) -> None:
    before = open_server.engine.store.get_collection("a")
    response = httpx.post(f"{open_server.url}/v1/collections/{route}", headers=headers, content=body, timeout=30)
    assert response.status_code == 415
    assert response.json() == {
        "error": "POST needs 'Content-Type: application/json' or an 'X-Plait-Request: 1' header "
        "(a cross-site page cannot send either)"
    }
    assert open_server.engine.store.get_collection("a") == before


def test_without_auth_json_or_the_custom_header_is_accepted(open_server: Served) -> None:
    url = f"{open_server.url}/v1/collections/a"
    assert httpx.post(f"{url}/search", json={"query": "release"}, timeout=30).status_code == 200
    assert httpx.post(f"{url}/reindex", headers={"X-Plait-Request": "1"}, timeout=30).status_code == 200


def test_with_auth_any_host_is_served(tmp_path: Path) -> None:
    with serve_engine(tmp_path) as served:  # keys are the defence; a rebinding page has none
        response = httpx.get(
            f"{served.url}/v1/collections",
            headers={"Host": "search.example.com", "Authorization": f"Bearer {served.tokens['admin_all']}"},
            timeout=30,
        )
        assert response.status_code == 200


# ---------------------------------------------------------------------------- D1


def _slow_body(port: int, headers: str = "") -> socket.socket:
    """A client that announces 100,000 body bytes and sends one."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        (
            "POST /v1/collections/a/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: 100000\r\n{headers}\r\n{{"
        ).encode()
    )
    return sock


def _status(sock: socket.socket) -> int:
    sock.settimeout(30)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]) if data else 0


@pytest.fixture
def small(tmp_path: Path) -> Iterator[tuple[str, int, str, KeyStore]]:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="a")
        keys = KeyStore(tmp_path / "keys.db")
        token = keys.create(role="reader", collection="a")[1]
        app = create_app(engine, keys=keys, max_in_flight=8, body_deadline=1.5)
        try:
            with UvicornThread(app) as server:
                yield server.url, int(server.url.rsplit(":", 1)[1]), token, keys
        finally:
            keys.close()


def test_anonymous_slow_bodies_are_refused_before_the_body_and_keyed_searches_answer(
    small: tuple[str, int, str, KeyStore],
) -> None:
    url, port, token, _ = small
    socks = [_slow_body(port) for _ in range(16)]  # twice the limit of 8
    try:
        statuses = [_status(s) for s in socks]
        assert statuses == [401] * 16  # the key is checked before the body is read
        response = httpx.post(
            f"{url}/v1/collections/a/search",
            json={"query": "ERR-4012"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200
    finally:
        for s in socks:
            s.close()


def test_a_keyed_slow_body_times_out(small: tuple[str, int, str, KeyStore]) -> None:
    _, port, token, _ = small
    sock = _slow_body(port, f"Authorization: Bearer {token}\r\n")
    try:
        started = time.monotonic()
        assert _status(sock) == 408
        assert 1.0 < time.monotonic() - started < 1.5 + 3.0
    finally:
        sock.close()


def test_anonymous_requests_cannot_take_the_reserved_slots() -> None:
    """Admission in front of a small app whose /slow route holds its slot until released."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    events: dict[str, anyio.Event] = {}

    async def slow(_request: object) -> PlainTextResponse:
        events.setdefault("release", anyio.Event())
        await events["release"].wait()
        return PlainTextResponse("slow")

    async def fast(_request: object) -> PlainTextResponse:
        return PlainTextResponse("fast")

    async def let_go(_request: object) -> PlainTextResponse:
        events.setdefault("release", anyio.Event()).set()
        return PlainTextResponse("released")

    inner = Starlette(routes=[Route("/slow", slow), Route("/fast", fast), Route("/release", let_go)])
    app = Admission(inner, limit=4, reserved=2, authenticate=lambda token: token if token == "good" else None)
    with UvicornThread(app) as server, ThreadPoolExecutor(4) as pool:
        held = [pool.submit(httpx.get, f"{server.url}/slow", timeout=30) for _ in range(2)]
        time.sleep(0.5)
        anonymous = httpx.get(f"{server.url}/fast", timeout=30)
        assert anonymous.status_code == 503 and anonymous.headers["retry-after"] == "1"
        keyed = httpx.get(f"{server.url}/fast", headers={"Authorization": "Bearer good"}, timeout=30)
        assert (keyed.status_code, keyed.text) == (200, "fast")
        assert httpx.get(f"{server.url}/release", headers={"X-API-Key": "good"}, timeout=30).status_code == 200
        assert [f.result().status_code for f in held] == [200, 200]
        assert httpx.get(f"{server.url}/fast", timeout=30).status_code == 200  # slots given back
