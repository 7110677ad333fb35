"""What an engine reports while it works, to whoever listens — ``plait serve``'s metrics
(:mod:`plait.api.observability`) — without the engine knowing who does.

Each :class:`~plait.service.Plait` has its own :class:`EngineEvents` (no process-wide
state); a listener subclasses :class:`EngineListener` and overrides what it wants. The
engine holds its listeners weakly (an app that is dropped stops listening: keep a
reference while it should). A listener that raises is logged and never fails the search
or the batch that reported.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plait.types import SearchResult

__all__ = ["EngineEvents", "EngineListener"]

logger = logging.getLogger(__name__)


class EngineListener:
    """Callbacks for engine events (each a no-op here)."""

    def searched(self, collection: str, result: SearchResult) -> None:
        """A search answered (``result.timings_ms`` holds its stage timings)."""

    def embedded(self, collection: str, texts: int, seconds: float) -> None:
        """``texts`` document texts were embedded in ``seconds`` (one provider call)."""

    def provider_failed(self, what: str, error: Exception) -> None:
        """The embedding provider failed (``what``: ``documents``)."""


class EngineEvents:
    """The listeners of one engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: tuple[weakref.ref[EngineListener], ...] = ()

    def subscribe(self, listener: EngineListener) -> Callable[[], None]:
        """Add ``listener`` (held weakly); returns the function that removes it."""
        ref = weakref.ref(listener)
        with self._lock:
            self._listeners = (*self._listeners, ref)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = tuple(item for item in self._listeners if item is not ref)

        return unsubscribe

    def _each(self, call: Callable[[EngineListener], None]) -> None:
        live = [listener for ref in self._listeners if (listener := ref()) is not None]
        if len(live) != len(self._listeners):
            with self._lock:
                self._listeners = tuple(ref for ref in self._listeners if ref() is not None)
        for listener in live:
            try:
                call(listener)
            except Exception:  # a listener's bug must not fail the engine's work
                logger.warning("engine listener %r failed", listener, exc_info=True)

    def searched(self, collection: str, result: SearchResult) -> None:
        self._each(lambda listener: listener.searched(collection, result))

    def embedded(self, collection: str, texts: int, seconds: float) -> None:
        self._each(lambda listener: listener.embedded(collection, texts, seconds))

    def provider_failed(self, what: str, error: Exception) -> None:
        self._each(lambda listener: listener.provider_failed(what, error))
