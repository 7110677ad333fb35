"""The one rule for a collection's name, applied when a collection is created or named.

A new name is 1 to :data:`MAX_NAME_CHARS` characters, has no leading or trailing
whitespace (``" docs "`` made a collection apart from ``docs``), no control character
(tabs, newlines, escape sequences, line separators) and is not ``*`` (an API key for
``*`` covers every collection). Any other character is allowed — rich markup brackets
too: the CLI prints names escaped (:func:`plait.terminal.safe`).

The rule applies to creating a collection (``index``, ``index_sessions``,
``index_documents``, a copy or import under a new name) and to naming one an API key
is made for; never to opening, searching, reindexing or deleting one: a collection
made before the rule keeps working under its name, and can be copied or deleted.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from typing import Any, Protocol

from plait.errors import NotFoundError, ValidationError

__all__ = [
    "ALL_COLLECTIONS",
    "MAX_NAME_CHARS",
    "check_key_collection",
    "check_name",
    "check_new_collection",
    "given_name",
    "name_problem",
]

MAX_NAME_CHARS = 128
ALL_COLLECTIONS = "*"
"""What an API key names to cover every collection; never a collection's own name."""
_CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})  # C0/C1 controls, line and paragraph separators


class _Collections(Protocol):
    def get_collection(self, name: str) -> Any: ...


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a new collection (one line), or None when it can."""
    if not name:
        return "a collection name cannot be empty"
    if len(name) > MAX_NAME_CHARS:
        return f"a collection name is at most {MAX_NAME_CHARS} characters; this one has {len(name)}"
    for char in name:
        if unicodedata.category(char) in _CONTROL_CATEGORIES:
            return f"collection name {name!r} holds a control character (U+{ord(char):04X})"
    if not name.strip():
        return f"a collection name cannot be blank ({name!r})"
    if name != name.strip():
        return f"collection name {name!r} has leading or trailing whitespace: use {name.strip()!r}"
    if name == ALL_COLLECTIONS:
        return "'*' cannot name a collection: it means every collection (an API key for all of them)"
    return None


def check_name(name: str) -> str:
    """``name`` when it may name a new collection, else :class:`ValidationError`."""
    problem = name_problem(name)
    if problem is not None:
        raise ValidationError(problem)
    return name


def check_new_collection(store: _Collections, name: str) -> None:
    """Apply the rule before ``store`` creates ``name``: a collection it already holds
    (made before the rule, whatever its name) passes."""
    if store.get_collection(name) is None:
        check_name(name)


def given_name(name: str | None, default: str) -> str:
    """The collection a caller asked for: ``default`` when it gave none (None); an
    explicit empty name is a :class:`ValidationError`, never taken for the default."""
    if name is None:
        return default
    if name == "":
        raise ValidationError(f"the collection name is empty: name one, or leave it out for {default!r}")
    return name


def check_key_collection(name: str, existing: Collection[str]) -> None:
    """An API key may name ``*`` or a collection of ``existing`` (the store's names);
    anything else is refused: a name the rule refuses (:class:`ValidationError`), or a
    collection that does not exist, a typo most likely (:class:`NotFoundError`, naming
    the ones that do)."""
    if name == ALL_COLLECTIONS or name in existing:
        return
    check_name(name)
    known = ", ".join(repr(each) for each in sorted(existing))
    there = f"the store's collections: {known}" if known else "the store has no collection yet"
    raise NotFoundError(
        f"collection {name!r} does not exist ({there}); index it first, or make the key for '*' (every collection)"
    )
