"""Every migration of the PostgreSQL store is frozen: its text is what it was when it was
released, whatever later code does to the pieces the trigger functions are built from.

Migrations 10, 12, 13 and 14 used to be composed of live constants (``ADD_STATS`` of
:mod:`plait.stores.postgres_changes`, ``REMOVE_STATS`` of :mod:`plait.stores.postgres_keys`,
``REMOVE_POSTINGS``, the bump templates…) shared between them: editing one for a new
migration would silently have changed what an older one installs on a database created
later (a fresh schema runs 1..N), so two databases at the same version would hold
different functions.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
from pathlib import Path
from typing import Any

import pytest

from plait.stores.postgres_schema import LATEST_VERSION, MIGRATIONS

#: sha256 of each migration's text as released (migration n at index n - 1). A new
#: migration appends its own; an existing line never changes.
RELEASED = (
    "c0f0d17d2bb63467568ebd387516293fe6aa9d0e832ed913998c31f2f8068c6f",
    "fa2d563f55e92fadbd5d6aa5a276b16b7ad0d5987b2d27d6f5492e733d4d4213",
    "a5a02b639416b4f2e8f4f8e1eb21d8b42391ce3fea869be55626d7aa5d196a19",
    "70b167a1aaae63da7f1c1270fcfbce90f44ec639ce4a01b2b6d933dd039b2946",
    "7b771649d8c6f883ebaab608f9f3c01b6e941e28758f61bd29acc5760755fb5f",
    "8c3e89bf2cb61d31550da0e63a723abaa0cb905a6855ffd23292b05740ced153",
    "8af407a4b43517f2aedc48d4d8f00d71334881f1fe02d6a8bb73f787edb8a017",
    "62fe589a4284c215b3423a1ff0643b8743e6e7e040d8d0390a0eb214b71b25c4",
    "01f6f7702cc58c4a44aa8eb01cd39e822bbd26da8b28578bdf972b5e4b8f53d2",
    "d7a52f79f30460a77b655611f00976062cd20953816fbdaabb5699310bce17b0",
    "ecda8ebc55add5f18a090bbbab923b43218fc3b173755416002928da279faa37",
    "e56d74e46c7e7c5ec10dc33f3a7643ddd7f03cfc8beda41b4c643ec3a247018b",
    "aedbb82d123f5c58e7fae3ba1b3f7e369a701349ae8d13bf6f8a5607e074e6f8",
    "efb6181b763cdafdad08c04678461f5f260ae5148156afd02324ac3147263995",
)

#: The modules defining a migration built (before this fix) from shared pieces.
_MODULES = {
    10: "plait.stores.postgres_changes",
    12: "plait.stores.postgres_lockwait",
    13: "plait.stores.postgres_keys",
    14: "plait.stores.postgres_counts",
}
_MARK = "\n-- edited by a later migration\n"


def _edit(value: Any) -> Any:
    """What a later migration's change of a live piece looks like: a string with more SQL,
    a number moved by one (``KEEP_GENERATIONS``); anything else (a function) unchanged."""
    if isinstance(value, str):
        return value + _MARK
    if isinstance(value, int) and not isinstance(value, bool):
        return value + 1
    return value


def _with_edited_pieces(module: str) -> dict[str, Any]:
    """The namespace of ``module``'s source run again, with every constant it imports or
    defines (other than the migrations themselves) edited right after it is bound."""
    path = Path(importlib.import_module(module).__file__ or "")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body: list[ast.stmt] = []
    for node in tree.body:
        body.append(node)
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names = [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        for name in names:
            if not name.startswith("MIGRATION_") and name != "__all__":
                body.append(ast.parse(f"{name} = _edit({name})").body[0])
    tree.body = body
    # __name__ of the real module: a dataclass there looks its module up in sys.modules
    namespace: dict[str, Any] = {"_edit": _edit, "__name__": module}
    exec(compile(ast.fix_missing_locations(tree), str(path), "exec"), namespace)
    return namespace


def test_every_migration_is_the_text_it_was_released_with() -> None:
    assert len(RELEASED) == LATEST_VERSION == len(MIGRATIONS)
    for number, (text, digest) in enumerate(zip(MIGRATIONS, RELEASED, strict=True), start=1):
        assert hashlib.sha256(text.encode()).hexdigest() == digest, f"migration {number} changed"


@pytest.mark.parametrize("number", sorted(_MODULES))
def test_a_migration_does_not_change_when_the_live_pieces_do(number: int) -> None:
    """Every string and number the module imports or defines is edited as a later
    migration might edit it (ADD_STATS, REMOVE_STATS, REMOVE_POSTINGS, the bump, the
    change log's length…): the migration's text stays byte for byte the same. Before the
    fix, migrations 10, 12, 13 and 14 each changed (they concatenated those pieces)."""
    module = _MODULES[number]
    edited = _with_edited_pieces(module)
    name = f"MIGRATION_{number}"
    assert edited[name] == getattr(importlib.import_module(module), name) == MIGRATIONS[number - 1]
    # the edit did reach the live pieces (the check above is not vacuous)
    changed = [k for k, v in vars(importlib.import_module(module)).items()
               if isinstance(v, str) and not k.startswith(("MIGRATION_", "__")) and edited.get(k) != v]
    assert changed
