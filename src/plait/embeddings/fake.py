"""A deterministic embedder for tests: no model, no network.

Vectors are feature-hashed bags of lower-cased words and character trigrams, so
texts that share words are close and the same text always gives the same vector in
every process. Texts listed in ``overrides`` get the vector given there, which lets a
test place a document exactly where it wants it in the dense ranking.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

import numpy as np

from plait.embeddings.base import BaseEmbedder, TextKind

__all__ = ["FakeEmbedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbedder(BaseEmbedder):
    """Feature hashing into ``dimension`` buckets; counts every call and text."""

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
        return np.vstack([self._vector(t) for t in texts])
