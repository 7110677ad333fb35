"""One file, one recorded root: how the folder and git roots of a collection nest.

Source ids are relative to the recorded root that yields them, so two recorded roots
whose folders nest would each index the inner folder's files, under two ids
(``adr/0001.md`` from ``docs``, ``0001.md`` from ``docs/adr``: a search finds the file
twice, the second copy without the ``adr`` scope ``docs``'s rules gave it). The rule: a
file is indexed once, under one recorded root. Between roots of the same kind (folder or
git) and git ref — a JSONL file, session logs, another ref never nest:

* a folder strictly inside a recorded root is indexed as *part of* it
  (:func:`enclosing_root`): with that root's record, options and source ids, the run
  (deletions and skipped files included) restricted to the folder (:func:`subtree_of`'s
  ``under``); no root is recorded for it, and options that differ from the root's are
  refused (:func:`check_part`);
* a root enclosing recorded roots leaves their subtrees to them (:func:`subtree_of`): its
  runs (the first and every reindex) neither read, index nor delete anything under them.

Paths are compared as recorded: absolute and resolved (:func:`plait.sources.roots.describe_root`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.errors import ConflictError
from plait.sources.base import Subtree
from plait.sources.folder import DEFAULT_GLOBS, DEFAULT_MAX_BYTES, DEFAULT_SCOPE_RULES

__all__ = ["check_part", "enclosing_root", "nested_roots", "relative_folder", "subtree_of"]

_NESTING_KINDS = ("folder", "git")


def _family(root: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(kind, ref) of a root that can nest (folder, git), else None."""
    kind = root.get("kind")
    if kind not in _NESTING_KINDS:
        return None
    return str(kind), str(root["ref"]) if root.get("ref") else None


def _inside(inner: Mapping[str, Any], outer: Mapping[str, Any]) -> bool:
    """Whether ``inner``'s folder lies strictly inside ``outer``'s, where ``outer``'s runs
    read: not under a hidden folder of a folder root, which its walk never enters
    (:class:`plait.sources.folder.FolderSource`; a git root reads what git tracks)."""
    a, b = Path(str(inner.get("path"))), Path(str(outer.get("path")))
    if a == b or not a.is_relative_to(b):
        return False
    return outer.get("kind") != "folder" or not any(part.startswith(".") for part in a.relative_to(b).parts)


def enclosing_root(root: Mapping[str, Any], recorded: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The recorded root of the same kind and ref whose folder holds ``root``'s folder (the
    innermost when several nest); None when there is none, or ``root`` is no folder, or
    ``root`` is itself recorded (indexing it again is a re-index of it, even when another
    recorded root lies around it: that root's runs leave it its folder)."""
    family = _family(root)
    if family is None or not Path(str(root.get("path"))).is_dir():
        return None
    same = [r for r in recorded if _family(r) == family]
    if any(Path(str(r.get("path"))) == Path(str(root.get("path"))) for r in same):
        return None  # a recorded root, even inside another: its own run (the outer one leaves it)
    around = [r for r in same if _inside(root, r)]
    return max(around, key=lambda r: len(Path(str(r.get("path"))).parts), default=None)


def nested_roots(root: Mapping[str, Any], recorded: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The recorded roots of ``root``'s kind and ref strictly inside its folder, by path;
    only the outermost (a root inside one of them is that one's to leave out)."""
    family = _family(root)
    if family is None:
        return []
    inner = [r for r in recorded if _family(r) == family and _inside(r, root)]
    outermost = [r for r in inner if not any(_inside(r, other) for other in inner)]
    return sorted(outermost, key=lambda r: str(r.get("path")))


def relative_folder(path: str, root: Mapping[str, Any]) -> str:
    """The folder ``path`` (inside ``root``) relative to it, ending in ``/`` (a
    :class:`Subtree` prefix)."""
    return f"{Path(path).relative_to(str(root.get('path'))).as_posix()}/"


def subtree_of(
    root: Mapping[str, Any], recorded: Sequence[Mapping[str, Any]], *, under: str = ""
) -> tuple[Subtree | None, list[str]]:
    """What a run of ``root`` reads — its folder ``under`` (``""``: all of it), less the
    folders of the recorded roots nested in that — and the paths of those roots. The
    subtree is None when it is the whole root (a JSONL or sessions root is always whole)."""
    left = [r for r in nested_roots(root, recorded) if relative_folder(str(r.get("path")), root).startswith(under)]
    exclude = tuple(relative_folder(str(r.get("path")), root) for r in left)
    if not under and not exclude:
        return None, []
    return Subtree(under=under, exclude=exclude), [str(r.get("path")) for r in left]


def _options(root: Mapping[str, Any]) -> dict[str, Any]:
    """A folder or git root's options as its source applies them (defaults filled in)."""
    return {
        "globs": list(root.get("globs") or DEFAULT_GLOBS),
        "scopeRules": [[str(p), str(s)] for p, s in root.get("scopeRules") or DEFAULT_SCOPE_RULES],
        "maxBytes": int(root.get("maxBytes") or DEFAULT_MAX_BYTES),
    }


_NAMES = {"globs": "globs", "scopeRules": "scope rules", "maxBytes": "max_bytes"}


def _shown(value: Any) -> str:
    """An option's value as the CLI takes it: ``*.md *.txt``, ``docs/adr/=adr =docs``, ``2048``."""
    if isinstance(value, list):
        return " ".join("=".join(item) if isinstance(item, list) else str(item) for item in value)
    return str(value)


def check_part(asked: Mapping[str, Any], outer: Mapping[str, Any], *, collection: str) -> None:
    """Refuse (:class:`ConflictError`) to index ``asked`` (a root record made of the
    caller's arguments, :func:`plait.sources.roots.describe_root`) as part of the recorded
    root ``outer`` when an option the caller gave differs from ``outer``'s: its files are
    indexed with ``outer``'s options, and silently dropping the caller's would index
    something else than asked."""
    given, recorded = _options(asked), _options(outer)
    differ = [key for key in _NAMES if key in asked and given[key] != recorded[key]]
    if not differ:
        return
    where = str(outer.get("path"))
    detail = "; ".join(
        f"{_NAMES[key]}: given {_shown(given[key])}, the root's {_shown(recorded[key])}" for key in differ
    )
    raise ConflictError(
        f"{asked.get('path')} lies inside {where}, a recorded root of collection {collection!r}: its files "
        f"are indexed as part of that root, with that root's options, and the options given differ "
        f"({detail}). Run 'plait index {where}' with the options the whole root should have, or "
        f"'plait reindex --source {where}' to re-read it with its own."
    )
