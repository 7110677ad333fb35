"""Embedders that call an HTTP service: Ollama and any OpenAI-compatible API.

Both share one request loop (:class:`HTTPEmbedder`, built on
:class:`plait._http.RetryingJSONClient`, which the LLM providers use too):

* ``timeout`` bounds each attempt (connect, read, write and pool wait each);
  the worst case for one batch is ``(retries + 1) * timeout`` plus the backoff sleeps
  ``backoff * 2**i`` (``i = 0 .. retries - 1``, each capped at :data:`MAX_BACKOFF`).
* Retried: connection errors, timeouts, HTTP 5xx and 429.
  Not retried: any other 4xx, malformed JSON, an answer of the wrong shape.
* Still unreachable after the retries (refused, DNS, timeout), or still answering
  502/503/504 → :class:`~plait.errors.ProviderUnavailableError` naming the URL and
  the cause. Any other HTTP error status (after retries for 500 and 429) or a bad
  answer → :class:`~plait.errors.ProviderResponseError` naming the status and a short
  excerpt of the body.

Neither class knows its dimension before the first answer unless told
(``OpenAIEmbedder(dimensions=...)``); :attr:`HTTPEmbedder.known_dimension` gives the
published dimension of well-known models as a hint only.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import numpy as np

from plait._http import MAX_BACKOFF, RetryingJSONClient, check_retry_settings, excerpt
from plait.embeddings.base import BaseEmbedder, TextKind, parse_languages
from plait.errors import ConfigError, ProviderResponseError
from plait.usage import UsageEvent, embedding_tokens, estimate_tokens, report

__all__ = [
    "KNOWN_DIMENSIONS",
    "MAX_BACKOFF",
    "HTTPEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
]

#: Published output dimensions of common models (a hint; never enforced).
KNOWN_DIMENSIONS: dict[str, int] = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "snowflake-arctic-embed": 1024,
    "bge-m3": 1024,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class HTTPEmbedder(BaseEmbedder):
    """Shared HTTP plumbing: one retrying JSON client, bounded retries, error mapping.

    Subclasses implement :meth:`_endpoint`, :meth:`_payload` and :meth:`_parse`.
    Use as a context manager, or call :meth:`close`, to release connections.
    """

    provider = "http"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        batch_size: int = 32,
        headers: Mapping[str, str] | None = None,
        languages: str | Sequence[str] | None = None,
    ) -> None:
        """Validate the settings; no connection is made until the first embed.

        ``languages`` declares what the remote model was trained on (ISO 639-1 codes,
        a list or ``"en,pt"``); undeclared, fusion treats its coverage as unknown.
        """
        super().__init__()
        self.languages = parse_languages(languages)
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{self.provider} base_url must start with http:// or https://, got {base_url!r}"
            )
        if not model:
            raise ConfigError(f"{self.provider} model must not be empty")
        check_retry_settings(timeout=timeout, retries=retries, backoff=backoff)
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.batch_size = int(batch_size)
        self._headers = dict(headers or {})
        self._transport = RetryingJSONClient(
            provider=self.provider,
            model=model,
            timeout=self.timeout,
            retries=self.retries,
            backoff=self.backoff,
            headers=self._headers,
        )

    # -- subclass hooks -------------------------------------------------------

    def _endpoint(self) -> str:
        raise NotImplementedError

    def _payload(self, texts: Sequence[str], kind: TextKind) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, answer: Any, count: int) -> np.ndarray:
        raise NotImplementedError

    # -- public ---------------------------------------------------------------

    @property
    def url(self) -> str:
        """The full URL embeddings are POSTed to."""
        return self._endpoint()

    @property
    def known_dimension(self) -> int | None:
        """The learned dimension, else the published one for this model, else None."""
        if self._dimension is not None:
            return self._dimension
        return KNOWN_DIMENSIONS.get(self.model.split(":", 1)[0])

    def close(self) -> None:
        """Close the HTTP connection pool (a later embed opens a new one)."""
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"
        )

    # -- the request loop -----------------------------------------------------

    def _post(self, url: str, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON and return the decoded answer, retrying as documented."""
        return self._transport.post(url, payload)

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        url = self._endpoint()
        answer = self._post(url, self._payload(texts, kind))
        matrix = self._parse(answer, len(texts))
        tokens = embedding_tokens(answer)
        report(
            UsageEvent(
                kind="embedding", provider=self.provider, model=self.model, texts=len(texts),
                characters=sum(len(t) for t in texts),
                input_tokens=tokens if tokens is not None else estimate_tokens(texts),
                estimated=tokens is None,
            )
        )
        return matrix

    # -- shape checking helpers -------------------------------------------------

    def _bad(self, what: str) -> ProviderResponseError:
        return ProviderResponseError(f"{self.provider} at {self._endpoint()} {what}")

    def _matrix(self, rows: list[Any], count: int) -> np.ndarray:
        """Turn a list of vectors into an (n, d) float32 matrix, or raise."""
        if len(rows) != count:
            raise self._bad(f"returned {len(rows)} embeddings for {count} texts")
        if count == 0:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        lengths = set()
        for row in rows:
            if not isinstance(row, list) or not row:
                raise self._bad(
                    f"returned an embedding that is not a non-empty list: {excerpt(repr(row), 80)}"
                )
            lengths.add(len(row))
        if len(lengths) != 1:
            raise self._bad(
                f"returned embeddings of different dimensions {sorted(lengths)}"
            )
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._bad(f"returned non-numeric embedding values ({exc})") from exc
        if matrix.ndim != 2:
            raise self._bad(f"returned embeddings of shape {matrix.shape}")
        return matrix


