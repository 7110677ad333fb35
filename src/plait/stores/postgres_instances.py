"""Which schema instance a serving process's caches were filled from.

The in-process caches of the PostgreSQL store (lexical indexes, dense matrices, chunk rows)
are keyed by collection id and ``(generation, revision)``. Those numbers restart when the
schema is dropped and created again or a dump is restored, so they identify content only
within one *instance* of the schema (:mod:`plait.stores.postgres_keys`: the table's OID and
a UUID written with the schema). Every check that reads a collection's key reads the
instance in the same statement, and :meth:`Instances.observe` compares it with the one the
caches hold: on a change every cache is dropped (the ``flush`` callback) and the *epoch*
moves.

A search that read its data from the old instance may still be running when that happens.
:meth:`Instances.begin` records, per thread, the epoch a read begins in; the caches take an
entry only under the epoch it was read in (:meth:`Instances.reading`, compared under each
cache's lock, the same lock the flush takes), so nothing read before a flush is cached
after it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Instance", "Instances"]

log = logging.getLogger(__name__)

#: A schema instance: the OID of ``plait_collections`` and the UUID of ``plait_instance``.
Instance = tuple[int, Any]


class Instances:
    """The instance a store's caches hold, and the epoch (how many times they were dropped)."""

    def __init__(self, flush: Callable[[int], None]) -> None:
        self._flush = flush
        self._seen: Instance | None = None
        self._epoch = 0
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def epoch(self) -> int:
        return self._epoch

    def begin(self) -> int:
        """A read of this thread begins: what it reads may be cached under the epoch returned."""
        epoch = self._epoch
        self._local.epoch = epoch
        return epoch

    def reading(self) -> int:
        """The epoch this thread's current read began in (the current one if none began)."""
        epoch: int = getattr(self._local, "epoch", self._epoch)
        return epoch

    def observe(self, instance: Instance) -> int:
        """A check read ``instance``: when the caches hold another one, drop them all and
        move the epoch. Returns the epoch now."""
        with self._lock:
            if instance != self._seen:
                if self._seen is not None:
                    log.warning(
                        "the plait schema is another instance than the one cached (re-created or restored: "
                        "%s -> %s): dropping every cached index, matrix and chunk", self._seen, instance,
                    )
                    self._epoch += 1
                    self._flush(self._epoch)
                self._seen = instance
            return self._epoch
