"""Which collections a copy of several takes, checked before anything is written.

``plait copy`` (and :meth:`plait.service.Plait.copy_collections`) copies collections one by
one (:func:`plait.copying.copy_collection`). Before the first is copied, and before the
target store is opened, the whole request is checked, so a mistake in it copies nothing:

* no names: every collection of the source; names given twice count once;
* every named collection exists in the source (``-c kb -c typo`` used to copy kb, then fail);
* a new name (``target_name``, ``--as``) is one a new collection may have
  (:mod:`plait.collection_names`), checked before the target store is opened or created;
* an embedder named for the copy is the model of every collection's vectors
  (:func:`plait.carried_model.check_copy_embedder`; ``embedder_is_default``: it is
  ``PLAIT_EMBEDDER``'s, which only records).
"""

from __future__ import annotations

from collections.abc import Sequence

from plait.carried_model import check_copy_embedder
from plait.collection_names import check_name
from plait.errors import NotFoundError
from plait.stores.base import Store

__all__ = ["copy_names"]


def copy_names(
    source: Store,
    names: Sequence[str] | None,
    *,
    target_name: str | None = None,
    embedder: str | None = None,
    embedder_is_default: bool = False,
) -> list[str]:
    """The collections to copy, in order (see the module docstring); raises
    :class:`~plait.errors.ValidationError`, :class:`~plait.errors.NotFoundError` or
    :class:`~plait.errors.ModelMismatchError` for a request that would copy anything amiss."""
    if target_name is not None:
        check_name(target_name)
    chosen = list(dict.fromkeys(names)) if names else [c.name for c in source.list_collections()]
    missing = [name for name in chosen if source.get_collection(name) is None]
    if missing:
        which = f"collection {missing[0]!r} does" if len(missing) == 1 else f"collections {', '.join(map(repr, missing))} do"
        raise NotFoundError(f"{which} not exist in the source store; nothing copied")
    if embedder is not None:
        for name in chosen:
            check_copy_embedder(source, name, embedder, default=embedder_is_default)
    return chosen
