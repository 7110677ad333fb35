"""One collection, one model: an embedder whose model is not the one the collection's
vectors come from is refused (:class:`~plait.errors.ModelMismatchError`) before it embeds
anything, by every index run and every search."""

from __future__ import annotations

from plait.embeddings.base import Embedder
from plait.errors import ModelMismatchError
from plait.stores.base import Store
from plait.types import CollectionInfo

__all__ = ["check_model"]


def check_model(
    store: Store, collection: str, embedder: Embedder | None, *, info: CollectionInfo | None = None
) -> None:
    """Refuse an embedder whose model differs from the one the collection was indexed with.

    ``info`` is the collection as the caller just read it (saves reading it again).
    """
    if info is None:
        info = store.get_collection(collection)
    if info is None or embedder is None or info.embedder_model is None:
        return
    if (info.embedder_provider, info.embedder_model) != (embedder.provider, embedder.model):
        raise ModelMismatchError(
            f"collection {collection!r} was indexed with {info.embedder_provider}/"
            f"{info.embedder_model} ({info.dimension}-d); refusing {embedder.provider}/"
            f"{embedder.model}. Use the same embedder, or index into another collection."
        )
