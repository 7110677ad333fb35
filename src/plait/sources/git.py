"""A git repository of Markdown and text files: the working tree, or any commit.

Only files git tracks are read; the working tree's other files that match the globs and
that git does not ignore are listed in ``Scan.untracked`` (an index report and explain name
them: ``git add`` indexes them). A tracked file deleted from the working tree, the deletion
not committed, is gone: not read, not skipped, listed in ``Scan.uncommitted_deletions``
(the indexer deletes what it held of it; explain says it is deleted). Without ``ref`` the
files of the working tree are read from disk (``git ls-files``), so uncommitted edits of
tracked files are indexed; with
``ref`` (a commit, branch or tag) the blobs of that commit are read straight from the
object database (``git ls-tree`` + ``git cat-file --batch``): nothing is checked out, and
the repository may be bare.

When ``root`` is a sub-folder of a working tree, only the files under it are read and
their paths are relative to it (as for :class:`~plait.sources.folder.FolderSource`).
Scopes, globs, the size limit and the skip reasons are the folder source's: a file that
resolves outside the root (a symlink, on disk or in the commit), a binary file, a file
that is not valid UTF-8 or is larger than ``max_bytes`` is skipped with the reason.

git runs as a subprocess with argument lists (never a shell).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from plait.errors import SourceError
from plait.sources.base import WHOLE, Scan, SourceDocument, SourcePart, Subtree
from plait.sources.conventions import path_scope, scope_of
from plait.sources.folder import (
    DEFAULT_GLOBS,
    DEFAULT_MAX_BYTES,
    DEFAULT_SCOPE_RULES,
    LOST_TEXT_REASONS,
    decode_text,
    resolve_path,
    title_of,
    undecodable_name,
)
from plait.types import FileOrigin, SkippedSource

__all__ = ["GitSource", "is_git_work_tree"]

_MARKDOWN = (".md", ".markdown")
_SYMLINK = "120000"
_GITLINK = "160000"
_MAX_LINK_HOPS = 8
_BATCH = 256


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run ``git ARGS`` in ``root`` and return stdout; SourceError on any failure."""
    executable = shutil.which("git")
    if executable is None:
        raise SourceError("the git executable is not on PATH; install git to index a repository")
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    try:
        done = subprocess.run(
            [executable, *args],
            cwd=root,
            input=stdin,
            capture_output=True,
            env=env,
            check=False,
        )
    except OSError as exc:
        raise SourceError(f"cannot run git in {root}: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SourceError(
            f"git {' '.join(args[:2])} failed in {root}: {message[-1] if message else done.returncode}"
        )
    return done.stdout


