"""Observing ``plait serve``: ``/metrics`` (Prometheus text format), ``/readyz``, a request
id on every response (``X-Request-Id``) and an access log line per request.

Metrics (one :class:`prometheus_client.CollectorRegistry` per app: nothing global, two
apps in one process never share a figure):

==============================================  ==========================================
``plait_http_requests_total``                   counter: method, route template, status
``plait_http_request_duration_seconds``         histogram: method, route template, status
``plait_searches_total``                        counter: collection
``plait_search_stage_seconds``                  histogram: stage (lexical, dense, fuse,
                                                hydrate, rerank… — the pipeline's trace)
``plait_embedded_texts_total``                  counter: collection (its rate is the
                                                embedding rate)
``plait_embedding_call_seconds``                histogram of document embedding calls
``plait_chunks`` / ``plait_chunks_without_vector``  gauges per collection (the backlog)
``plait_provider_errors_total``                 counter: kind (``documents``: indexing and
                                                backfill calls; ``query``: search embeddings)
``plait_embedding_circuit_open``                gauge: query-embedding circuits open now
``plait_refinery_runs``                         gauge: runs per status
``plait_store_up``                              gauge: 1 when the store answered the scrape
==============================================  ==========================================

The route label is the route's template (``/v1/collections/{collection}/search``), never
the raw path, and ``unmatched`` for a path no route serves, so the label set stays small.
``/readyz`` pings the store (:meth:`~plait.stores.base.Store.ping`): 200 ``{"status":
"ready"}``, else 503 with the reason and ``Retry-After``. ``/healthz`` stays liveness.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from plait.api.request_id import HEADER, request_id_var, usable_request_id
from plait.errors import PlaitError
from plait.events import EngineListener

if TYPE_CHECKING:
    from fastapi import FastAPI
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

    from plait.service import Plait
    from plait.types import SearchResult

__all__ = ["install_observability"]

access_log = logging.getLogger("plait.api.access")

#: Seconds; requests from sub-millisecond health checks to minute-long reindexes.
_HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Seconds; one search stage.
_STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_RETRY_AFTER = 5


class _EngineMetrics(EngineListener):
    """The counters and histograms the engine's events feed, and the gauges read from the
    engine at each scrape."""

    def __init__(self, registry: CollectorRegistry, engine: Plait) -> None:
        from prometheus_client import Counter, Histogram

        self.engine = engine
        self.requests = Counter(
            "plait_http_requests", "HTTP requests answered.", ["method", "route", "status"], registry=registry
        )
        self.latency = Histogram(
            "plait_http_request_duration_seconds", "HTTP request latency.", ["method", "route", "status"],
            buckets=_HTTP_BUCKETS, registry=registry,
        )
        self.searches = Counter("plait_searches", "Searches answered.", ["collection"], registry=registry)
        self.stages = Histogram(
            "plait_search_stage_seconds", "Time per search stage.", ["stage"], buckets=_STAGE_BUCKETS,
            registry=registry,
        )
        self.embedded_texts = Counter(
            "plait_embedded_texts", "Document texts embedded.", ["collection"], registry=registry
        )
        self.embedding_calls = Histogram(
            "plait_embedding_call_seconds", "Duration of one document embedding call.", buckets=_HTTP_BUCKETS,
            registry=registry,
        )
        self._lock = threading.Lock()
        self._document_errors = 0
        registry.register(_ScrapeCollector(self))

    # engine events ----------------------------------------------------------------
    def searched(self, collection: str, result: SearchResult) -> None:
        self.searches.labels(collection=collection).inc()
        for stage, ms in result.timings_ms.items():
            self.stages.labels(stage=stage).observe(ms / 1000.0)

    def embedded(self, collection: str, texts: int, seconds: float) -> None:
        self.embedded_texts.labels(collection=collection).inc(texts)
        self.embedding_calls.observe(seconds)

    def provider_failed(self, what: str, error: Exception) -> None:
        with self._lock:
            self._document_errors += 1

    @property
    def document_errors(self) -> int:
        with self._lock:
            return self._document_errors


class _ScrapeCollector:
    """Gauges (and the provider error counter) read from the engine when scraped."""

    def __init__(self, metrics: _EngineMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # values are read at collect time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        engine = self._metrics.engine
        errors = CounterMetricFamily("plait_provider_errors", "Embedding provider failures.", labels=["kind"])
        errors.add_metric(["documents"], self._metrics.document_errors)
        errors.add_metric(["query"], engine.query_guard.failures)
        yield errors
        circuit = GaugeMetricFamily("plait_embedding_circuit_open", "Query-embedding circuits open now.")
        circuit.add_metric([], engine.query_guard.open_circuits())
        yield circuit
        up = GaugeMetricFamily("plait_store_up", "1 when the store answered this scrape.")
        try:
            infos = engine.collections()
            runs = engine.refinery_runs()
        except PlaitError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        chunks = GaugeMetricFamily("plait_chunks", "Chunks per collection.", labels=["collection"])
        backlog = GaugeMetricFamily(
            "plait_chunks_without_vector", "Chunks still waiting for their vector.", labels=["collection"]
        )
        for info in infos:
            chunks.add_metric([info.name], info.chunks)
            backlog.add_metric([info.name], info.chunks_without_vector)
        yield chunks
        yield backlog
        refinery = GaugeMetricFamily("plait_refinery_runs", "Refinery runs per status.", labels=["status"])
        for status, count in runs.items():
            refinery.add_metric([status], count)
        yield refinery


class _Observed:
    """Pure ASGI middleware (outermost): request id in and out, timing, counts, access log."""

    def __init__(self, app: Any, *, metrics: _EngineMetrics, routes: Any) -> None:
        self.app = app
        self._metrics = metrics
        self._routes = routes

    def _template(self, scope: dict[str, Any]) -> str:
        from starlette.routing import Match

        for route in self._routes():
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return str(getattr(route, "path", "unmatched")) or "/"
        return "unmatched"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = None
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                incoming = value.decode("latin-1")
                break
        request_id = usable_request_id(incoming)
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                headers.append((HEADER.lower().encode("latin-1"), request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = self._template(scope)
            method = str(scope.get("method", ""))
            labels = {"method": method, "route": route, "status": str(status)}
            self._metrics.requests.labels(**labels).inc()
            self._metrics.latency.labels(**labels).observe(elapsed)
            client = scope.get("client")
            access_log.info(
                "%s %s %d %.1f ms", method, scope.get("path", ""), status, elapsed * 1000,
                extra={
                    "method": method, "route": route, "path": scope.get("path", ""), "status": status,
                    "duration_ms": round(elapsed * 1000, 2), "client": client[0] if client else None,
                    "request_id": request_id,
                },
            )
            request_id_var.reset(token)


def install_observability(app: FastAPI, engine: Plait, *, dependencies: Sequence[Any] = ()) -> CollectorRegistry:
    """Add ``/metrics``, ``/readyz`` and the request-id / metrics middleware to ``app``
    (call it last in :func:`~plait.api.http.create_app`, so the middleware is outermost and
    sees every answer, the guards' 413/503/403 included); ``dependencies`` guard ``/metrics``
    (the HTTP API's: an admin key for all collections when auth is on). Returns the registry."""
    from fastapi.responses import JSONResponse, Response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    metrics = _EngineMetrics(registry, engine)
    engine.events.subscribe(metrics)  # held weakly: the app keeps it (app.state.metrics)

    @app.get("/metrics", include_in_schema=False, dependencies=list(dependencies))
    def prometheus_metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/readyz", tags=["meta"], responses={503: {"description": "the store cannot be reached"}})
    def readyz() -> Any:
        """Readiness: 200 when the store answers, else 503 with the reason."""
        try:
            engine.store.ping()
        except PlaitError as exc:
            return JSONResponse(
                {"status": "unavailable", "error": str(exc).splitlines()[0][:300]},
                status_code=503,
                headers={"Retry-After": str(_RETRY_AFTER)},
            )
        return {"status": "ready"}

    # a probe may send HEAD: the same status without a body, not a second OpenAPI operation
    app.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)

    app.add_middleware(_Observed, metrics=metrics, routes=lambda: app.router.routes)
    app.state.metrics = metrics
    app.state.metrics_registry = registry
    return registry
