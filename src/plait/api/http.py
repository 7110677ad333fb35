"""The HTTP API (OpenAPI at ``/openapi.json``) and the search & debug page at ``/``.

A thin adapter over :class:`plait.service.Plait`: request and response bodies are the
library's own models in their camelCase JSON form, and errors map from
:mod:`plait.errors`::

    ValidationError (and request validation)        422
    ConfigError (e.g. rerank asked of a server
    configured with no cross-encoder or LLM)         422
    NotFoundError                                    404
    ModelMismatchError, SourceError, ConflictError   409
    StoreReadOnlyError (a write on a read replica)   409 (not retried: write to the primary)
    ProviderResponseError                            502
    StoreUnavailableError, ProviderUnavailableError  503 with ``Retry-After: 5``
    StoreConflictError (deadlock, serialization)     503 with ``Retry-After: 5``
    any other PlaitError                             500 with its message
    anything else                                    500 "internal error" (no traceback)
    body over ``max_body_bytes``                     413
    more than ``max_in_flight`` requests at once     503 with ``Retry-After: 1``
    a body not received within ``body_deadline``     408
    auth off: a Host that is not loopback            403
    auth off: POST/PUT/PATCH/DELETE without a JSON
    content type or ``X-Plait-Request``               415

Every error body is ``{"error": "<one-line message>"}``; an error plait raised also names
its class in the ``X-Plait-Error`` header (e.g. ``ModelMismatchError``: the nearest
class of :mod:`plait.errors`), which :class:`plait.client.Client` raises again. With auth on, each request
carries ``Authorization: Bearer <token>`` (or ``X-API-Key``): no key → 401 saying how to
send one, an unknown or revoked key → 401 saying so (not which of the two), two
different keys (one in each header) or ``X-API-Key: Bearer …`` → 401 saying so,
a role too low → 403, and a collection the key does not cover → 404 with exactly the
body of a collection that does not exist, so existence never leaks.

FastAPI and uvicorn are the ``server`` extra: ``pip install 'plait[server]'``.
"""

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import StrictBool

from plait._text import surrogate_error
from plait.api.guards import (
    BODY_DEADLINE,
    Admission,
    BodyLimit,
    KeyHeaderError,
    LoopbackOnly,
    NoSimpleRequests,
    presented_token,
)
from plait.api.keys import ALL_COLLECTIONS, ApiKey, KeyStore, Role, sees_drafts
from plait.api.messages import describe_unreadable, describe_validation, one_line
from plait.client_errors import ERROR_HEADER
from plait.coverage import CoverageReport
from plait.errors import (
    ConfigError,
    ConflictError,
    ModelMismatchError,
    NotFoundError,
    PlaitError,
    ProviderResponseError,
    ProviderUnavailableError,
    SourceError,
    StoreConflictError,
    StoreReadOnlyError,
    StoreUnavailableError,
    ValidationError,
)
from plait.explain import ExplainResult
from plait.search import SearchRequest
from plait.types import CollectionInfo, IndexReport, Model, SearchResult
from plait.usage import UsageReport

if TYPE_CHECKING:
    from fastapi import FastAPI

    from plait.service import Plait

__all__ = ["ERROR_HEADER", "MAX_BODY_BYTES", "MAX_IN_FLIGHT", "create_app", "error_name", "error_status"]

MAX_BODY_BYTES = 1024 * 1024
MAX_IN_FLIGHT = 64
"""Concurrent requests served before the rest get a quick 503 (``create_app(max_in_flight=)``)."""
_UNAUTHORIZED = "a valid API key is required: send 'Authorization: Bearer <token>' or 'X-API-Key: <token>'"
_REJECTED = (
    "this API key is not valid (unknown or revoked): check the token sent, or ask an admin for a key "
    "('plait keys create --role reader -c COLLECTION'; 'plait keys list' shows which are revoked)"
)
RETRY_AFTER_UNAVAILABLE = 5
"""Seconds in ``Retry-After`` of a 503 for a busy store or an unreachable provider."""

_STATUS: tuple[tuple[type[PlaitError], int], ...] = (
    (ConflictError, 409),
    # a write on a hot standby: the replica stays read-only, so retrying it here (a 503's
    # promise) cannot succeed; the request conflicts with what this server is
    (StoreReadOnlyError, 409),
    (ValidationError, 422),
    (ConfigError, 422),
    (NotFoundError, 404),
    (ModelMismatchError, 409),
    (SourceError, 409),
    (ProviderResponseError, 502),
    (StoreConflictError, 503),
    (StoreUnavailableError, 503),
    (ProviderUnavailableError, 503),
)