class OllamaEmbedder(HTTPEmbedder):
    """Ollama's ``POST /api/embed``: ``{"model", "input": [...]}`` → ``{"embeddings": [[...]]}``.

    The same model embeds queries and passages; models that expect task prefixes
    (nomic-embed-text's ``search_query:``) are given the text as is.
    """

    provider = "ollama"

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:11434",
        model: str = "nomic-embed-text",
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        *,
        batch_size: int = 32,
        languages: str | Sequence[str] | None = None,
    ) -> None:
        """Point at an Ollama server; nothing is contacted until the first embed."""
        super().__init__(
            base_url=base_url,
            model=model,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            batch_size=batch_size,
            languages=languages,
        )

    def _endpoint(self) -> str:
        return f"{self.base_url}/api/embed"

    def _payload(self, texts: Sequence[str], kind: TextKind) -> dict[str, Any]:
        return {"model": self.model, "input": list(texts)}

    def _parse(self, answer: Any, count: int) -> np.ndarray:
        if not isinstance(answer, dict):
            raise self._bad(
                f"returned {type(answer).__name__} where an object was expected"
            )
        if "error" in answer and "embeddings" not in answer:
            raise self._bad(f"returned an error: {excerpt(str(answer['error']))}")
        rows = answer.get("embeddings")
        if not isinstance(rows, list):
            raise self._bad("answer has no 'embeddings' list")
        return self._matrix(rows, count)


class OpenAIEmbedder(HTTPEmbedder):
    """OpenAI's ``POST /v1/embeddings`` (and any compatible server).

    ``base_url`` may be given with or without the ``/v1`` suffix. ``dimensions`` asks
    models that support it (text-embedding-3-*) for shorter vectors and is then also
    enforced on the answers. Empty texts are sent as a single space, since OpenAI
    rejects empty strings.
    """

    provider = "openai"

    def __init__(
        self,
        base_url: str = "https://api.openai.com",
        model: str = "text-embedding-3-small",
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        dimensions: int | None = None,
        *,
        batch_size: int = 32,
        languages: str | Sequence[str] | None = None,
    ) -> None:
        """Point at an OpenAI-compatible server; nothing is contacted until the first embed."""
        if dimensions is not None and (
            not isinstance(dimensions, int) or dimensions < 1
        ):
            raise ConfigError(
                f"dimensions must be a positive integer, got {dimensions!r}"
            )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(
            base_url=base_url,
            model=model,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            batch_size=batch_size,
            headers=headers,
            languages=languages,
        )
        self.dimensions = dimensions
        if dimensions is not None:
            self._dimension = dimensions

    def __repr__(self) -> str:  # never show the key
        return (
            f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r}, "
            f"dimensions={self.dimensions!r})"
        )

    def _endpoint(self) -> str:
        root = self.base_url
        if root.endswith("/v1"):
            return f"{root}/embeddings"
        return f"{root}/v1/embeddings"

    def _payload(self, texts: Sequence[str], kind: TextKind) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "input": [t if t.strip() else " " for t in texts],
        }
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        return payload

    def _decode(self, embedding: Any) -> Any:
        """Accept both float lists and base64 little-endian float32 strings."""
        if isinstance(embedding, str):
            try:
                raw = base64.b64decode(embedding, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise self._bad(
                    "returned an embedding string that is not base64"
                ) from exc
            if not raw or len(raw) % 4:
                raise self._bad("returned a base64 embedding of invalid length")
            return np.frombuffer(raw, dtype="<f4").astype(np.float32).tolist()
        return embedding

    def _parse(self, answer: Any, count: int) -> np.ndarray:
        if not isinstance(answer, dict):
            raise self._bad(
                f"returned {type(answer).__name__} where an object was expected"
            )
        data = answer.get("data")
        if not isinstance(data, list):
            if "error" in answer:
                raise self._bad(
                    f"returned an error: {excerpt(json.dumps(answer['error']))}"
                )
            raise self._bad("answer has no 'data' list")
        items: list[tuple[int, Any]] = []
        for position, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise self._bad(f"data[{position}] has no 'embedding'")
            index = item.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool):
                raise self._bad(f"data[{position}] has a non-integer index {index!r}")
            items.append((index, self._decode(item["embedding"])))
        items.sort(key=lambda pair: pair[0])
        if [index for index, _ in items] != list(range(len(items))):
            raise self._bad("returned embedding indexes that are not 0..n-1")
        return self._matrix([embedding for _, embedding in items], count)
