"""The text each arm indexes for a chunk, and the hash that says when it changed.

A chunk of a JSONL/BEIR record (or any chunk without a file path) indexes what it
always did: its heading path, then its content (:func:`plait.ingest.index_text`).

A chunk of a file read from a folder or a git tree (its metadata has ``path``) indexes
more, so that a question naming the file or the document finds it:

``embedding_text`` (the dense arm)
    The document title when it is not already the first heading of the path (a
    front-matter ``title`` or the first H1; not the file-name fallback), the heading
    path, then the chunk's text: for Markdown its visible text
    (:func:`plait.markdown.plain_text`: escapes resolved, tags and link targets
    dropped; a chunk that starts inside a fenced code block carries the fence's opening
    run in ``metadata["fence"]`` and is read as the rest of that block), for other
    files the content as stored.

``lexical_text`` (the BM25 arm)
    One line of *path words* first, then the embedding text. The path words are the
    words and numbers of the folders and the file name (extension dropped), plus each
    number without its leading zeros, plus the scope:
    ``docs/architecture/decisions/0033-ip-ranges.md`` in scope ``adr`` gives
    ``docs architecture decisions 0033 33 ip ranges adr``. They occur once per chunk,
    like the heading path, so a term of the path counts as much as one occurrence in
    the text and never outweighs a chunk that discusses it.

``hash_text`` (what ``content_hash`` is computed from)
    The scope and the embedding text, but not the path: the path is part of the
    chunk's source id, so a chunk under the same id always has the same path, and a
    renamed file's chunks still reuse their vectors by hash.

The chunk's ``content`` stays the raw slice of the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from plait.markdown import plain_text
from plait.types import Chunk, FileOrigin, heading_path

__all__ = ["embedding_text", "hash_text", "is_markdown_path", "lexical_text", "path_words", "reads_as_markdown"]

_MARKDOWN_SUFFIXES = (".md", ".markdown")
_WORD = re.compile(r"[^\W_]+")
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def is_markdown_path(path: str) -> bool:
    return path.lower().endswith(_MARKDOWN_SUFFIXES)


def reads_as_markdown(metadata: Mapping[str, object], origin: object = None) -> bool:
    """Is a chunk with this metadata and origin Markdown, to every reader? Only a chunk of
    a file with a Markdown suffix: the file's ``path`` (folder and git sources record it),
    else its origin's ``source_path`` (a document given in code as ``guide.md``). For every
    source plait reads that is what the chunker cut as Markdown: a JSONL record
    (``corpus.jsonl#42``), a text file, a session event or an FAQ card was cut and indexed
    as plain text, and is read as plain text (ask, the chunk view). A document given in
    code is cut by its part's ``markdown`` flag (default False), which no chunk records:
    give a part whose source path says ``.md`` ``markdown=True``, or a path that does not.

    >>> reads_as_markdown({"path": "docs/adr/0001.md"}), reads_as_markdown({"path": "notes.txt"})
    (True, False)
    >>> reads_as_markdown({"docId": "42"}, FileOrigin(source_path="corpus.jsonl#42"))
    False
    >>> reads_as_markdown({}, FileOrigin(source_path="pool.md"))
    True
    """
    path = metadata.get("path")
    if not isinstance(path, str):
        path = getattr(origin, "source_path", None)
    return isinstance(path, str) and is_markdown_path(path)


def path_words(path: str) -> list[str]:
    """The words and numbers of a relative path, file extension dropped, plus each
    number without its leading zeros: ``0033-ip-ranges.md`` → 0033, 33, ip, ranges."""
    folders, _, name = path.rpartition("/")
    stem = _SUFFIX.sub("", name) or name
    words: list[str] = []
    for word in _WORD.findall(f"{folders} {stem}"):
        words.append(word)
        if word.isdigit() and word.startswith("0") and word.strip("0"):
            words.append(word.lstrip("0"))
    return words


def _file_path(chunk: Chunk) -> str | None:
    path = chunk.metadata.get("path")
    if isinstance(path, str) and isinstance(chunk.origin, FileOrigin):
        return path
    return None


def _joined(head: Sequence[str], body: str) -> str:
    if not head:
        return body
    return "\n".join(head) + "\n\n" + body


def embedding_text(chunk: Chunk) -> str:
    """What the dense arm embeds for ``chunk`` (see the module docstring)."""
    heading = heading_path(chunk.origin)
    path = _file_path(chunk)
    if path is None:
        return _joined(heading, chunk.content)
    markdown = is_markdown_path(path)
    fence = chunk.metadata.get("fence")
    body = plain_text(chunk.content, fence=fence if isinstance(fence, str) else None) if markdown else chunk.content
    title = chunk.origin.title if markdown and isinstance(chunk.origin, FileOrigin) else None
    name = path.rpartition("/")[2]
    if title and title != name and (not heading or heading[0] != title):
        heading = [title, *heading]
    return _joined(heading, body)


def lexical_text(chunk: Chunk) -> str:
    """What the lexical arm analyses for ``chunk`` (see the module docstring)."""
    path = _file_path(chunk)
    text = embedding_text(chunk)
    if path is None:
        return text
    return " ".join([*path_words(path), chunk.scope]) + "\n" + text


def hash_text(chunk: Chunk) -> str:
    """What ``content_hash`` is computed from (see the module docstring)."""
    if _file_path(chunk) is None:
        return embedding_text(chunk)
    return chunk.scope + "\n" + embedding_text(chunk)