_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def error_status(exc: PlaitError) -> int:
    """The HTTP status for a plait error."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def error_name(exc: PlaitError) -> str:
    """The name of the nearest class of :mod:`plait.errors` that ``exc`` is an instance of."""
    for kind in type(exc).__mro__:
        if kind.__module__ == PlaitError.__module__:
            return kind.__name__
    return PlaitError.__name__


def _not_found(collection: str) -> NotFoundError:
    # The same words the service uses, so a hidden collection looks exactly like a missing one.
    return NotFoundError(f"collection {collection!r} does not exist")


def _require_fastapi() -> None:
    try:
        import fastapi  # noqa: F401
    except ImportError:
        raise ConfigError(
            "the HTTP API needs FastAPI and uvicorn: pip install 'plait[server]'"
        ) from None


def _web_dir() -> Path:
    return Path(str(resources.files("plait") / "web"))


def create_app(
    engine: "Plait",
    *,
    auth: bool = True,
    keys: KeyStore | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    default_collection: str = "default",
    max_in_flight: int = MAX_IN_FLIGHT,
    reserved_for_keys: int | None = None,
    body_deadline: float = BODY_DEADLINE,
    allowed_hosts: Sequence[str] = (),
) -> "FastAPI":
    """The FastAPI app for ``engine``; ``keys`` is required when ``auth`` is on.

    Over ``max_in_flight`` concurrent requests the rest get 503 with ``Retry-After``;
    ``reserved_for_keys`` of them (default a quarter, at least 1) only requests with a
    valid key may take. With auth on, an API request without a valid key is a 401 before
    its body is read; every body must arrive within ``body_deadline`` seconds (408).
    With auth off, only loopback ``Host`` names (and ``allowed_hosts``) are served and
    state-changing requests need a JSON content type or an ``X-Plait-Request`` header
    (:mod:`plait.api.guards`).
    """
    _require_fastapi()
    from fastapi import Depends, FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles
    from starlette.exceptions import HTTPException as StarletteHTTPException

    if auth and keys is None:
        raise ConfigError("auth is on but no key store was given: pass keys=KeyStore(path)")
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise ConfigError(f"max_in_flight must be an integer of at least 1, got {max_in_flight!r}")
    if not body_deadline > 0:
        raise ConfigError(f"body_deadline must be > 0 seconds, got {body_deadline!r}")
    reserved = max(1, max_in_flight // 4) if reserved_for_keys is None else reserved_for_keys

    app = FastAPI(
        title="plait",
        version="0.1.0",
        summary="Hybrid retrieval: BM25 and dense vectors fused before the cut, with citations.",
    )

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": one_line(message)}, status_code=status, headers=headers)

    @app.exception_handler(PlaitError)
    async def _plait_error(_: Request, exc: PlaitError) -> JSONResponse:
        status = error_status(exc)
        # a busy store or an unreachable provider: worth retrying, so say when
        headers = {ERROR_HEADER: error_name(exc)}
        if status == 503:
            headers["Retry-After"] = str(RETRY_AFTER_UNAVAILABLE)
        return error(status, str(exc), headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, describe_validation(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's 400 "There was an error parsing the body" for a body that is not UTF-8 or
        # nests too deeply: malformed JSON, said as such, like a JSON syntax error (422)
        unreadable = describe_unreadable(exc.__cause__) if exc.status_code == 400 else None
        if unreadable is not None:
            return error(422, unreadable)
        return error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(UnicodeEncodeError)
    async def _surrogate(_: Request, exc: UnicodeEncodeError) -> JSONResponse:
        # a lone surrogate ("\\ud800") in any string field, met by the store or by the
        # response's own encoder: the client's input, so 422 (never a reset connection)
        invalid = surrogate_error(exc)
        if invalid is None:
            return error(500, "internal error")
        return error(422, str(invalid), {ERROR_HEADER: error_name(invalid)})

    @app.exception_handler(Exception)
    async def _crash(_: Request, __: Exception) -> JSONResponse:
        return error(500, "internal error")

    class _Unauthorized(Exception):
        def __init__(self, message: str) -> None:
            super().__init__(message)

    class _Forbidden(Exception):
        def __init__(self, message: str) -> None:
            super().__init__(message)

    @app.exception_handler(_Unauthorized)
    async def _unauthorized(_: Request, exc: Exception) -> JSONResponse:
        return error(401, str(exc), {"WWW-Authenticate": "Bearer"})

    @app.exception_handler(_Forbidden)
    async def _forbidden(_: Request, exc: Exception) -> JSONResponse:
        return error(403, str(exc))

    def principal(request: Request) -> ApiKey | None:
        """The caller's key (None when auth is off); 401 when auth is on and it is missing."""
        if not auth:
            return None
        try:
            presented = presented_token(request.scope)
        except KeyHeaderError as exc:  # two different keys, or 'X-API-Key: Bearer …'
            raise _Unauthorized(str(exc)) from None
        key = keys.authenticate(presented) if keys is not None else None
        if key is None:
            raise _Unauthorized(_REJECTED if presented else _UNAUTHORIZED)
        return key

    def allow(key: ApiKey | None, collection: str, role: Role, action: str) -> None:
        if key is None:
            return
        if not key.covers(collection):
            raise _not_found(collection)
        if not key.role.includes(role):
            raise _Forbidden(f"{action} needs the {role.value} role; this key is a {key.role.value}")

    Caller = Depends(principal)

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict[str, Any]:
        """Liveness: the process answers and whether it wants API keys."""
        return {"status": "ok", "auth": auth, "defaultCollection": default_collection}

    # health checkers may send HEAD: GET's answer without its body (the server drops it),
    # kept out of the OpenAPI document, which would otherwise list the operation twice
    app.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False)

    @app.get("/v1/me", tags=["meta"], responses={401: {"description": "no or unknown API key"}})
    def me(key: ApiKey | None = Caller) -> dict[str, Any]:
        """The caller's role and the collections its key covers (``*``: all), so a client can
        offer only what the key may do; with auth off, every request acts as an admin."""
        if key is None:
            return {"auth": False, "role": Role.ADMIN.value, "collection": "*"}
        return {"auth": True, "role": key.role.value, "collection": key.collection}

    @app.get(
        "/v1/collections",
        response_model=list[CollectionInfo],
        tags=["collections"],
        responses={401: {"description": "no or unknown API key"}},
    )
    def list_collections(key: ApiKey | None = Caller) -> list[CollectionInfo]:
        """The collections the caller's key covers, with model and counts."""
        infos = engine.collections()
        return [i for i in infos if key is None or key.covers(i.name)]

    @app.post(
        "/v1/collections/{collection}/search",
        response_model=SearchResult,
        tags=["search"],
        responses={
            401: {"description": "no or unknown API key"},
            404: {"description": "no such collection (or not covered by the key)"},
            400: {"description": "a body that cannot be parsed (e.g. JSON nested too deep)"},
            409: {"description": "the collection was indexed with another embedding model"},
            422: {"description": "invalid request"},
        },
    )
    def search(collection: str, body: SearchRequest, key: ApiKey | None = Caller) -> SearchResult:
        """Hybrid search: both arms over-fetch, fusion, then the top-``k`` cut."""
        allow(key, collection, Role.READER, "search")
        # a reader never sees FAQ cards not yet approved, even naming scope faq-card
        return engine.search_request(collection, body, drafts_visible=sees_drafts(key))

    class ReindexRequest(Model):
        """What ``POST …/reindex`` may say (all optional; the CLI's ``--scope``, ``--full``,
        ``--allow-empty``). ``plait reindex --source`` is not offered over HTTP: it names
        a path on the server's disk."""

        scope: str | None = None
        full: StrictBool = False
        allow_empty: StrictBool = False

    class ExplainRequest(SearchRequest):
        """A search request plus the document to explain: exactly one of doc, path, chunk."""

        doc: str | None = None
        path: str | None = None
        chunk: str | None = None

    @app.post(
        "/v1/collections/{collection}/explain",
        response_model=ExplainResult,
        tags=["search"],
        responses={
            401: {"description": "no or unknown API key"},
            404: {"description": "no such collection (or not covered by the key)"},
            400: {"description": "a body that cannot be parsed (e.g. JSON nested too deep)"},
            422: {"description": "invalid request (name exactly one of doc, path, chunk)"},
        },
    )
    def explain(collection: str, body: ExplainRequest, key: ApiKey | None = Caller) -> ExplainResult:
        """Why a document did (not) come back: every stage for it, and a one-line diagnosis."""
        allow(key, collection, Role.READER, "explain")
        options = body.model_dump(exclude={"query", "doc", "path", "chunk"}, exclude_none=True)
        drafts = sees_drafts(key)  # as the caller's search
        return engine.explain(
            body.query, doc=body.doc, path=body.path, chunk=body.chunk, collection=collection,
            drafts_visible=drafts, **options,
        )

    @app.post(
        "/v1/collections/{collection}/reindex",
        response_model=IndexReport,
        tags=["collections"],
        responses={
            401: {"description": "no or unknown API key"},
            403: {"description": "the key is not a maintainer"},
            404: {"description": "no such collection (or not covered by the key)"},
            422: {"description": "an unknown or invalid body field"},
        },
    )
    def reindex(collection: str, body: ReindexRequest | None = None, key: ApiKey | None = Caller) -> IndexReport:
        """Re-read the recorded sources (unchanged chunks are not re-embedded), backfill vectors.

        The optional body narrows or widens the run as ``plait reindex`` does: ``scope``,
        ``full`` (embed everything again), ``allowEmpty`` (let a root that yields nothing
        delete its sources). Any other field is a 422, never silently ignored."""
        allow(key, collection, Role.MAINTAINER, "reindex")
        options = body or ReindexRequest()
        return engine.reindex(  # the engine runs one reindex at a time
            collection=collection, scope=options.scope, full=options.full, allow_empty=options.allow_empty
        )

    @app.get(
        "/v1/collections/{collection}/coverage",
        response_model=CoverageReport,
        tags=["collections"],
        responses={
            401: {"description": "no or unknown API key"},
            404: {"description": "no such collection (or not covered by the key)"},
        },
    )
    def coverage(collection: str, key: ApiKey | None = Caller) -> CoverageReport:
        """Per scope: sources present against sources with chunks, vectors, model, last index."""
        allow(key, collection, Role.READER, "coverage")
        return engine.coverage(collection=collection)

    @app.get(
        "/v1/collections/{collection}/usage",
        response_model=UsageReport,
        tags=["collections"],
        responses={
            401: {"description": "no or unknown API key"},
            403: {"description": "the key is not a maintainer"},
            404: {"description": "no such collection (or not covered by the key)"},
            422: {"description": "since is not an ISO date/time or Nh / Nd"},
        },
    )
    def usage(collection: str, since: str | None = None, key: ApiKey | None = Caller) -> UsageReport:
        """Embedding and LLM provider usage per hour, purpose, provider and model (maintainer)."""
        allow(key, collection, Role.MAINTAINER, "usage")
        return engine.usage(collection, since=since)

    from plait.api.http_refinery import add_refinery_routes

    add_refinery_routes(app, engine, allow, Caller)

    from plait.api.http_cockpit import add_cockpit_routes

    add_cockpit_routes(app, engine, allow, Caller)

    web = _web_dir()
    if web.is_dir():
        app.mount("/web", StaticFiles(directory=str(web)), name="web")

        @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
        def page() -> FileResponse:
            return FileResponse(web / "index.html", headers=_PAGE_HEADERS)

        @app.get("/favicon.ico", include_in_schema=False)
        def favicon() -> FileResponse:
            return FileResponse(web / "favicon.svg", media_type="image/svg+xml")

    # innermost first: body limits, admission (key check before the body), then the
    # browser-facing checks a server without keys needs
    app.add_middleware(BodyLimit, limit=max_body_bytes, deadline=body_deadline)
    app.add_middleware(
        Admission,
        limit=max_in_flight,
        reserved=reserved if auth else 0,
        authenticate=keys.authenticate if auth and keys is not None else None,
        unauthorized=_UNAUTHORIZED,
        rejected=_REJECTED,
    )
    if not auth:
        app.add_middleware(NoSimpleRequests)
        app.add_middleware(LoopbackOnly, allowed=tuple(allowed_hosts))

    def metrics_reader(request: Request) -> None:
        """``/metrics`` names every collection: with auth on it takes an admin key for all."""
        key = principal(request)
        if key is not None and not (key.collection == ALL_COLLECTIONS and key.role.includes(Role.ADMIN)):
            raise _Forbidden("/metrics needs an admin key for all collections ('*')")

    from plait.api.observability import install_observability

    install_observability(app, engine, dependencies=[Depends(metrics_reader)])  # outermost middleware
    return app
