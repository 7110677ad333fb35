"""A folder of Markdown and text files.

Scopes come from path prefixes relative to the root (first match wins) when scope
rules are given; by default from conventions (:mod:`plait.sources.conventions`: the
usual ADR folders and ADR-shaped files → ``adr``, everything else → ``docs``). Files that resolve outside
the root (symlinks), binary files (a NUL byte in the first 8 KiB), files that are not
valid UTF-8, files with no text (empty or only whitespace) and files over the size
limit are skipped with the reason.
"""

from __future__ import annotations

import codecs
import errno
import fnmatch
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from plait.errors import SourceError
from plait.markdown import document_title
from plait.sources.base import WHOLE, Scan, SourceDocument, SourcePart, Subtree
from plait.sources.conventions import DEFAULT_SCOPE_RULES, path_scope, scope_for, scope_of
from plait.types import FileOrigin, SkippedSource

__all__ = [
    "DEFAULT_GLOBS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_SCOPE_RULES",
    "EMPTY_REASON",
    "LOST_TEXT_REASONS",
    "FolderSource",
    "decode_text",
    "resolve_path",
    "scope_for",
    "title_of",
    "undecodable_name",
]

_LONE_CR = re.compile(r"\r(?!\n)")
DEFAULT_GLOBS: tuple[str, ...] = ("*.md", "*.markdown", "*.txt", "*.rst")
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
_MARKDOWN = (".md", ".markdown")


#: decode_text's reason for a binary file: a file that *became* binary lost its text for
#: good, so its old chunks go (unlike an undecodable byte in a text file: Scan.unread).
BINARY_REASON = "binary file (NUL byte in the first 8 KiB)"
#: decode_text's reason for a file with no text (empty, or only whitespace): it yields no
#: chunk, so it is skipped rather than counted as indexed; an emptied file's chunks go.
EMPTY_REASON = "no text to index (empty or only whitespace)"
#: The reasons of a file whose text is gone for good, not merely unreadable this time
#: (see Scan.unread): its old chunks are deleted.
LOST_TEXT_REASONS = frozenset({BINARY_REASON, EMPTY_REASON})


def decode_text(data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for UTF-8 text (a UTF-8 BOM dropped) or UTF-16 text with its BOM
    (what some Windows editors save) that is not empty or only whitespace, else
    (None, reason). A lone ``\\r`` (not before ``\\n``) becomes ``\\n``: Markdown and the
    chunker end lines at ``\\n`` only, so a file saved with classic Mac line endings
    was one line, its first heading's title the whole file."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            return None, f"not valid UTF-16 (byte {exc.start})"
    elif b"\x00" in data[:8192]:
        return None, BINARY_REASON
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return None, f"not valid UTF-8 (byte {exc.start})"
    if not text.strip():
        return None, EMPTY_REASON
    if "\r" in text:  # a lone CR ends a line, as in CommonMark (classic Mac files); CRLF stays
        text = _LONE_CR.sub("\n", text)
    return text, None


def resolve_path(path: Path) -> Path:
    """``path.resolve()``, with a symlink loop raised as an ``OSError`` (ELOOP).

    Python 3.11 raises ``RuntimeError`` for a loop (``l1.md → l2.md → l1.md``), which
    the callers' ``except OSError`` skip-with-a-reason would not catch."""
    try:
        return path.resolve()
    except RuntimeError as exc:
        raise OSError(errno.ELOOP, "symlink loop", str(path)) from exc


def undecodable_name(relative: str) -> str | None:
    """For a path whose bytes are not UTF-8 (decoded with ``surrogateescape``), its
    printable form (``caf\\xe9.md``); None for a path that is valid text."""
    try:
        relative.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(relative).decode("utf-8", "backslashreplace")
    return None


def title_of(text: str, fallback: str) -> str:
    """A Markdown document's title (front-matter ``title``, else the first level-1
    heading, read as CommonMark: :func:`plait.markdown.document_title`), else ``fallback``."""
    return document_title(text) or fallback


@dataclass(frozen=True, kw_only=True)
class FolderSource:
    """Every matching file under ``root`` (hidden folders ignored); only those of
    ``subtree`` when given (the walk starts at its folder and skips its excluded ones),
    their ids still relative to ``root``."""

    root: Path
    globs: Sequence[str] = DEFAULT_GLOBS
    scope_rules: Sequence[tuple[str, str]] = DEFAULT_SCOPE_RULES
    max_bytes: int = DEFAULT_MAX_BYTES
    subtree: Subtree = WHOLE

    def _paths(self, scan: Scan) -> Iterator[Path]:
        def unreadable(exc: OSError) -> None:
            where = Path(exc.filename or self.root)
            try:
                relative = where.relative_to(self.root).as_posix()
            except ValueError:
                relative = where.as_posix()
            folder = "" if relative == "." else relative
            scan.walk_errors.append(folder)
            scan.skipped.append(
                SkippedSource(path=f"{folder}/", reason=f"unreadable folder: {exc.strerror or exc}")
            )

        top = self.root / self.subtree.under
        for dirpath, dirnames, filenames in os.walk(top, onerror=unreadable, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if self.subtree.exclude:
                here = Path(dirpath).relative_to(self.root).as_posix()
                prefix = "" if here == "." else f"{here}/"
                dirnames[:] = [d for d in dirnames if self.subtree.holds(f"{prefix}{d}/")]
            for name in sorted(filenames):
                if any(fnmatch.fnmatch(name, g) for g in self.globs):
                    yield Path(dirpath) / name
                else:
                    scan.unmatched.add((Path(dirpath) / name).relative_to(self.root).as_posix())

    def scan(self) -> Scan:
        root = self.root.resolve()
        if not root.is_dir():
            raise SourceError(f"{self.root} is not a folder")
        scan = Scan(documents=[], path_scope=partial(path_scope, rules=self.scope_rules))
        scan.documents = self._documents(root, scan)
        return scan

    def _documents(self, root: Path, scan: Scan) -> Iterator[SourceDocument]:
        paths = list(self._paths(scan))  # names only: cheap next to reading the files
        scan.total = len(paths)
        for path in paths:
            relative = path.relative_to(self.root).as_posix()
            scan.seen += 1
            if (printable := undecodable_name(relative)) is not None:
                scan.skipped.append(SkippedSource(path=printable, reason="file name is not valid UTF-8"))
                continue
            reason = None
            text = None
            present = False  # there, but its content unusable now (see Scan.unread)
            try:
                resolved = resolve_path(path)
                if not resolved.is_relative_to(root):
                    reason = f"resolves outside the indexed root ({resolved})"
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
            if reason is not None or text is None:
                scan.skipped.append(SkippedSource(path=relative, reason=reason or "unreadable"))
                if present and reason not in LOST_TEXT_REASONS:
                    scan.unread.add(relative)
                continue
            markdown = path.suffix.lower() in _MARKDOWN
            origin = FileOrigin(
                source_path=relative,
                title=title_of(text, path.name) if markdown else path.name,
            )
            yield SourceDocument(
                source_id=relative,
                scope=scope_of(relative, text, self.scope_rules, scan),
                parts=(SourcePart(text=text, origin=origin, markdown=markdown),),
                metadata={"path": relative},
            )
