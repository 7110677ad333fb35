"""The embedder named to a command that carries vectors and embeds nothing (``plait copy``,
``plait export``, ``plait import``).

Such a command writes a collection's vectors as they are, so an embedder named to it
(``--embedder``, else ``PLAIT_EMBEDDER``) cannot change what they are: it must be the model
they come from — the recorded provider and model, and the dimension where the embedder
knows one before a call. :func:`carried_embedder` says whether it is, and refuses it with
a one-line :class:`~plait.errors.ModelMismatchError` when it is not (a collection's vectors
come from one model).

Only a name given to the command is checked so. ``PLAIT_EMBEDDER`` alone (``default``) is
the model the user indexes and searches with, not a statement about these vectors: a
global ``PLAIT_EMBEDDER=e5`` must not refuse to copy a MiniLM collection. Another model is
then left out (the vectors keep their own); it is still recorded for a collection that
was never embedded, as a first index would record it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.collection_settings import read_settings
from plait.errors import ModelMismatchError, PlaitError
from plait.stores.base import Store

if TYPE_CHECKING:
    from plait.embeddings.base import Embedder

__all__ = ["VectorModel", "carried_embedder", "check_copy_embedder", "collection_embedder"]


@dataclass(frozen=True)
class VectorModel:
    """The model a collection's vectors come from, as a store or an archive header records
    it (``model`` None: the collection was never embedded), and ``recorded``, the embedder
    name the collection was indexed under (its settings' ``embedder``), if any."""

    provider: str | None
    model: str | None
    dimension: int | None
    recorded: Any = None


def _identity(provider: Any, model: Any, dimension: Any) -> str:
    return f"{provider}/{model}" + (f" ({dimension}-d)" if dimension else "")


def _fits(embedder: Embedder | None, model: VectorModel) -> bool:
    """Whether ``embedder`` makes ``model``'s vectors: its provider, model and (where both
    are known before a call) dimension."""
    if embedder is None:
        return False
    dimensions = (embedder.dimension, model.dimension)
    same = (embedder.provider, embedder.model) == (model.provider, model.model)
    return same and (None in dimensions or dimensions[0] == dimensions[1])


def carried_embedder(
    name: str, model: VectorModel, *, vectors: str, owner: str, action: str, default: bool = False
) -> Embedder | None:
    """The embedder called ``name``, checked against the vectors' ``model``: None when it
    is their model (nothing to record), the embedder itself (None for ``"none"``) when there
    is no model (the caller may record it, as a first index would). Raises
    :class:`ModelMismatchError` when it is another model, or ``"none"`` for vectors, unless
    ``default`` (the name is ``PLAIT_EMBEDDER``'s, not the command's: see the module
    docstring), which returns None then; an unknown name is a
    :class:`~plait.errors.ConfigError`. Nothing is loaded here.

    The message reads "{vectors} are from M; embedder 'X' is N. A collection's vectors come
    from one model and {action} embeds nothing: leave the embedder out, or name {owner},
    'R'" — the last clause when the recorded name ``R`` makes the model."""
    from plait.embeddings import make_embedder

    embedder = make_embedder(name)  # an unknown name: ConfigError; nothing is loaded here
    if model.model is None:
        return embedder
    if _fits(embedder, model) or default:
        return None
    wanted = "none (no vectors)" if embedder is None else _identity(embedder.provider, embedder.model, embedder.dimension)
    recorded = model.recorded
    try:
        hint = isinstance(recorded, str) and _fits(make_embedder(recorded), model)
    except PlaitError:  # a name this plait does not know, or one it cannot build here
        hint = False
    raise ModelMismatchError(
        f"{vectors} are from {_identity(model.provider, model.model, model.dimension)}; "
        f"embedder {name!r} is {wanted}. A collection's vectors come from one model and {action} embeds "
        f"nothing: leave the embedder out" + (f", or name {owner}, {recorded!r}" if hint else "")
    )


def collection_embedder(
    store: Store, collection: str, embedder: str, *, action: str, default: bool = False
) -> Embedder | None:
    """The embedder called ``embedder``, checked against the vectors of ``collection`` for
    ``action`` (``"a copy"``, ``"an export"``), as :func:`carried_embedder` (``default``:
    it is ``PLAIT_EMBEDDER``'s): None when it is their model (or the collection does not
    exist: the caller says so), the embedder to record when the collection was never
    embedded. Writes nothing."""
    info = store.get_collection(collection)
    if info is None:
        return None
    model = VectorModel(
        info.embedder_provider, info.embedder_model, info.dimension, read_settings(store, collection).embedder
    )
    return carried_embedder(
        embedder, model, vectors=f"the vectors of collection {collection!r}", owner="the collection's", action=action,
        default=default,
    )


def check_copy_embedder(source: Store, collection: str, embedder: str, *, default: bool = False) -> Embedder | None:
    """:func:`collection_embedder` for a copy of ``collection`` (see the module docstring):
    raises :class:`~plait.errors.ModelMismatchError` for another model, or ``"none"`` for a
    collection with vectors, unless ``default``."""
    return collection_embedder(source, collection, embedder, action="a copy", default=default)
