"""Query-time protection for an embedder: a total deadline, a dimension check, a circuit.

At index time a provider failure is reported and backfilled later; at query time a
search must answer *now*. :class:`QueryGuard` wraps each query embedding:

* **deadline** — the whole call (every retry, every slow byte of a dripping answer) is
  bounded by ``deadline`` seconds (default :data:`DEFAULT_QUERY_DEADLINE`). The call
  runs in a daemon thread; past the deadline the search goes on without it. A bundled
  (``local``) model is loaded first, on the caller's thread and outside the deadline
  (:func:`~plait.embeddings.base.load_local`): reading it from disk cannot hang, and
  counting it made a process's first search lexical only on a busy machine. A vector
  the embedder already holds (:func:`~plait.embeddings.base.held_query`: its query
  cache) is taken without a call, so without the thread, while the circuit is closed.
* **dimension** — a vector whose length is not the collection's is a
  :class:`~plait.errors.ProviderResponseError` (the search falls back to lexical and
  says why), never a failure deep in the vector search.
* **circuit** — after a failure the circuit opens: searches go lexical at once, with
  the reason, without calling the provider. Every ``probe_interval`` seconds one
  search is let through as a probe (bounded by the deadline): a real provider call,
  never answered from the embedder's query cache (:func:`~plait.embeddings.base.provider_query`:
  a cached vector says nothing about the provider); its success closes the circuit, its
  failure keeps it open for another interval.

The guard raises :class:`~plait.errors.ProviderError` subclasses only, which the search
pipeline already turns into ``vectorAvailable: false`` with the reason.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from plait.embeddings.base import held_query, load_local, provider_query
from plait.errors import (
    ConfigError,
    ProviderError,
    ProviderResponseError,
    ProviderUnavailableError,
)

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_PROBE_INTERVAL", "DEFAULT_QUERY_DEADLINE", "GuardedEmbedder", "QueryGuard"]

DEFAULT_QUERY_DEADLINE = 5.0
"""Seconds one query embedding may take in total (all retries included)."""
DEFAULT_PROBE_INTERVAL = 30.0
"""Seconds between probes of a provider whose circuit is open."""


class QueryGuard:
    """One circuit per embedder (by identity), shared by every search of an engine."""

    def __init__(
        self,
        *,
        deadline: float = DEFAULT_QUERY_DEADLINE,
        probe_interval: float = DEFAULT_PROBE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not deadline > 0:
            raise ConfigError(f"query embedding deadline must be > 0 seconds, got {deadline!r}")
        if not probe_interval > 0:
            raise ConfigError(f"probe interval must be > 0 seconds, got {probe_interval!r}")
        self.deadline = float(deadline)
        self.probe_interval = float(probe_interval)
        self._clock = clock
        self._lock = threading.Lock()
        #: Query embeddings that failed (for ``/metrics``).
        self.failures = 0
        self._open: dict[int, tuple[float, str]] = {}  # id(embedder) → (opened or last probe, reason)
        self._probing: set[int] = set()

    def open_circuits(self) -> int:
        """How many embedders' circuits are open now (for ``/metrics``)."""
        with self._lock:
            return len(self._open)

    def state(self, embedder: object) -> str:
        """``"closed"`` or ``"open"`` (for reports and tests)."""
        with self._lock:
            return "open" if id(embedder) in self._open else "closed"

    def embed_query(self, embedder: Any, text: str, *, dimension: int | None) -> np.ndarray:
        key = id(embedder)
        with self._lock:
            opened = self._open.get(key)
            if opened is not None:
                since, reason = opened
                wait = self.probe_interval - (self._clock() - since)
                if wait > 0 or key in self._probing:
                    raise ProviderUnavailableError(
                        f"circuit open after a failure {self._clock() - since:.0f} s ago ({reason}); "
                        f"searches are lexical until a probe succeeds (next in {max(wait, 0):.0f} s)"
                    )
                self._probing.add(key)  # this call is the probe; others keep failing fast
        try:
            # A vector the embedder already holds needs no provider call, so no deadline
            # thread; a probe goes through the thread, as any call with the circuit open.
            vector = held_query(embedder, text) if opened is None else None
            held = vector is not None
            if vector is None:  # a probe asks the provider itself, never a cache
                load_local(embedder)  # a bundled model loads before the deadline starts
                vector = self._bounded(embedder, text, probe=opened is not None)
            if dimension is not None and int(np.asarray(vector).shape[-1]) != dimension:
                raise ProviderResponseError(
                    f"the query vector has {int(np.asarray(vector).shape[-1])} dimensions, "
                    f"the collection's vectors {dimension}"
                )
        except ProviderError as exc:
            with self._lock:
                self.failures += 1
                was_open = key in self._open
                self._open[key] = (self._clock(), str(exc))
                self._probing.discard(key)
            if not was_open:
                logger.info("query embeddings: circuit opened (searches go lexical): %s", exc)
            raise
        if held:
            # a look-up says nothing about the provider: a circuit another search opened
            # meanwhile stays open (closing it made every new query wait the deadline)
            return vector
        with self._lock:
            closed = self._open.pop(key, None) is not None
            self._probing.discard(key)
        if closed:
            logger.info("query embeddings: circuit closed, the provider answers again")
        return vector

    def _bounded(self, embedder: Any, text: str, *, probe: bool = False) -> np.ndarray:
        done = threading.Event()
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["vector"] = provider_query(embedder, text) if probe else embedder.embed_query(text)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                outcome["error"] = exc
            finally:
                done.set()

        # the caller's context (its usage metering scope, plait.usage) goes with the call
        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(run,), name="plait-query-embed", daemon=True).start()
        if not done.wait(self.deadline):
            raise ProviderUnavailableError(
                f"query embedding took longer than the {self.deadline:g} s deadline"
            )
        if "error" in outcome:
            raise outcome["error"]
        return np.asarray(outcome["vector"], dtype=np.float32)


class GuardedEmbedder:
    """An embedder whose ``embed_query`` goes through a :class:`QueryGuard`; every other
    attribute (provider, model, dimension, languages, embed_documents) is the wrapped one's."""

    def __init__(self, embedder: Any, guard: QueryGuard, *, dimension: int | None) -> None:
        self._embedder = embedder
        self._guard = guard
        self._dimension = dimension

    @property
    def wrapped(self) -> Any:
        return self._embedder

    def embed_query(self, text: str) -> np.ndarray:
        return self._guard.embed_query(self._embedder, text, dimension=self._dimension)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)
