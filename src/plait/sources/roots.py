"""Recorded roots: what ``index`` remembers so ``reindex`` and ``coverage`` can re-read it.

A root is a JSON object kept in the collection's settings (``settings["roots"]``)::

    {"kind": "folder" | "git" | "jsonl" | "sessions", "path": "/abs/path",
     "ref": "main", "globs": [...], "scopeRules": [["docs/adr/", "adr"], ...],
     "maxBytes": 2097152, "scope": "sessions"}

Only ``kind`` and ``path`` are always present; options appear when they were given.
Its *key* (``kind:path`` plus ``@ref`` for a commit) is stored with every source the
root produced, which is how a reindex knows which stored sources vanished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.errors import ConfigError, SourceError
from plait.sources.base import WHOLE, Source, Subtree
from plait.sources.folder import DEFAULT_GLOBS, DEFAULT_MAX_BYTES, DEFAULT_SCOPE_RULES, FolderSource
from plait.sources.git import GitSource, is_git_work_tree
from plait.sources.jsonl import JsonlSource
from plait.sources.sessions import DEFAULT_SESSION_SCOPE, SessionSource

__all__ = ["ROOT_KINDS", "beir_corpus", "describe_root", "open_root", "parse_scope_rules", "root_key"]

ROOT_KINDS = ("folder", "git", "jsonl", "sessions")


def parse_scope_rules(rules: Sequence[str]) -> list[tuple[str, str]]:
    """``["docs/adr/=adr", "=docs"]`` → ``[("docs/adr/", "adr"), ("", "docs")]``."""
    parsed = []
    for rule in rules:
        prefix, sep, scope = rule.partition("=")
        if not sep or not scope.strip():
            raise ConfigError(f"scope rule {rule!r} is not PREFIX=SCOPE (e.g. 'docs/adr/=adr')")
        parsed.append((prefix, scope.strip()))
    return parsed


def describe_root(
    path: str | Path,
    *,
    kind: str | None = None,
    ref: str | None = None,
    globs: Sequence[str] | None = None,
    scope_rules: Sequence[tuple[str, str]] | None = None,
    max_bytes: int | None = None,
    scope: str | None = None,
) -> dict[str, Any]:
    """The root record for a path; ``kind`` None picks one: a ``.jsonl`` file is a
    JSONL corpus, and so is a BEIR dataset folder (:func:`beir_corpus`: its
    ``corpus.jsonl``); a git working tree or a folder inside one (or any path with ``ref``)
    a git source, any other folder a folder source."""
    target = Path(path).expanduser()
    if kind is None:
        if ref is not None:
            kind = "git"
        elif target.is_file() and target.suffix == ".jsonl":
            kind = "jsonl"
        elif (corpus := beir_corpus(target)) is not None:
            kind, target = "jsonl", corpus
        elif target.is_dir() and is_git_work_tree(target):
            kind = "git"
        else:
            kind = "folder"
    if kind not in ROOT_KINDS:
        raise ConfigError(f"unknown source kind {kind!r}; expected one of {', '.join(ROOT_KINDS)}")
    if not target.exists():
        raise SourceError(f"{target} does not exist")
    if ref is not None and kind != "git":
        raise ConfigError(f"--ref applies to git repositories, not to a {kind} source")
    if max_bytes is not None and max_bytes < 1:
        raise ConfigError(f"max_bytes must be a positive number of bytes, got {max_bytes}")
    root: dict[str, Any] = {"kind": kind, "path": str(target.resolve())}
    if ref is not None:
        root["ref"] = ref
    if kind in ("folder", "git"):
        if globs:
            root["globs"] = list(globs)
        if scope_rules:
            root["scopeRules"] = [[prefix, name] for prefix, name in scope_rules]
        if max_bytes is not None:
            root["maxBytes"] = max_bytes
    elif kind == "jsonl":
        root["scope"] = scope or "docs"
    else:
        root["scope"] = scope or DEFAULT_SESSION_SCOPE
    return root


def beir_corpus(folder: Path) -> Path | None:
    """``folder/corpus.jsonl`` when ``folder`` is laid out as a BEIR dataset (``corpus.jsonl``,
    ``queries.jsonl`` and a ``qrels/`` folder: what ``plait eval`` reads), else None. Read as
    a folder, it would index the dataset's README and skip its corpus (no glob matches
    ``.jsonl``)."""
    corpus = folder / "corpus.jsonl"
    if corpus.is_file() and (folder / "queries.jsonl").is_file() and (folder / "qrels").is_dir():
        return corpus
    return None


def root_key(root: Mapping[str, Any]) -> str:
    """The identity stored with every source of the root: ``kind:path[@ref]``."""
    key = f"{root.get('kind')}:{root.get('path')}"
    return f"{key}@{root['ref']}" if root.get("ref") else key


def open_root(root: Mapping[str, Any], subtree: Subtree | None = None) -> Source:
    """The source a root record describes; of a folder or git root, only ``subtree`` when
    given (:func:`plait.sources.nesting.subtree_of`)."""
    kind = root.get("kind")
    path = Path(str(root.get("path")))
    if kind in ("folder", "git"):
        globs = tuple(root.get("globs") or DEFAULT_GLOBS)
        rules = tuple((str(p), str(s)) for p, s in root.get("scopeRules") or DEFAULT_SCOPE_RULES)
        max_bytes = int(root.get("maxBytes") or DEFAULT_MAX_BYTES)
        part = subtree or WHOLE
        if kind == "git":
            return GitSource(
                root=path, ref=root.get("ref"), globs=globs, scope_rules=rules, max_bytes=max_bytes, subtree=part
            )
        return FolderSource(root=path, globs=globs, scope_rules=rules, max_bytes=max_bytes, subtree=part)
    if kind == "jsonl":
        return JsonlSource(path=path, scope=str(root.get("scope") or "docs"))
    if kind == "sessions":
        return SessionSource(path=path, scope=str(root.get("scope") or DEFAULT_SESSION_SCOPE))
    raise ConfigError(
        f"unknown recorded source kind {kind!r}; expected one of {', '.join(ROOT_KINDS)}"
    )
