"""A deterministic embedder for tests: no model, no network.

Vectors are feature-hashed bags of lower-cased words and character trigrams, so
texts that share words are close and the same text always gives the same vector in
every process. Texts listed in ``overrides`` get the vector given there, which lets a
test place a document exactly where it wants it in the dense ranking.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from plait.embeddings.base import BaseEmbedder, TextKind

__all__ = ["ConeFakeEmbedder", "FakeEmbedder", "SlowFakeEmbedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbedder(BaseEmbedder):
    """Feature hashing into ``dimension`` buckets; counts every call and text
    (``calls``, ``texts_embedded``: queries included) and the passages alone
    (``passage_calls``, ``passages_embedded``: what indexing and backfills embed)."""

    provider = "fake"

    def __init__(
        self,
        *,
        dimension: int = 64,
        model: str = "hash-64",
        overrides: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self._dim = dimension
        self._dimension = dimension
        self.overrides = {k: np.asarray(v, dtype=np.float32) for k, v in (overrides or {}).items()}
        self.calls = 0
        self.texts_embedded = 0
        self.passage_calls = 0
        self.passages_embedded = 0

    def _vector(self, text: str) -> np.ndarray:
        if text in self.overrides:
            return self.overrides[text]
        vector = np.zeros(self._dim, dtype=np.float32)
        lowered = text.lower()
        features = _WORD.findall(lowered)
        features += [lowered[i : i + 3] for i in range(max(0, len(lowered) - 2))]
        for feature in features:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[bucket] += sign
        if not vector.any():
            vector[0] = 1.0
        return vector

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        if kind == "passage":
            self.passage_calls += 1
            self.passages_embedded += len(texts)
        return np.vstack([self._vector(t) for t in texts])


class SlowFakeEmbedder(FakeEmbedder):
    """:class:`FakeEmbedder` (same provider and model, same vectors) made slow and
    observable, for backfill tests.

    Each passage batch sleeps ``delay`` seconds, calls ``gate(n)`` first (n = 1, 2, … per
    instance; a gate may block), and, with ``log``, appends a JSON line
    ``{"pid", "batch", "event": "start" | "done", "texts"}`` before and after — a file
    several processes can append to. Queries are neither delayed nor gated.
    """

    def __init__(
        self,
        *,
        delay: float = 0.0,
        gate: Callable[[int], None] | None = None,
        log: str | Path | None = None,
        dimension: int = 64,
        model: str = "hash-64",
    ) -> None:
        super().__init__(dimension=dimension, model=model)
        self.delay = delay
        self.gate = gate
        self.log = None if log is None else Path(log)
        self.batches = 0
        self._lock = threading.Lock()

    def _write(self, batch: int, event: str, texts: Sequence[str]) -> None:
        if self.log is None:
            return
        line = json.dumps({"pid": os.getpid(), "batch": batch, "event": event, "texts": list(texts)})
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        if kind != "passage":
            return super()._embed_batch(texts, kind)
        with self._lock:
            self.batches += 1
            batch = self.batches
        self._write(batch, "start", texts)
        if self.gate is not None:
            self.gate(batch)
        if self.delay:
            time.sleep(self.delay)
        matrix = super()._embed_batch(texts, kind)
        self._write(batch, "done", texts)
        return matrix


class ConeFakeEmbedder(FakeEmbedder):
    """:class:`FakeEmbedder` vectors pushed into a narrow cone, like e5's: each unit
    vector plus ``lift`` times one shared unit direction, so unrelated texts score a
    cosine near ``lift² / (1 + lift²)`` (0.84 at the default 2.3) and related ones
    higher — the shape that made a fixed cosine gate pass everything (issue 22)."""

    def __init__(self, *, dimension: int = 64, model: str = "hash-64-cone", lift: float = 2.3) -> None:
        super().__init__(dimension=dimension, model=model)
        self.lift = lift
        self._shared = np.full(dimension, 1.0 / np.sqrt(dimension), dtype=np.float32)

    def _vector(self, text: str) -> np.ndarray:
        base = super()._vector(text)
        unit = base / max(float(np.linalg.norm(base)), 1e-12)
        return (unit + self.lift * self._shared).astype(np.float32)
