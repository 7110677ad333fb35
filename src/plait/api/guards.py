"""ASGI guards in front of the HTTP API: admission, body limits, and browser-facing checks.

Outermost first, as :func:`plait.api.http.create_app` stacks them:

* :class:`LoopbackOnly` — with auth off, only loopback ``Host`` names (``localhost``,
  ``127.0.0.1``, ``[::1]``, any port, plus ``allowed_hosts``) are served: a web page
  that rebinds its DNS name to 127.0.0.1 sends its own name as ``Host`` and gets 403.
* :class:`NoSimpleRequests` — with auth off, a state-changing request (``POST``,
  ``PUT``, ``PATCH``, ``DELETE``) must carry ``Content-Type: application/json`` or an
  ``X-Plait-Request`` header; either forces a browser's CORS preflight, so a page on
  another site cannot send it (415 otherwise).
* :class:`Admission` — with auth on, an ``/v1/`` request without a valid key is a 401
  before a byte of its body is read; at most ``limit`` requests are in flight, of
  which anonymous ones (no valid key) may hold only ``limit - reserved``: slow
  anonymous clients cannot take the slots keyed callers need (503 + ``Retry-After``).
* :class:`BodyLimit` — a body over ``limit`` bytes is a 413; a body that has not fully
  arrived ``deadline`` seconds after the request started is a 408.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio

__all__ = [
    "BODY_DEADLINE",
    "LOOPBACK_HOSTS",
    "Admission",
    "BodyLimit",
    "KeyHeaderError",
    "LoopbackOnly",
    "NoSimpleRequests",
    "presented_token",
    "send_error",
]

BODY_DEADLINE = 10.0
"""Seconds a client has to send its whole request body."""
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_OPEN_PATHS = ("/healthz", "/readyz", "/metrics")  # probes and scrapes are never refused as "busy"


async def send_error(
    send: Any, status: int, message: str, *, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A one-line JSON error, ``{"error": message}``, straight from ASGI."""
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _header(scope: Any, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def host_name(host: str) -> str:
    """``"[::1]:8000"`` → ``"::1"``, ``"Localhost.:80"`` → ``"localhost"``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name.rstrip(".")


class LoopbackOnly:
    """Serve only requests whose ``Host`` is a loopback name (or one of ``allowed``)."""

    def __init__(self, app: Any, *, allowed: Sequence[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset((*LOOPBACK_HOSTS, *(host_name(h) for h in allowed)))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            raw = _header(scope, b"host")
            name = host_name(raw.decode("latin-1")) if raw else ""
            if name not in self.allowed:
                shown = name if name.isascii() and name.isprintable() and len(name) <= 100 else "?"
                await send_error(
                    send,
                    403,
                    f"Host {shown!r} is not served: without auth this server answers only "
                    "loopback host names (localhost, 127.0.0.1, [::1]); use plait serve "
                    "--allowed-host NAME to add one",
                )
                return
        await self.app(scope, receive, send)


class NoSimpleRequests:
    """State-changing requests need a JSON content type or an ``X-Plait-Request`` header."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("method", "GET").upper() in _STATE_CHANGING:
            kind = (_header(scope, b"content-type") or b"").split(b";", 1)[0].strip().lower()
            json_kind = kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))
            if not json_kind and _header(scope, b"x-plait-request") is None:
                await send_error(
                    send,
                    415,
                    f"{scope.get('method')} needs 'Content-Type: application/json' or an "
                    "'X-Plait-Request: 1' header (a cross-site page cannot send either)",
                )
                return
        await self.app(scope, receive, send)


class KeyHeaderError(ValueError):
    """The request's key headers contradict themselves or misuse ``X-API-Key``: a 401
    whose message (one line) says what to send instead."""


TWO_KEYS = (
    "two different API keys were sent, in 'Authorization: Bearer' and in 'X-API-Key': send one key "
    "(in either header, or the same one in both)"
)
BEARER_IN_X_API_KEY = (
    "X-API-Key takes the token alone, without 'Bearer ': send 'X-API-Key: <token>' "
    "or 'Authorization: Bearer <token>'"
)


