"""A least-recently-used cache bounded by entries *and* bytes.

``functools.lru_cache`` bounds the number of entries only: 4,096 cached values of a few
kB are a few MB, 4,096 of a megabyte are gigabytes. :func:`byte_lru_cache` decorates a
function of hashable arguments like ``lru_cache`` (``cache_info()``, ``cache_clear()``),
and also keeps the summed ``size`` of its entries (an estimate of the bytes each holds,
computed once when it is stored) at most ``max_bytes``: the least recently used entries
are dropped first, and a value larger than the whole budget is returned uncached.
Thread-safe (one lock around the table; the function itself runs outside it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import update_wrapper
from typing import Any, Generic, NamedTuple, ParamSpec, TypeVar

__all__ = ["ByteLRU", "CacheInfo", "byte_lru_cache"]

P = ParamSpec("P")
R = TypeVar("R")


class CacheInfo(NamedTuple):
    """As ``functools.lru_cache``'s ``cache_info()``, with the summed entry size."""

    hits: int
    misses: int
    maxsize: int
    currsize: int
    currbytes: int


class ByteLRU(Generic[P, R]):
    """The cached function (see the module docstring)."""

    def __init__(self, function: Callable[P, R], *, maxsize: int, max_bytes: int, size: Callable[[Any, R], int]) -> None:
        if maxsize < 1 or max_bytes < 1:
            raise ValueError(f"maxsize and max_bytes must be positive, got {maxsize} and {max_bytes}")
        self._function = function
        self.maxsize, self.max_bytes = maxsize, max_bytes
        self._size = size
        self._lock = threading.Lock()
        self._table: OrderedDict[Hashable, tuple[R, int]] = OrderedDict()
        self.currbytes = 0
        self._hits = self._misses = 0
        update_wrapper(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        key: Hashable = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        with self._lock:
            found = self._table.get(key)
            if found is not None:
                self._table.move_to_end(key)
                self._hits += 1
                return found[0]
            self._misses += 1
        value = self._function(*args, **kwargs)
        cost = self._size(args, value)
        if cost > self.max_bytes:
            return value  # larger than the whole budget: never kept
        with self._lock:
            if key not in self._table:
                self._table[key] = (value, cost)
                self.currbytes += cost
                while len(self._table) > self.maxsize or self.currbytes > self.max_bytes:
                    _, (_, dropped) = self._table.popitem(last=False)
                    self.currbytes -= dropped
        return value

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.maxsize, len(self._table), self.currbytes)

    def cache_clear(self) -> None:
        with self._lock:
            self._table.clear()
            self.currbytes = 0
            self._hits = self._misses = 0


def byte_lru_cache(
    *, maxsize: int, max_bytes: int, size: Callable[[Any, R], int]
) -> Callable[[Callable[P, R]], ByteLRU[P, R]]:
    """Decorate a function with a :class:`ByteLRU`: at most ``maxsize`` entries holding
    at most ``max_bytes`` in all, ``size(args, value)`` the bytes one entry holds."""

    def wrap(function: Callable[P, R]) -> ByteLRU[P, R]:
        return ByteLRU(function, maxsize=maxsize, max_bytes=max_bytes, size=size)

    return wrap
