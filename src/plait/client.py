"""A Python client for a served plait (``plait serve``): the same calls as :class:`~plait.Plait`.

Moving from embedded to served is one line::

    engine = Plait(store="./.plait/plait.db")                       # embedded
    engine = Client("http://127.0.0.1:8000", api_key=token)         # served
    result = engine.search("what does ERR-4012 mean", collection="docs", k=5)

:class:`Client` (and :class:`AsyncClient`, the same methods as coroutines) has
``search``, ``search_request``, ``explain``, ``ask``, ``ask_request``, ``coverage``,
``collections``, ``reindex`` and ``usage`` with :class:`~plait.Plait`'s keyword options,
and ``faq_cards``, ``approve_card`` and ``reject_card`` for the FAQ review
(``Plait.refinery``'s ``cards``, ``approve``, ``reject``). They return the same models
(:class:`~plait.SearchResult`, :class:`~plait.ExplainResult`, :class:`~plait.AskResult`,
:class:`~plait.CoverageReport`, ``list[CollectionInfo]``, :class:`~plait.IndexReport`,
``UsageReport``, ``FaqCard``), parsed from the API's camelCase JSON. Fields a newer server
adds to an answer are ignored (the models refuse unknown fields in what they are *sent*,
not in what a client reads), so an older client keeps working against a newer server.

Errors are the :mod:`plait.errors` classes the server raised (``NotFoundError``,
``ValidationError``, ``ModelMismatchError``…), plus the served-only branch under
:class:`~plait.errors.ServiceError`: ``AuthenticationError`` (401),
``PermissionDeniedError`` (403), ``RateLimitError`` (429), ``ServiceUnavailableError``
(busy, refused) and ``ServiceTimeoutError`` (see :mod:`plait.client_errors`). Nothing is
retried: a ``ServiceUnavailableError`` says how long the server asked to wait in
``retry_after``.

``reindex`` runs on the server (the maintainer role); it takes no source options over
HTTP, and may take longer than a search: its ``timeout`` overrides the client's.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import httpx
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from plait.ask import AskRequest, AskResult
from plait.client_errors import error_from_response, error_from_transport
from plait.coverage import CoverageReport
from plait.errors import ConfigError, ServiceError
from plait.explain_models import ExplainResult
from plait.refinery.models import FaqCard
from plait.request_body import request_body
from plait.retrieval.request import SearchRequest
from plait.types import CollectionInfo, IndexReport, SearchResult
from plait.usage import UsageReport

__all__ = ["DEFAULT_TIMEOUT", "AsyncClient", "Client"]

DEFAULT_TIMEOUT = 30.0
"""Seconds each request may take (connect, read, write and pool wait each)."""

_USER_AGENT = "plait-client/0.1.0"

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One API request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    body: Mapping[str, Any] | None = None
    timeout: float | None = None


def _model(kind: type[M]) -> Callable[[Any], M]:
    def parse(data: Any) -> M:
        # a newer server's extra fields are not this client's business
        return kind.model_validate(data, extra="ignore")

    return parse


def _models(kind: type[M]) -> Callable[[Any], list[M]]:
    def parse(data: Any) -> list[M]:
        if not isinstance(data, list):
            raise TypeError(f"expected a JSON list, got {type(data).__name__}")
        return [kind.model_validate(item, extra="ignore") for item in data]

    return parse


def _as_body(request: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(request, BaseModel):
        return request.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dict(request)


def _in(collection: str, *rest: str) -> str:
    return "/".join(["/v1/collections", quote(collection, safe=""), *rest])


# The calls, once for both clients: each builds its request from Plait's keyword options;
# _sync / _asynchronous make the methods of Client / AsyncClient of them, with their
# signatures (the same as Plait's: tests/api/test_client.py compares them).


def _search(
    query: str,
    *,
    collection: str = "default",
    k: int = 8,
    fusion: str | Mapping[str, Any] | None = None,
    lexical_weight: float | str | None = None,
    rrf_k: int | None = None,
    overfetch: int | None = None,
    threshold: float | None = None,
    scopes: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    rerank: str | None = None,
    k_overfetch: int | None = None,
    offset: int = 0,
    qa_first: bool = False,
    language_prior: bool | None = None,
    mode: str = "hybrid",
    max_per_source: int | None = None,
    group_by: str | None = None,
) -> _Call[SearchResult]:
    """Hybrid search, as :meth:`plait.Plait.search`."""
    return _Call("POST", _in(collection, "search"), _model(SearchResult), request_body(locals()))


def _search_request(collection: str, request: SearchRequest | Mapping[str, Any]) -> _Call[SearchResult]:
    """Search with a request model (or its camelCase JSON form)."""
    return _Call("POST", _in(collection, "search"), _model(SearchResult), _as_body(request))


def _explain(
    query: str,
    *,
    doc: str | None = None,
    path: str | None = None,
    chunk: str | None = None,
    collection: str = "default",
    **options: Any,
) -> _Call[ExplainResult]:
    """Why a document did (not) come back for ``query``, as :meth:`plait.Plait.explain`."""
    body = request_body({"query": query, "doc": doc, "path": path, "chunk": chunk, **options}, skip=())
    return _Call("POST", _in(collection, "explain"), _model(ExplainResult), body)


def _ask(
    question: str,
    *,
    collection: str = "default",
    k: int | None = None,
    qa_first: bool = False,
    include_drafts: bool | None = None,
    rerank: str | None = None,
    scopes: Sequence[str] | None = None,
    min_cosine: float | None = None,
    min_term_coverage: float | None = None,
    mode: str = "hybrid",
) -> _Call[AskResult]:
    """A grounded answer with ``[n]`` citations, as :meth:`plait.Plait.ask`."""
    return _Call("POST", _in(collection, "ask"), _model(AskResult), request_body(locals()))


def _ask_request(collection: str, request: AskRequest | Mapping[str, Any]) -> _Call[AskResult]:
    """Ask with a request model (or its camelCase JSON form)."""
    return _Call("POST", _in(collection, "ask"), _model(AskResult), _as_body(request))


def _coverage(*, collection: str = "default") -> _Call[CoverageReport]:
    """Per scope: sources present against sources with chunks, vectors, last index."""
    return _Call("GET", _in(collection, "coverage"), _model(CoverageReport))


def _collections() -> _Call[list[CollectionInfo]]:
    """The collections the key covers, with model and counts."""
    return _Call("GET", "/v1/collections", _models(CollectionInfo))


def _reindex(*, collection: str = "default", timeout: float | None = None) -> _Call[IndexReport]:
    """Reindex on the server (maintainer role); ``timeout`` overrides the client's."""
    return _Call("POST", _in(collection, "reindex"), _model(IndexReport), timeout=timeout)


