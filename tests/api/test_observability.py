"""Observing ``plait serve`` (issue 27.4): /metrics parsed with prometheus_client's own
parser, /readyz against a store that goes away (SQLite folder removed, PostgreSQL
stopped), X-Request-Id, and ``plait serve --log-json`` in its own process."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from plait.api.http import create_app
from plait.api.keys import KeyStore
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ProviderUnavailableError
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread
from plait.testing.corpus import documents

SRC = Path(__file__).resolve().parents[2] / "src"
DOCS = {
    "d1": "ERR-4012 means the tenant database is down.",
    "d2": "Rollback steps for a bad release.",
    "d3": "Why was my payment declined by the bank?",
}
SEARCH_ROUTE = "/v1/collections/{collection}/search"


def samples(url: str, headers: dict[str, str] | None = None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) → value."""
    response = httpx.get(url + "/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(found: dict[Any, float], name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def search(url: str, query: str, collection: str = "docs", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(url + f"/v1/collections/{collection}/search", json={"query": query, "k": 3}, headers=headers)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Plait, Path]]:
    folder = tmp_path / "store"
    with Plait(str(folder / "plait.db"), embedder=FakeEmbedder(dimension=32)) as engine:
        engine.index_documents(documents(DOCS), collection="docs", backfill=False)  # 3 chunks, no vector yet
        with UvicornThread(create_app(engine, auth=False)) as server:
            yield server.url, engine, folder


def test_metrics_count_requests_stages_backlog_and_embedding(served: tuple[str, Plait, Path]) -> None:
    url, engine, _ = served
    before = samples(url)
    assert value(before, "plait_chunks", collection="docs") == 3
    assert value(before, "plait_chunks_without_vector", collection="docs") == 3  # the backlog
    assert value(before, "plait_embedded_texts_total", collection="docs") is None
    report = engine.backfill(collection="docs")
    assert report.embedding.embedded == 3
    for query in ("ERR-4012", "payment declined"):
        assert search(url, query).status_code == 200
    assert search(url, "x", collection="nope").status_code == 404
    assert httpx.get(url + "/no/such/page").status_code == 404
    found = samples(url)
    assert value(found, "plait_chunks_without_vector", collection="docs") == 0
    assert value(found, "plait_embedded_texts_total", collection="docs") == 3
    assert value(found, "plait_embedding_call_seconds_count") == 1  # one batch of 3 texts
    ok = {"method": "POST", "route": SEARCH_ROUTE, "status": "200"}
    assert value(found, "plait_http_requests_total", **ok) == 2
    assert value(found, "plait_http_requests_total", method="POST", route=SEARCH_ROUTE, status="404") == 1
    assert value(found, "plait_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert value(found, "plait_http_requests_total", method="GET", route="/metrics", status="200") == 1
    assert value(found, "plait_http_request_duration_seconds_count", **ok) == 2
    assert value(found, "plait_http_request_duration_seconds_bucket", le="+Inf", **ok) == 2
    assert value(found, "plait_searches_total", collection="docs") == 2
    for stage in ("lexical", "dense", "fuse"):
        assert value(found, "plait_search_stage_seconds_count", stage=stage) == 2, stage
    assert value(found, "plait_provider_errors_total", kind="query") == 0
    assert value(found, "plait_provider_errors_total", kind="documents") == 0
    assert value(found, "plait_embedding_circuit_open") == 0
    assert value(found, "plait_store_up") == 1
    assert {value(found, "plait_refinery_runs", status=s) for s in ("queued", "running", "succeeded")} == {0}
    # nothing leaked into prometheus_client's process-wide registry
    assert not [m for m in REGISTRY.collect() if m.name.startswith("plait_")]


def test_each_app_has_its_own_registry(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "a.db"), embedder="none") as a, Plait(str(tmp_path / "b.db"), embedder="none") as b:
        a.index_documents(documents(DOCS), collection="docs")
        b.index_documents(documents({"x": "other"}), collection="docs")
        with UvicornThread(create_app(a, auth=False)) as one, UvicornThread(create_app(b, auth=False)) as two:
            assert search(one.url, "ERR-4012").status_code == 200
            first, second = samples(one.url), samples(two.url)
    ok = {"method": "POST", "route": SEARCH_ROUTE, "status": "200"}
    assert value(first, "plait_http_requests_total", **ok) == 1
    assert value(second, "plait_http_requests_total", **ok) is None
    assert value(second, "plait_searches_total", collection="docs") is None
    assert (value(first, "plait_chunks", collection="docs"), value(second, "plait_chunks", collection="docs")) == (3, 1)


class _Switchable(FakeEmbedder):
    """A provider that goes down when told to, for documents and queries alike."""

    down = False

    def embed_documents(self, texts: Any) -> np.ndarray:
        if self.down:
            raise ProviderUnavailableError("fake provider at 127.0.0.1:9 is unreachable")
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.down:
            raise ProviderUnavailableError("fake provider at 127.0.0.1:9 is unreachable")
        return super().embed_query(text)


def test_provider_errors_and_circuit_state(tmp_path: Path) -> None:
    embedder = _Switchable(dimension=32)
    with Plait(str(tmp_path / "p.db"), embedder=embedder, probe_interval=3600) as engine:
        engine.index_documents(documents(DOCS), collection="docs")  # 3 vectors while it is up
        with UvicornThread(create_app(engine, auth=False)) as server:
            assert search(server.url, "ERR-4012").json()["vectorAvailable"] is True
            assert value(samples(server.url), "plait_embedding_circuit_open") == 0
            embedder.down = True
            engine.index_documents(documents({"d4": "A fourth note."}), collection="docs", backfill=False)
            report = engine.backfill(collection="docs")  # as 'plait serve' does in the background
            assert report.embedding.available is False and report.embedding.skipped == 1
            for _ in range(3):  # the first fails on the provider, the next two on the open circuit
                body = search(server.url, "ERR-4012").json()
                assert body["vectorAvailable"] is False and body["hits"]
            found = samples(server.url)
    assert value(found, "plait_provider_errors_total", kind="documents") == 1
    assert value(found, "plait_provider_errors_total", kind="query") == 1  # then the open circuit answered
    assert value(found, "plait_embedding_circuit_open") == 1
    assert value(found, "plait_chunks_without_vector", collection="docs") == 1
    assert value(found, "plait_embedded_texts_total", collection="docs") is None  # all 3 before the app


def test_metrics_need_an_admin_key_for_all_collections_when_auth_is_on(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index_documents(documents(DOCS), collection="docs")
        keys = KeyStore(tmp_path / "keys.db")
        admin = keys.create(role="admin", collection="*")[1]
        scoped = keys.create(role="admin", collection="docs")[1]
        try:
            with UvicornThread(create_app(engine, auth=True, keys=keys)) as server:
                assert httpx.get(server.url + "/metrics").status_code == 401
                denied = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {scoped}"})
                assert denied.status_code == 403 and "admin key for all collections" in denied.json()["error"]
                found = samples(server.url, {"Authorization": f"Bearer {admin}"})
                assert httpx.get(server.url + "/readyz").status_code == 200  # probes need no key
        finally:
            keys.close()
    assert value(found, "plait_http_requests_total", method="GET", route="/metrics", status="401") == 1
    assert value(found, "plait_http_requests_total", method="GET", route="/metrics", status="403") == 1


def test_request_ids(served: tuple[str, Plait, Path]) -> None:
    url, _, _ = served
    fresh = httpx.get(url + "/healthz").headers["x-request-id"]
    other = httpx.get(url + "/healthz").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", fresh) and fresh != other
    kept = httpx.get(url + "/healthz", headers={"X-Request-Id": "trace-42:a.b_c"})
    assert kept.headers["x-request-id"] == "trace-42:a.b_c"
    for bad in ("has spaces", "x" * 129, "quote\"d", ""):
        replaced = httpx.get(url + "/healthz", headers={"X-Request-Id": bad}).headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", replaced), bad
    # errors carry it too, once
    missing = search(url, "x", collection="nope", headers={"X-Request-Id": "req-404"})
    assert missing.status_code == 404 and missing.headers.get_list("x-request-id") == ["req-404"]


def test_readyz_is_503_when_the_sqlite_folder_is_removed(served: tuple[str, Plait, Path]) -> None:
    url, _, folder = served
    ready = httpx.get(url + "/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    shutil.rmtree(folder)
    gone = httpx.get(url + "/readyz")
    assert gone.status_code == 503 and gone.headers["retry-after"] == "5"
    assert gone.json()["status"] == "unavailable"
    assert "no longer exists" in gone.json()["error"] and str(folder) in gone.json()["error"]
    assert httpx.get(url + "/healthz").status_code == 200  # alive, not ready


@pytest.mark.slow
def test_readyz_is_503_when_postgres_stops(tmp_path: Path) -> None:
    pytest.importorskip("pgserver")
    pytest.importorskip("psycopg")
    from plait.stores.postgres import PostgresStore
    from plait.testing.pg import private_postgres

    stack = private_postgres("plait-ready-")
    dsn = stack.__enter__()
    stopped = False
    try:
        store = PostgresStore(dsn, connect_timeout=2.0)
        with Plait(store, embedder="none") as engine, UvicornThread(create_app(engine, auth=False)) as server:
            assert httpx.get(server.url + "/readyz").json() == {"status": "ready"}
            stack.__exit__(None, None, None)  # the server stops (and its data folder goes)
            stopped = True
            gone = httpx.get(server.url + "/readyz", timeout=30)
            assert gone.status_code == 503, gone.text
            assert "PostgreSQL" in gone.json()["error"]
            assert value(samples(server.url), "plait_store_up") == 0
    finally:
        if not stopped:
            stack.__exit__(None, None, None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_plait_serve_log_json(tmp_path: Path) -> None:
    store = str(tmp_path / "plait.db")
    with Plait(store, embedder="none") as engine:
        engine.index_documents(documents(DOCS), collection="docs")
    port = _free_port()
    command = [sys.executable, "-c", "from plait.cli import main; main()", "serve", "--no-auth", "--port", str(port),
               "--store", store, "--embedder", "none", "--log-json"]
    process = subprocess.Popen(
        command, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("plait serve did not start: " + (process.stderr.read().decode() if process.stderr else ""))
                time.sleep(0.1)
        answered = search(url, "ERR-4012", headers={"X-Request-Id": "e2e-1"})
        assert answered.status_code == 200 and answered.headers["x-request-id"] == "e2e-1"
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    records = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    access = [r for r in records if r["logger"] == "plait.api.access" and r.get("requestId") == "e2e-1"]
    assert len(access) == 1, stderr.decode()
    line = access[0]
    assert (line["method"], line["route"], line["path"], line["status"]) == (
        "POST", SEARCH_ROUTE, "/v1/collections/docs/search", 200
    )
    assert line["level"] == "info" and line["duration_ms"] > 0 and line["client"] == "127.0.0.1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
