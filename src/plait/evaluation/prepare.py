"""Get a dataset ready to evaluate: load it, open (or make) a store, pick the embedder,
index the corpus through the embedding cache.

By default the store is a throwaway SQLite file in a temporary folder, deleted when the
``with`` block ends; give ``store=`` to keep (and reuse) one — indexing is incremental,
so a second run re-embeds nothing. The embedder is wrapped in
:class:`~plait.embeddings.cache.CachedEmbedder` unless ``use_cache=False``, so a new
throwaway store does not re-embed a corpus either.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from plait.collection_settings import read_settings
from plait.embeddings import DEFAULT_EMBEDDER, Embedder, make_embedder
from plait.embeddings.cache import CachedEmbedder
from plait.evaluation.datasets import BeirDataset, load_beir
from plait.ingest import Progress
from plait.service import Plait
from plait.stores import Store, open_store
from plait.types import IndexReport

__all__ = ["Prepared", "default_collection", "prepared"]


@dataclass
class Prepared:
    """A dataset indexed into a collection, and the embedder that embeds its queries."""

    dataset: BeirDataset
    store: Store
    store_path: str | None
    collection: str
    embedder: Embedder | None
    index: IndexReport

    @property
    def cache(self) -> dict[str, int]:
        """Passages served from the embedding cache / embedded in this run ({} without a cache)."""
        if isinstance(self.embedder, CachedEmbedder):
            return {"hits": self.embedder.stats.hits, "embedded": self.embedder.stats.embedded}
        return {}


def default_collection(dataset: BeirDataset) -> str:
    """``eval-<dataset folder name>``, reduced to letters, digits, ``-`` and ``_``."""
    return "eval-" + re.sub(r"[^A-Za-z0-9_-]+", "-", dataset.name).strip("-")


def _embedder(
    choice: str | Embedder | None, store: Store, collection: str
) -> Embedder | None:
    if choice is not None and not isinstance(choice, str):
        return choice
    name = choice
    if name is None:
        recorded = read_settings(store, collection).embedder if store.get_collection(collection) else None
        name = recorded or DEFAULT_EMBEDDER
    return make_embedder(name)


@contextmanager
def prepared(
    path: str | Path,
    *,
    split: str = "test",
    store: str | None = None,
    collection: str | None = None,
    embedder: str | Embedder | None = None,
    cache: str | Path | None = None,
    use_cache: bool = True,
    progress: Progress | None = None,
) -> Iterator[Prepared]:
    """Load the dataset at ``path``, index its corpus, and yield a :class:`Prepared`.

    ``embedder`` is a name (``e5``, ``minilm``, ``none``, ``fake``…) or an Embedder;
    None uses the collection's recorded one, else the default (``e5``). ``cache`` is
    the cache folder or file (default ``~/.cache/plait/embeddings.sqlite``).
    """
    dataset = load_beir(path, split=split)
    name = collection or default_collection(dataset)
    with tempfile.TemporaryDirectory(prefix="plait-eval-") as scratch:
        store_path = store or str(Path(scratch) / "eval.db")
        opened = open_store(store_path)
        cached: CachedEmbedder | None = None
        try:
            inner = _embedder(embedder, opened, name)
            chosen: Embedder | None = inner
            if inner is not None and use_cache and not isinstance(inner, CachedEmbedder):
                cached = CachedEmbedder(inner, path=cache)
                chosen = cached
            engine = Plait(opened, embedder=chosen if chosen is not None else "none")
            report = engine.index(dataset.corpus_path, collection=name, scope="docs", progress=progress)
            yield Prepared(
                dataset=dataset,
                store=opened,
                store_path=store,
                collection=name,
                embedder=chosen,
                index=report,
            )
        finally:
            if cached is not None:
                cached.close()
            opened.close()