def presented_token(scope: Any) -> str:
    """The API key a request carries (``Authorization: Bearer`` or ``X-API-Key``; "" for none).

    Raises :class:`KeyHeaderError` for an ``X-API-Key`` that starts with ``Bearer `` (a
    token has no space; the value is the token alone) and for two different keys, one in
    each header (which one the caller meant is not for the server to guess)."""
    header = (_header(scope, b"authorization") or b"").decode("latin-1")
    scheme, _, token = header.partition(" ")
    bearer = token.strip() if scheme.lower() == "bearer" else ""
    api_key = (_header(scope, b"x-api-key") or b"").decode("latin-1").strip()
    if api_key[:7].lower() == "bearer ":
        raise KeyHeaderError(BEARER_IN_X_API_KEY)
    if bearer and api_key and bearer != api_key:
        raise KeyHeaderError(TWO_KEYS)
    return bearer or api_key


class Admission:
    """The in-flight limit, with ``reserved`` slots only keyed requests may take; with
    ``authenticate`` given (auth on), ``/v1/`` requests without a valid key are a 401
    before their body is read. The counters are touched only on the event loop."""

    def __init__(
        self,
        app: Any,
        *,
        limit: int,
        reserved: int = 0,
        authenticate: Callable[[str], object | None] | None = None,
        unauthorized: str = "a valid API key is required",
        rejected: str = "this API key is not valid (unknown or revoked)",
    ) -> None:
        self.app = app
        self.limit = limit
        self.reserved = min(max(reserved, 0), limit - 1)
        self.authenticate = authenticate
        self.unauthorized = unauthorized
        self.rejected = rejected
        self.in_flight = 0
        self.anonymous = 0

    async def _keyed(self, scope: Any) -> tuple[str | None, bool]:
        """(why the request is refused if it is unkeyed — None: no key was presented —,
        whether it carries a valid key)."""
        if self.authenticate is None:
            return None, False
        try:
            token = presented_token(scope)
        except KeyHeaderError as exc:
            return str(exc), False
        if not token:
            return None, False
        return self.rejected, await anyio.to_thread.run_sync(self.authenticate, token) is not None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in _OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        refusal, keyed = await self._keyed(scope)
        if self.authenticate is not None and not keyed and str(scope.get("path", "")).startswith("/v1/"):
            message = refusal or self.unauthorized
            await send_error(send, 401, message, extra=[(b"www-authenticate", b"Bearer")])
            return
        anonymous_limit = self.limit - self.reserved if self.authenticate is not None else self.limit
        busy = self.in_flight >= self.limit or (not keyed and self.anonymous >= anonymous_limit)
        if busy:
            message = f"server busy: {self.in_flight} requests in flight (limit {self.limit}); retry shortly"
            await send_error(send, 503, message, extra=[(b"retry-after", b"1")])
            return
        self.in_flight += 1
        self.anonymous += 0 if keyed else 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.anonymous -= 0 if keyed else 1


class BodyLimit:
    """Refuse bodies over ``limit`` bytes (413) and bodies still arriving ``deadline``
    seconds after the request started (408)."""

    def __init__(self, app: Any, *, limit: int, deadline: float = BODY_DEADLINE) -> None:
        self.app = app
        self.limit = limit
        self.deadline = deadline

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = f"the request body is over {self.limit} bytes"
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await send_error(send, 413, too_big)
            return
        seen = 0
        rejected = False
        ends = time.monotonic() + self.deadline
        complete = False

        async def limited_receive() -> Any:
            nonlocal seen, rejected, complete
            if rejected:
                return {"type": "http.disconnect"}
            if complete:
                return await receive()  # after the body: a disconnect, whenever it comes
            remaining = ends - time.monotonic()
            event = None
            if remaining > 0:
                with anyio.move_on_after(remaining):
                    event = await receive()
            if event is None:
                rejected = True
                await send_error(
                    send, 408, f"the request body did not arrive within {self.deadline:g} s"
                )
                return {"type": "http.disconnect"}
            if event["type"] == "http.request":
                seen += len(event.get("body", b""))
                complete = not event.get("more_body", False)
                if seen > self.limit:
                    # Answer 413 now; the app sees a disconnect and whatever it sends is dropped.
                    rejected = True
                    await send_error(send, 413, too_big)
                    return {"type": "http.disconnect"}
            return event

        async def guarded_send(event: Any) -> None:
            if not rejected:
                await send(event)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not rejected:
                raise
