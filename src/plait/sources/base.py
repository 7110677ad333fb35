"""What a source hands to the indexer: documents made of parts, and what it skipped.

A *document* is the unit reindex replaces atomically (a file, a session, a corpus
record). It is made of *parts*: a file has one, a session has one per indexed event.
Each part is chunked on its own and its chunks inherit the part's origin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from plait.types import FileOrigin, SessionOrigin, SkippedSource

__all__ = ["WHOLE", "Scan", "Source", "SourceDocument", "SourcePart", "Subtree", "kept_skip"]


@dataclass(frozen=True, slots=True)
class SourcePart:
    """A piece of text with its origin; ``key`` disambiguates chunk ids within a document."""

    text: str
    origin: FileOrigin | SessionOrigin
    markdown: bool = False
    key: str = ""


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """A unit of reindex: its id, scope, parts and metadata copied to every chunk."""

    source_id: str
    scope: str
    parts: tuple[SourcePart, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Scan:
    """The result of reading a source: documents (lazily), plus what was skipped.

    ``skipped`` fills up while ``documents`` is consumed; so does ``skipped_by_type``,
    which counts records left out on purpose by their type (a session log's tool calls
    and statuses), as opposed to ``skipped`` sources that could not be read.
    ``unmatched`` holds the relative paths of the files a folder walk saw whose names
    match none of its globs (so explain can say so without touching the disk);
    ``walk_errors`` the folders a walk could not list (each also in ``skipped``), which
    makes the indexer keep sources it would otherwise delete as vanished.
    """

    documents: Iterable[SourceDocument]
    skipped: list[SkippedSource] = field(default_factory=list)
    seen: int = 0
    skipped_by_type: dict[str, int] = field(default_factory=dict)
    unmatched: set[str] = field(default_factory=set)
    walk_errors: list[str] = field(default_factory=list)
    conventions: dict[str, int] = field(default_factory=dict)
    """Folders whose files became scope ``adr`` by convention, with how many
    (:mod:`plait.sources.conventions`); filled while ``documents`` is consumed."""
    untracked: list[str] = field(default_factory=list)
    """A git working tree's files that match the globs but git neither tracks nor ignores
    (relative paths, sorted): not indexed, by design (``git add`` them), and said so."""
    uncommitted_deletions: list[str] = field(default_factory=list)
    """A git working tree's tracked files (matching the globs) that are gone from it:
    deleted, the deletion not committed (relative paths). Neither read nor skipped: the
    working tree does not have them, so a run deletes what the index holds of them, as of
    any file a root no longer has; explain says so."""
    unread: set[str] = field(default_factory=set)
    """Skipped paths that are still there but whose content could not be used this time
    (not valid UTF-8, over the size limit, a read error; not a file that became binary
    or empty):
    the indexer keeps the version it indexed before instead of deleting it as vanished."""
    path_scope: Callable[[str], str] | None = None
    """The scope a skipped path would have by its path alone (folder and git sources), so
    that a run restricted to one scope reports only that scope's skipped files; None
    where a path says nothing of it (JSONL, sessions)."""
    total: int | None = None
    """How many sources ``seen`` will reach, when the source knows it before reading them
    (a folder walk's or a git tree's file list), so progress can show a total and an ETA;
    None for streams (session logs, JSONL). Set at the latest when the first document
    is yielded."""

    def __iter__(self) -> Iterator[SourceDocument]:
        return iter(self.documents)


@dataclass(frozen=True, slots=True)
class Subtree:
    """The part of a folder or git root a run reads: the paths under ``under`` (``""``: the
    whole root), less those under each ``exclude`` prefix; both relative to the root, each
    ending in ``/`` (:mod:`plait.sources.nesting`: a folder indexed as part of the recorded
    root around it, a root leaving the roots recorded inside it alone)."""

    under: str = ""
    exclude: tuple[str, ...] = ()

    def holds(self, path: str) -> bool:
        """Whether the run reads ``path``: a source id relative to the root, or a folder
        ending in ``/`` (``""`` or ``/``: the root) that is in the subtree or holds part
        of it (an unreadable folder above the subtree holds back its deletions too)."""
        if not path or path.endswith("/"):
            folder = path.strip("/")
            path = f"{folder}/" if folder else ""
            if self.under.startswith(path):
                return True
        return path.startswith(self.under) and not any(path.startswith(prefix) for prefix in self.exclude)


WHOLE = Subtree()
"""All of a root."""


class Source(Protocol):
    """Anything that can be scanned into documents."""

    def scan(self) -> Scan: ...


def kept_skip(item: SkippedSource) -> SkippedSource:
    """A skipped source of :attr:`Scan.unread` that the index still holds, saying that the
    version indexed before is kept."""
    return item.model_copy(
        update={"reason": f"{item.reason}; the version indexed before is kept (fix the file and reindex)"}
    )
