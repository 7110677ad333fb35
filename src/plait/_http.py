"""JSON over HTTP with bounded retries: the one request loop every HTTP provider uses.

Embedders (:mod:`plait.embeddings.remote`) and chat providers (:mod:`plait.llm`) share
:class:`RetryingJSONClient`, so the rules are the same everywhere:

* ``timeout`` bounds each attempt (connect, read, write and pool wait each);
  the worst case for one call is ``(retries + 1) * timeout`` plus the backoff sleeps
  ``backoff * 2**i`` (``i = 0 .. retries - 1``, each capped at :data:`MAX_BACKOFF`).
* Retried: connection errors, timeouts, HTTP 5xx and 429.
  Not retried: any other 4xx, malformed JSON.
* Still unreachable after the retries (refused, DNS, timeout), or still answering
  502/503/504 → :class:`~plait.errors.ProviderUnavailableError` naming the URL and
  the cause. Any other HTTP error status (after retries for 500 and 429) or a body
  that is not JSON → :class:`~plait.errors.ProviderResponseError` naming the status
  and a short excerpt of the body.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx

from plait.errors import ConfigError, ProviderResponseError, ProviderUnavailableError

logger = logging.getLogger(__name__)

__all__ = ["MAX_BACKOFF", "RetryingJSONClient", "check_retry_settings", "describe", "excerpt"]

#: Longest single sleep between two attempts, in seconds.
MAX_BACKOFF = 8.0

_EXCERPT_CHARS = 200

# Still answered with one of these after the retries: the service is unavailable,
# not broken (a proxy without upstream, an overloaded or still-starting server).
_GATEWAY_STATUSES = frozenset({502, 503, 504})


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of ``text`` on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe(exc: httpx.TransportError, timeout: float) -> str:
    """A short human cause for a transport failure."""
    if isinstance(exc, httpx.TimeoutException):
        phase = {
            httpx.ConnectTimeout: "connect",
            httpx.ReadTimeout: "read",
            httpx.WriteTimeout: "write",
            httpx.PoolTimeout: "pool",
        }.get(type(exc), "request")
        return f"timed out after {timeout:g}s ({phase} timeout)"
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        lowered = detail.lower()
        if "refused" in lowered:
            return f"connection refused ({detail})"
        if "name or service" in lowered or "nodename" in lowered or "resolv" in lowered:
            return f"DNS lookup failed ({detail})"
        return f"cannot connect ({detail})"
    return f"{type(exc).__name__}: {detail}"


def check_retry_settings(*, timeout: float, retries: int, backoff: float) -> None:
    """Raise :class:`~plait.errors.ConfigError` for a timeout, retry count or backoff out of range."""
    if not timeout > 0:
        raise ConfigError(f"timeout must be > 0 seconds, got {timeout!r}")
    if retries < 0:
        raise ConfigError(f"retries must be >= 0, got {retries!r}")
    if backoff < 0:
        raise ConfigError(f"backoff must be >= 0 seconds, got {backoff!r}")


class RetryingJSONClient:
    """POST JSON, get JSON back, retrying as the module docstring says.

    ``provider`` and ``model`` only word the error messages. One ``httpx.Client`` is
    opened on the first request and reused; :meth:`close` releases it.
    """

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Validate the settings; nothing is contacted until :meth:`post`."""
        check_retry_settings(timeout=timeout, retries=retries, backoff=backoff)
        self.provider = provider
        self.model = model
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self._headers = dict(headers or {})
        self._client: httpx.Client | None = None

    def close(self) -> None:
        """Close the connection pool (a later request opens a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                timeout=httpx.Timeout(self.timeout),
                headers={"Accept": "application/json", **self._headers},
                follow_redirects=False,
            )
        return self._client

    def _sleep_before_retry(self, attempt: int) -> None:
        delay = min(self.backoff * (2**attempt), MAX_BACKOFF)
        if delay > 0:
            time.sleep(delay)

    def post(self, url: str, payload: Mapping[str, Any]) -> Any:
        """POST ``payload`` as JSON to ``url`` and return the decoded answer."""
        attempts = self.retries + 1
        last_cause = ""
        last_response: httpx.Response | None = None
        for attempt in range(attempts):
            if attempt:
                logger.info(
                    "%s at %s: %s; retry %d of %d", self.provider, url, last_cause, attempt, self.retries
                )
                self._sleep_before_retry(attempt - 1)
            try:
                response = self._http().post(url, json=dict(payload))
            except httpx.TransportError as exc:
                last_cause = describe(exc, self.timeout)
                last_response = None
                continue
            status = response.status_code
            if status == 429 or status >= 500:
                last_response = response
                last_cause = f"HTTP {status}"
                continue
            if status >= 400:
                raise ProviderResponseError(
                    f"{self.provider} at {url} answered HTTP {status} for model "
                    f"{self.model!r}: {excerpt(response.text)}"
                )
            if status != 200:
                raise ProviderResponseError(
                    f"{self.provider} at {url} answered unexpected HTTP {status}: "
                    f"{excerpt(response.text)}"
                )
            try:
                return response.json()
            except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                raise ProviderResponseError(
                    f"{self.provider} at {url} returned malformed JSON: "
                    f"{excerpt(response.text) or '(empty body)'}"
                ) from exc
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if last_response is not None and last_response.status_code in _GATEWAY_STATUSES:
            raise ProviderUnavailableError(
                f"{self.provider} at {url} is unavailable after {tries}: "
                f"HTTP {last_response.status_code}: {excerpt(last_response.text)}"
            )
        if last_response is not None:
            raise ProviderResponseError(
                f"{self.provider} at {url} answered HTTP {last_response.status_code} "
                f"after {tries}: {excerpt(last_response.text)}"
            )
        raise ProviderUnavailableError(
            f"{self.provider} at {url} is unreachable after {tries}: {last_cause}"
        )
