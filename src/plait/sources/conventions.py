"""Scopes by convention: where repositories keep their architecture decision records.

With the default scope rules (no ``--scope-rule`` given), a file is scope ``adr`` when

* it lies under one of the usual ADR folders, at the top of the tree or inside any
  folder: ``docs/adr/``, ``doc/adr/``, ``docs/architecture/decisions/``,
  ``documentation/adr/``, ``architecture-decision-records/``, ``adr/``,
  ``decisions/``; or
* it is shaped like an ADR wherever it is: a Markdown file named ``NNNN-title.md``
  (three or more digits) with a *Decision* section (``Decision``, ``Decision Outcome``)
  and a *Status* or *Context* section (``Status``, ``Context``, ``Context and Problem
  Statement``), or a front-matter ``status:`` line (MADR).

Everything else is ``docs``. Explicit scope rules replace all of this (first matching
prefix wins, as before). :func:`convention_scope` also returns the folder that made
the decision, so the index report can say "32 ADRs under docs/architecture/decisions
→ adr".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from plait.markdown import headings
from plait.sources.base import Scan

__all__ = [
    "ADR_FOLDERS", "DEFAULT_SCOPE_RULES", "convention_scope", "looks_like_adr", "path_scope", "scope_for", "scope_of",
]

#: The rules a source uses when none are given; with them, conventions decide.
DEFAULT_SCOPE_RULES: tuple[tuple[str, str], ...] = (("docs/adr/", "adr"), ("", "docs"))

ADR_FOLDERS: tuple[str, ...] = (
    "docs/adr/",
    "doc/adr/",
    "docs/architecture/decisions/",
    "documentation/adr/",
    "architecture-decision-records/",
    "adr/",
    "decisions/",
)
_NUMBERED = re.compile(r"^\d{3,}-[^/]+\.(?:md|markdown)$", re.IGNORECASE)
_DECISION = {"decision", "decision outcome", "decisions"}
_STATUS_OR_CONTEXT = {"status", "context", "context and problem statement"}
_FRONT_STATUS = re.compile(r"\A---\r?\n(?:.*\r?\n)*?status\s*:", re.IGNORECASE)
_NUMBER_PREFIX = re.compile(r"^\s*(?:\d+[.)]?\s*)?")


def _folder_match(relative: str) -> str | None:
    """The ADR folder (as a path without the trailing slash) holding ``relative``."""
    for folder in ADR_FOLDERS:
        if relative.startswith(folder):
            return folder.rstrip("/")
        at = relative.find("/" + folder)
        if at >= 0:
            return relative[: at + 1 + len(folder) - 1]
    return None


def looks_like_adr(relative: str, text: str) -> bool:
    """An ``NNNN-title.md`` file with Decision and Status/Context sections (or MADR)."""
    name = relative.rpartition("/")[2]
    if not _NUMBERED.match(name):
        return False
    titles = {_NUMBER_PREFIX.sub("", h.title).strip().lower().rstrip(":") for h in headings(text)}
    if not titles & _DECISION:
        return False
    return bool(titles & _STATUS_OR_CONTEXT) or _FRONT_STATUS.match(text) is not None


def convention_scope(relative: str, text: str) -> tuple[str, str | None]:
    """(scope, folder that made it ``adr`` or None) for a file under the default rules."""
    folder = _folder_match(relative)
    if folder is not None:
        return "adr", folder
    if looks_like_adr(relative, text):
        return "adr", relative.rpartition("/")[0] or "."
    return "docs", None


def _conventional(rules: Sequence[tuple[str, str]]) -> bool:
    """Whether ``rules`` are the default ones, under which the conventions decide."""
    return tuple((str(p), str(s)) for p, s in rules) == DEFAULT_SCOPE_RULES


def scope_for(relative: str, rules: Sequence[tuple[str, str]]) -> str:
    """The scope of the first rule whose prefix the POSIX path starts with (``docs`` if none does)."""
    for prefix, scope in rules:
        if relative.startswith(prefix):
            return scope
    return "docs"


def path_scope(relative: str, rules: Sequence[tuple[str, str]]) -> str:
    """The scope a file's path alone gives it (an ADR-shaped file outside the ADR folders
    is ``docs`` here: its text decides): what a skipped file, whose text is unknown, is
    counted in."""
    if _conventional(rules):
        return "adr" if _folder_match(relative) is not None else "docs"
    return scope_for(relative, rules)


def scope_of(relative: str, text: str, rules: Sequence[tuple[str, str]], scan: Scan) -> str:
    """The scope of a file: by convention under the default rules (counting each
    folder that made a file ``adr`` in ``scan.conventions``), else :func:`scope_for`."""
    if _conventional(rules):
        scope, folder = convention_scope(relative, text)
        if folder is not None:
            scan.conventions[folder] = scan.conventions.get(folder, 0) + 1
        return scope
    return scope_for(relative, rules)
