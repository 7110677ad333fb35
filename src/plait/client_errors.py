"""HTTP answers and transport failures of a plait server as :mod:`plait.errors` classes.

Used by :mod:`plait.client`. An error the server raised names its class in the
``X-Plait-Error`` header (see :mod:`plait.api.http`), and the client raises that class
again with the server's one-line message. Without the header (an older server, a
proxy, or an answer of the server's guards) the status decides::

    401                     AuthenticationError
    403                     PermissionDeniedError
    404                     NotFoundError
    409                     ConflictError
    400, 413, 415, 422      ValidationError
    408                     ServiceTimeoutError
    429                     RateLimitError
    502, 503, 504           ServiceUnavailableError
    anything else           ServiceError

No answer at all: a timeout is a :class:`~plait.errors.ServiceTimeoutError`, a refused
connection or a failed DNS lookup a :class:`~plait.errors.ServiceUnavailableError`.
Every :class:`~plait.errors.ServiceError` carries ``status`` and ``retry_after``; every
error raised from an answer has a note naming the request and the status.
"""

from __future__ import annotations

import email.utils
import json
import time

import httpx

import plait.errors as errors
from plait._http import describe, excerpt
from plait.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    PlaitError,
    RateLimitError,
    ServiceError,
    ServiceTimeoutError,
    ServiceUnavailableError,
    ValidationError,
)

__all__ = ["ERROR_HEADER", "error_from_response", "error_from_transport", "retry_after"]

ERROR_HEADER = "X-Plait-Error"
"""The response header naming the error's class (the server's ``plait.api.http.ERROR_HEADER``)."""

_BY_STATUS: dict[int, type[PlaitError]] = {
    400: ValidationError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: ServiceTimeoutError,
    409: ConflictError,
    413: ValidationError,
    415: ValidationError,
    422: ValidationError,
    429: RateLimitError,
    502: ServiceUnavailableError,
    503: ServiceUnavailableError,
    504: ServiceUnavailableError,
}


def _named(name: str | None) -> type[PlaitError] | None:
    """The :mod:`plait.errors` class called ``name``, if there is one."""
    if not name or name not in errors.__all__:
        return None
    kind = getattr(errors, name, None)
    return kind if isinstance(kind, type) and issubclass(kind, PlaitError) else None


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), else None."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds)


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]:
        return str(body["error"])
    text = excerpt(response.text) if response.text else ""
    return f"HTTP {response.status_code}" + (f": {text}" if text else "")


def error_from_response(response: httpx.Response) -> PlaitError:
    """The error for an answer with an error status (>= 400)."""
    status = response.status_code
    kind = _named(response.headers.get(ERROR_HEADER)) or _BY_STATUS.get(status, ServiceError)
    message = _message(response)
    exc: PlaitError
    if issubclass(kind, ServiceError):
        exc = kind(message, status=status, retry_after=retry_after(response.headers.get("retry-after")))
    else:
        exc = kind(message)
    exc.add_note(f"from {response.request.method} {response.request.url} (HTTP {status})")
    return exc


def error_from_transport(exc: httpx.TransportError, *, method: str, url: str, timeout: float) -> ServiceError:
    """The error for a request that got no answer (timeout, refused, DNS, a broken connection)."""
    cause = describe(exc, timeout)
    if isinstance(exc, httpx.TimeoutException):
        return ServiceTimeoutError(f"{method} {url}: no answer from the plait server, {cause}")
    return ServiceUnavailableError(f"{method} {url}: cannot reach the plait server, {cause}")