def is_git_work_tree(path: Path) -> bool:
    """True when ``path`` is a git working tree or a folder inside one.

    A docs folder inside a repository is then read through git: tracked files only,
    so build output and untracked scratch files never reach the index.
    """
    if (path / ".git").exists():
        return True
    executable = shutil.which("git")
    if executable is None or not path.is_dir():
        return False
    try:
        done = subprocess.run(
            [executable, "rev-parse", "--is-inside-work-tree"],
            cwd=path,
            capture_output=True,
            timeout=30,
            check=False,
            env=dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0"),
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.strip() == b"true"


@dataclass(frozen=True, slots=True)
class _Entry:
    mode: str
    kind: str
    object_id: str
    size: int | None


@dataclass(frozen=True, kw_only=True)
class GitSource:
    """Tracked files of a repository (working tree, or the commit ``ref`` names); only
    those of ``subtree`` when given, their ids still relative to ``root``."""

    root: Path
    ref: str | None = None
    globs: Sequence[str] = DEFAULT_GLOBS
    scope_rules: Sequence[tuple[str, str]] = DEFAULT_SCOPE_RULES
    max_bytes: int = DEFAULT_MAX_BYTES
    subtree: Subtree = WHOLE

    def _wanted(self, relative: str) -> bool:
        if not self.subtree.holds(relative):
            return False
        name = posixpath.basename(relative)
        return any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(relative, g) for g in self.globs)

    def scan(self) -> Scan:
        if not self.root.is_dir():
            raise SourceError(f"{self.root} is not a folder")
        root = self.root.resolve()
        scan = Scan(documents=[], path_scope=partial(path_scope, rules=self.scope_rules))
        if self.ref is None:
            if _git(root, "rev-parse", "--is-inside-work-tree").strip() != b"true":
                raise SourceError(f"{self.root} is not inside a git working tree; pass a ref to index a commit")
            listing = _git(root, "ls-files", "-z", "--cached")
            # tracked, but deleted from the working tree (not committed): gone, not skipped
            gone = {os.fsdecode(p) for p in _git(root, "ls-files", "-z", "--deleted").split(b"\0") if p}
            scan.uncommitted_deletions = sorted(p for p in gone if self._wanted(p))
            paths = sorted({os.fsdecode(p) for p in listing.split(b"\0") if p} - gone)
            scan.total = sum(1 for p in paths if self._wanted(p))
            others = _git(root, "ls-files", "-z", "--others", "--exclude-standard")
            scan.untracked = sorted(p for p in {os.fsdecode(p) for p in others.split(b"\0") if p} if self._wanted(p))
            scan.documents = self._working_tree(root, paths, scan)
        else:
            if not self.ref or self.ref.startswith("-"):
                raise SourceError(f"invalid git ref {self.ref!r}")
            _git(root, "rev-parse", "--git-dir")  # "not a git repository" before "bad ref"
            try:
                commit = _git(
                    root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{self.ref}^{{commit}}"
                )
            except SourceError:
                raise SourceError(
                    f"git ref {self.ref!r} does not name a commit in {self.root}"
                ) from None
            sha = commit.decode("ascii").strip()
            scan.documents = self._commit(root, sha, scan)
        return scan

    # the working tree -------------------------------------------------------------
    def _working_tree(self, root: Path, paths: list[str], scan: Scan) -> Iterator[SourceDocument]:
        for relative in paths:
            if not self._wanted(relative):
                continue
            scan.seen += 1
            if (printable := undecodable_name(relative)) is not None:
                scan.skipped.append(SkippedSource(path=printable, reason="file name is not valid UTF-8"))
                continue
            path = root / relative
            text: str | None = None
            reason: str | None = None
            present = False  # there, but its content unusable now (see Scan.unread)
            try:
                resolved = resolve_path(path)
                if not resolved.is_relative_to(root):
                    reason = f"resolves outside the indexed root ({resolved})"
                elif not os.path.lexists(path):  # deleted since the listing: as above
                    scan.uncommitted_deletions.append(relative)
                    continue
                elif not resolved.is_file():
                    reason = "not a regular file"
                else:
                    present = True
                    if (size := resolved.stat().st_size) > self.max_bytes:
                        reason = f"larger than the limit ({size} bytes > {self.max_bytes})"
                    else:
                        text, reason = decode_text(resolved.read_bytes())
            except OSError as exc:
                reason = f"unreadable: {exc.strerror or exc}"
            if text is None:
                scan.skipped.append(SkippedSource(path=relative, reason=reason or "unreadable"))
                if present and reason not in LOST_TEXT_REASONS:
                    scan.unread.add(relative)
                continue
            yield self._document(relative, text, {"path": relative}, scan)

    # a commit -----------------------------------------------------------------------
    def _listing(self, root: Path, sha: str) -> dict[str, _Entry]:
        out = _git(root, "ls-tree", "-r", "-z", "-l", "--end-of-options", sha)
        entries: dict[str, _Entry] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            mode, kind, object_id, size = meta.decode("ascii").split()
            entries[os.fsdecode(raw_path)] = _Entry(
                mode, kind, object_id, None if size == "-" else int(size)
            )
        return entries

    def _resolve_link(
        self, relative: str, entries: dict[str, _Entry], blobs: dict[str, bytes]
    ) -> tuple[str | None, str | None]:
        """(path inside the tree the symlink points to, None) or (None, reason)."""
        current = relative
        for _ in range(_MAX_LINK_HOPS):
            entry = entries[current]
            if entry.mode != _SYMLINK:
                return current, None
            target = os.fsdecode(blobs[entry.object_id])
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
            if posixpath.isabs(target) or joined == ".." or joined.startswith("../"):
                return None, f"resolves outside the indexed root ({target})"
            if joined not in entries:
                return None, f"symbolic link to a path that is not a tracked file ({target})"
            if entries[joined].mode == _SYMLINK and entries[joined].object_id not in blobs:
                blobs.update(self._read([entries[joined].object_id]))
            current = joined
        return None, f"more than {_MAX_LINK_HOPS} chained symbolic links"

    def _read(self, object_ids: Sequence[str]) -> dict[str, bytes]:
        """Blob contents by object id, via one ``git cat-file --batch``."""
        ids = list(dict.fromkeys(object_ids))
        if not ids:
            return {}
        out = _git(self.root.resolve(), "cat-file", "--batch", stdin=("\n".join(ids) + "\n").encode())
        blobs: dict[str, bytes] = {}
        pos = 0
        for object_id in ids:
            end = out.index(b"\n", pos)
            header = out[pos:end].decode("ascii").split()
            if len(header) != 3 or header[1] != "blob":
                raise SourceError(f"git cat-file: unexpected answer {out[pos:end]!r} for {object_id}")
            size = int(header[2])
            blobs[object_id] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
        return blobs

    def _commit(self, root: Path, sha: str, scan: Scan) -> Iterator[SourceDocument]:
        entries = self._listing(root, sha)
        wanted = [p for p in sorted(entries) if self._wanted(p)]
        scan.total = len(wanted)
        for start in range(0, len(wanted), _BATCH):
            paths = wanted[start : start + _BATCH]
            plan: dict[str, str] = {}  # path → the tree path whose blob to read
            reasons: dict[str, str] = {}
            links = [entries[p].object_id for p in paths if entries[p].mode == _SYMLINK]
            link_blobs = self._read(links)
            for relative in paths:
                entry = entries[relative]
                target = relative
                if entry.mode == _GITLINK or entry.kind != "blob":
                    reasons[relative] = "submodule or non-file entry (not indexed)"
                    continue
                if entry.mode == _SYMLINK:
                    resolved, reason = self._resolve_link(relative, entries, link_blobs)
                    if resolved is None:
                        reasons[relative] = reason or "unresolvable symbolic link"
                        continue
                    target = resolved
                size = entries[target].size
                if size is not None and size > self.max_bytes:
                    reasons[relative] = f"larger than the limit ({size} bytes > {self.max_bytes})"
                    scan.unread.add(relative)
                    continue
                plan[relative] = target
            blobs = self._read([entries[t].object_id for t in plan.values()])
            for relative in paths:
                scan.seen += 1
                if relative in reasons:
                    scan.skipped.append(SkippedSource(path=relative, reason=reasons[relative]))
                    continue
                text, reason = decode_text(blobs[entries[plan[relative]].object_id])
                if text is None:
                    scan.skipped.append(SkippedSource(path=relative, reason=reason or "unreadable"))
                    if reason not in LOST_TEXT_REASONS:
                        scan.unread.add(relative)
                    continue
                yield self._document(relative, text, {"path": relative, "commit": sha}, scan)

    # shared -------------------------------------------------------------------------
    def _document(self, relative: str, text: str, metadata: dict[str, str], scan: Scan) -> SourceDocument:
        name = posixpath.basename(relative)
        markdown = name.lower().endswith(_MARKDOWN)
        origin = FileOrigin(
            source_path=relative, title=title_of(text, name) if markdown else name
        )
        return SourceDocument(
            source_id=relative,
            scope=scope_of(relative, text, self.scope_rules, scan),
            parts=(SourcePart(text=text, origin=origin, markdown=markdown),),
            metadata=metadata,
        )