def _usage(collection: str = "default", *, since: str | None = None) -> _Call[UsageReport]:
    """Provider usage per hour, purpose, provider and model (maintainer), as :meth:`plait.Plait.usage`."""
    query = "" if since is None else "?" + urlencode({"since": since})
    return _Call("GET", _in(collection, "usage") + query, _model(UsageReport))


def _faq_cards(collection: str = "default", *, status: str | None = None) -> _Call[list[FaqCard]]:
    """The collection's FAQ cards, oldest first (a reader key: approved ones only)."""
    query = "" if status is None else "?" + urlencode({"status": status})
    return _Call("GET", _in(collection, "faq") + query, _models(FaqCard))


def _approve_card(collection: str, card_id: str) -> _Call[FaqCard]:
    """Approve a card (maintainer): ``qaFirst`` serves it from now on."""
    return _Call("POST", _in(collection, "faq", quote(card_id, safe=""), "approve"), _model(FaqCard))


def _reject_card(collection: str, card_id: str) -> _Call[FaqCard]:
    """Reject a card (maintainer): it leaves the index and later runs do not draft it again."""
    return _Call("POST", _in(collection, "faq", quote(card_id, safe=""), "reject"), _model(FaqCard))


def _health() -> _Call[dict[str, Any]]:
    """``GET /healthz``: ``{"status": "ok", "auth": …, "defaultCollection": …}``."""

    def parse(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        return data

    return _Call("GET", "/healthz", parse)


def _sync(build: Callable[P, _Call[T]]) -> Callable[Concatenate[Client, P], T]:
    """The :class:`Client` method that sends the call ``build`` makes (its signature and docstring)."""

    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._send(build(*args, **kwargs))

    return _named(method, "Client", build)


def _asynchronous(
    build: Callable[P, _Call[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """The :class:`AsyncClient` coroutine method that sends the call ``build`` makes."""

    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._send(build(*args, **kwargs))

    return _named(method, "AsyncClient", build)


def _named(method: F, owner: str, build: Callable[..., Any]) -> F:
    """``method`` named as the method it becomes (``Client.search``, not ``_search``), with
    ``build``'s signature after ``self``."""
    method.__name__ = build.__name__.removeprefix("_")
    method.__qualname__ = f"{owner}.{method.__name__}"
    signature = inspect.signature(build)
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(parameters=[self, *signature.parameters.values()])  # type: ignore[attr-defined]
    return method


class _Base:
    """Settings and answer handling shared by :class:`Client` and :class:`AsyncClient`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000, got {base_url!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {timeout!r}")
        if api_key is not None and not api_key.strip():
            raise ConfigError("api_key is empty: pass the token 'plait keys create' printed, or None")
        self.base_url = base_url.strip().rstrip("/")
        self.timeout = float(timeout)
        self._headers = {
            "Accept": "application/json",
            "User-Agent": _USER_AGENT,
            # with auth off, a body-less POST (reindex) needs it (plait.api.guards)
            "X-Plait-Request": "1",
            **({"Authorization": f"Bearer {api_key.strip()}"} if api_key else {}),
            **dict(headers or {}),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def _timeout(self, call: _Call[Any]) -> httpx.Timeout:
        return httpx.Timeout(call.timeout if call.timeout is not None else self.timeout)

    def _failed(self, exc: httpx.TransportError, call: _Call[Any]) -> ServiceError:
        seconds = call.timeout if call.timeout is not None else self.timeout
        return error_from_transport(exc, method=call.method, url=self.base_url + call.path, timeout=seconds)

    def _read(self, response: httpx.Response, call: _Call[T]) -> T:
        if response.status_code >= 400:
            raise error_from_response(response)
        where = f"{call.method} {self.base_url}{call.path}"
        try:
            data = response.json()
        except ValueError:
            raise ServiceError(
                f"{where}: the answer is not JSON (HTTP {response.status_code}); is this a plait server?",
                status=response.status_code,
            ) from None
        try:
            return call.parse(data)
        except (PydanticValidationError, TypeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ServiceError(
                f"{where}: the answer is not what this client expects ({first}); "
                "is the server a different plait version?",
                status=response.status_code,
            ) from None


class Client(_Base):
    """A served plait over HTTP, with the calls and models of :class:`~plait.Plait`.

    ``base_url`` is the server's address (``http://127.0.0.1:8000``; a path prefix is
    kept), ``api_key`` a token from ``plait keys create`` (None for ``--no-auth``),
    ``timeout`` the seconds each request may take. Use it as a context manager, or
    :meth:`close` it, to release the connection pool.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, headers=headers)
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=self.timeout,
            follow_redirects=False, transport=transport,
        )

    def _send(self, call: _Call[T]) -> T:
        try:
            response = self._http.request(
                call.method, call.path, json=call.body, timeout=self._timeout(call)
            )
        except httpx.TransportError as exc:
            raise self._failed(exc, call) from exc
        return self._read(response, call)

    search = _sync(_search)
    search_request = _sync(_search_request)
    explain = _sync(_explain)
    ask = _sync(_ask)
    ask_request = _sync(_ask_request)
    coverage = _sync(_coverage)
    collections = _sync(_collections)
    reindex = _sync(_reindex)
    usage = _sync(_usage)
    faq_cards = _sync(_faq_cards)
    approve_card = _sync(_approve_card)
    reject_card = _sync(_reject_card)
    health = _sync(_health)

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Base):
    """:class:`Client` for asyncio: the same methods as coroutines (``await client.search(…)``).

    Close it with ``await client.aclose()`` or ``async with AsyncClient(…) as client``.
    Its connections belong to the event loop of its first request: use one client per
    loop (not across several ``asyncio.run`` calls).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, headers=headers)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=self.timeout,
            follow_redirects=False, transport=transport,
        )

    async def _send(self, call: _Call[T]) -> T:
        try:
            response = await self._http.request(
                call.method, call.path, json=call.body, timeout=self._timeout(call)
            )
        except httpx.TransportError as exc:
            raise self._failed(exc, call) from exc
        return self._read(response, call)

    search = _asynchronous(_search)
    search_request = _asynchronous(_search_request)
    explain = _asynchronous(_explain)
    ask = _asynchronous(_ask)
    ask_request = _asynchronous(_ask_request)
    coverage = _asynchronous(_coverage)
    collections = _asynchronous(_collections)
    reindex = _asynchronous(_reindex)
    usage = _asynchronous(_usage)
    faq_cards = _asynchronous(_faq_cards)
    approve_card = _asynchronous(_approve_card)
    reject_card = _asynchronous(_reject_card)
    health = _asynchronous(_health)

    async def aclose(self) -> None:
        """Release the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
