"""The Embedder protocol, and the base every provider builds on.

Only the smallest operation is abstract: :meth:`BaseEmbedder._embed_batch` turns one
batch of texts into a float32 matrix. Batching, normalisation, dimension checks and
the query cache are built on it once, here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from plait.errors import ConfigError, ProviderResponseError

__all__ = [
    "BaseEmbedder",
    "Embedder",
    "TextKind",
    "embedder_languages",
    "held_query",
    "load_local",
    "normalise_rows",
    "parse_languages",
    "provider_query",
]

TextKind = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length float32 vectors.

    ``provider`` and ``model`` identify the vector space: a collection records them
    when first indexed and refuses any other pair. ``dimension`` may be None until the
    first call for providers that only learn it from an answer.
    """

    provider: str
    model: str

    @property
    def dimension(self) -> int | None: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length row per text, shape (len(texts), dimension)."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """One unit-length vector for a query."""
        ...


def embedder_languages(embedder: object) -> frozenset[str] | None:
    """The languages (ISO 639-1 codes) an embedder declares it was trained on, or None
    when it declares none (remote models, embedders written elsewhere).

    Optional on purpose: :class:`Embedder` does not require the attribute, so an
    embedder without it still works; fusion then treats its coverage as unknown.
    """
    languages = getattr(embedder, "languages", None)
    return frozenset(languages) if languages is not None else None


def parse_languages(value: str | Sequence[str] | None) -> frozenset[str] | None:
    """``"en, pt"`` or ``["en", "pt"]`` → ``frozenset({"en", "pt"})``; None or empty → None.

    >>> sorted(parse_languages("EN, pt"))
    ['en', 'pt']

    Raises :class:`~plait.errors.ConfigError` for anything but two- or three-letter codes.
    """
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    codes = {str(item).strip().lower() for item in items} - {""}
    bad = sorted(c for c in codes if not (c.isascii() and c.isalpha() and 2 <= len(c) <= 3))
    if bad:
        raise ConfigError(f"languages must be ISO 639-1 codes such as en, pt; got {', '.join(map(repr, bad))}")
    return frozenset(codes) or None


def _owner(embedder: object, name: str) -> type | None:
    """The class (in ``embedder``'s MRO) that defines ``name``; None when the instance
    itself holds it (patched on the object) or nothing does."""
    if name in getattr(embedder, "__dict__", {}):
        return None
    return next((cls for cls in type(embedder).__mro__ if name in vars(cls)), None)


def held_query(embedder: object, text: str) -> np.ndarray | None:
    """The query's vector when ``embedder`` holds it already (its ``cached_query``: a
    query cache, precomputed vectors), without a provider call; else None.

    Only when ``cached_query`` is defined with (or below) the ``embed_query`` it stands
    for: a subclass (or a patched object) that answers ``embed_query`` its own way —
    failing while its provider is down, say — is always asked through ``embed_query``.
    """
    held = getattr(embedder, "cached_query", None)
    query_owner, held_owner = _owner(embedder, "embed_query"), _owner(embedder, "cached_query")
    if held is None or query_owner is None or held_owner is None or not issubclass(held_owner, query_owner):
        return None
    vector = held(text)
    return None if vector is None else np.asarray(vector, dtype=np.float32)


def provider_query(embedder: Any, text: str) -> np.ndarray:
    """The query's vector asked of the provider itself, never answered from a cache: the
    query guard's probe of an open circuit (a cached answer says nothing about whether
    the provider is back). The embedder's ``uncached_query`` when it is defined with (or
    below) its ``embed_query`` (the rule of :func:`held_query`), else ``embed_query``
    (an embedder without that method has no cache this module knows of)."""
    fresh = getattr(embedder, "uncached_query", None)
    query_owner, fresh_owner = _owner(embedder, "embed_query"), _owner(embedder, "uncached_query")
    if fresh is None or query_owner is None or fresh_owner is None or not issubclass(fresh_owner, query_owner):
        return np.asarray(embedder.embed_query(text), dtype=np.float32)
    return np.asarray(fresh(text), dtype=np.float32)


def load_local(embedder: object) -> None:
    """Load ``embedder``'s local model now, on the caller's thread, when it has one: an
    embedder of provider ``local`` (the bundled models) with a ``load()``, itself or the
    one it wraps (``inner``, as :class:`~plait.embeddings.cache.CachedEmbedder`). Reading a
    model from disk is not a provider that can hang, so the query guard does this before
    its deadline starts: the first search of a process (``plait search``, a new worker)
    otherwise spent that deadline loading the model (3.7 s for e5 at load 5 on 2 cores)
    and went lexical only. Nothing happens for other embedders, and a load that fails
    raises here as the embedding call itself would have."""
    seen: set[int] = set()
    current: object | None = embedder
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        load = getattr(type(current), "load", None)
        if getattr(current, "provider", None) == "local" and callable(load):
            load(current)
            return
        current = getattr(current, "inner", None)


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Scale each row to unit length (rows of zeros stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: np.ndarray = matrix / norms
    return normalised


class BaseEmbedder:
    """Batching, normalisation, dimension checks and a small query cache.

    Subclasses set ``provider`` and ``model`` and implement :meth:`_embed_batch`.
    """

    provider: str = "base"
    model: str = "base"
    #: ISO 639-1 codes of the languages the model was trained on; None = not declared.
    languages: frozenset[str] | None = None
    batch_size: int = 32
    query_cache_size: int = 1024

    def __init__(self) -> None:
        self._dimension: int | None = None
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def dimension(self) -> int | None:
        return self._dimension

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        raise NotImplementedError

    def _checked(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        matrix = np.asarray(self._embed_batch(texts, kind), dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise ProviderResponseError(
                f"{self.provider} returned {matrix.shape[0] if matrix.ndim else 0} vectors "
                f"for {len(texts)} texts"
            )
        if not np.all(np.isfinite(matrix)):
            raise ProviderResponseError(f"{self.provider} returned non-finite vector values")
        dim = int(matrix.shape[1])
        if self._dimension is None:
            self._dimension = dim
        elif dim != self._dimension:
            raise ProviderResponseError(
                f"{self.provider} model {self.model!r} returned {dim}-d vectors, "
                f"expected {self._dimension}-d"
            )
        return normalise_rows(matrix)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        parts = [
            self._checked(texts[i : i + self.batch_size], "passage")
            for i in range(0, len(texts), self.batch_size)
        ]
        return np.vstack(parts)

    def cached_query(self, text: str) -> np.ndarray | None:
        """The query's vector when the query cache holds it (no provider call), else None.

        The query guard (:mod:`plait.embeddings.guard`) answers from it without the
        deadline thread a provider call needs."""
        cached = self._query_cache.get(text)
        if cached is not None:
            with suppress(KeyError):  # evicted by another thread meanwhile: the vector is still right
                self._query_cache.move_to_end(text)
        return cached

    def embed_query(self, text: str) -> np.ndarray:
        cached = BaseEmbedder.cached_query(self, text)  # this class's cache, whatever a subclass holds
        if cached is not None:
            return cached
        return BaseEmbedder.uncached_query(self, text)

    def uncached_query(self, text: str) -> np.ndarray:
        """The query's vector from the provider (one call, whatever the cache holds), then
        cached: the query guard's probe (:func:`provider_query`)."""
        vector: np.ndarray = self._checked([text], "query")[0]
        self._query_cache[text] = vector
        if len(self._query_cache) > self.query_cache_size:
            with suppress(KeyError):  # emptied by another thread's eviction meanwhile
                self._query_cache.popitem(last=False)
        return vector
