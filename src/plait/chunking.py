"""Cut Markdown and plain text into overlapping, citable chunks.

Markdown is cut by heading first, then by size inside each section; plain text is cut
by size only. Every chunk is an exact slice of the input (``text[start:end]``), so a
citation can always point back at the original characters.

Sections
    Markdown is read as CommonMark (:mod:`plait.markdown`, markdown-it-py): every
    top-level ATX heading (``#`` to ``######``) and setext heading (text underlined
    with ``===`` or ``---``) starts a section that runs up to the next one; nothing
    inside a code fence, an HTML block, a list item or a block quote is a heading. A
    heading of level *n* closes every open heading of level *n* or deeper, so
    ``# A`` / ``### C`` / ``## B`` gives ``B`` the path ``("A", "B")``. Titles in the
    path are the visible titles (``Module: aws::node\\_group`` gives
    ``Module: aws::node_group``); :attr:`TextChunk.heading_key` keeps the source
    titles, which chunk ids are built from so that they do not change for a heading
    whose source did not. The heading (its line, or a setext heading's lines and
    underline) belongs to its own section, so a section's first chunk starts with
    it, and a heading with no body still yields a chunk. Text before the first
    heading has the path ``()``. Only ``\\n`` (and so ``\\r\\n``) ends a line; a
    byte-order mark may precede a heading.

The size rule (:func:`split_by_size`), applied to each section
    Chunks never start or end with whitespace (:meth:`str.isspace`), so no chunk is
    empty or whitespace-only and whitespace-only sections yield nothing. Let ``pos``
    be where the current chunk starts and ``limit`` the end of the text with trailing
    whitespace removed.

    1. If ``limit - pos <= target`` the rest is the last chunk.
    2. Otherwise a cut ``c`` is chosen among the positions ``c`` with
       ``pos + target - window < c <= pos + target + window`` and
       ``pos < c < limit``; the ideal position is ``t = pos + target``:

       * a paragraph break, i.e. a ``\\n`` whose following line is blank (only
         whitespace, so ``\\r\\n\\r\\n`` counts), nearest to ``t``;
       * else, when ``t`` lies in the body of a Markdown table, the end of one of its
         rows (the ``\\n`` after a body row) nearest to ``t``: a row is never split
         while the window holds a row end;
       * else a whitespace character nearest to ``t``;
       * else ``c = t`` exactly, which may split a word (a "hard" cut). With
         ``window == 0`` there are no candidates and every cut is hard.

       Ties go to the earlier position. The chunk is ``[pos, c)`` minus trailing
       whitespace, so no chunk is longer than ``target + window``.
    3. The next chunk starts at the first word start (a non-whitespace character
       after a whitespace character) in ``[max(c - overlap, pos + 1), c)``, so the
       overlap never exceeds ``overlap`` and every chunk starts after the previous
       one; after a table row end it is the first start of a row of that table in the
       same region (whole rows overlap), else the next row. If that region holds no
       word start, a hard cut keeps the full overlap
       (starting mid-word, as the long token was already split) while a clean cut
       gets no overlap: the next chunk starts at the first non-whitespace character
       at or after ``c``.

    Every non-whitespace character of the input lies in at least one chunk. The work
    is linear in the input for the default settings: the cut is searched with
    ``str.find``/``str.rfind`` and bounded regular expressions inside the window,
    never by rescanning the rest of the text. A hard cut counts code points, so it may
    separate a combining mark or a joined emoji sequence from its base.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from plait.errors import ConfigError
from plait.markdown import fences, headings, tables

__all__ = [
    "ChunkSettings",
    "TextChunk",
    "chunk_markdown",
    "chunk_text",
    "split_by_size",
]

_NON_WS = re.compile(r"\S")
_NEWLINE = re.compile(r"\n")
_WS = re.compile(r"\s")
# Matched from a window's start with ``endpos`` at the ideal cut: the greedy ``.*``
# leaves ``\s`` on the last whitespace character of the range.
_LAST_WS = re.compile(r".*\s", re.DOTALL)
# A whitespace character followed by a non-whitespace one: the latter starts a word.
_WORD_START = re.compile(r"\s\S")
# The rest of a line after a "\n" when that line is blank (it may hold a "\r").
_BLANK_LINE_REST = re.compile(r"[^\S\n]*\n")


@dataclass(frozen=True, kw_only=True)
class ChunkSettings:
    """The numbers of the size rule, in characters (code points).

    ``target`` is the ideal chunk length, ``overlap`` the most characters a chunk may
    share with the previous one, and ``window`` how far from the target a cut may
    move to land on a paragraph or word break. No chunk is longer than
    ``target + window``.
    """

    target: int = 1200
    overlap: int = 150
    window: int = 200

    def __post_init__(self) -> None:
        """Reject values the size rule cannot use, naming the bad value."""
        for name in ("target", "overlap", "window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"chunk {name} must be an integer, got {value!r}")
        if self.target <= 0:
            raise ConfigError(f"chunk target must be greater than 0, got {self.target}")
        if not 0 <= self.overlap < self.target:
            raise ConfigError(
                f"chunk overlap must be at least 0 and less than target ({self.target}), "
                f"got {self.overlap}"
            )
        if self.window < 0:
            raise ConfigError(f"chunk window must be at least 0, got {self.window}")


@dataclass(frozen=True)
class TextChunk:
    """One chunk: an exact slice of the input and the headings that enclose it.

    ``text == input[start:end]``; ``heading_path`` holds the enclosing headings'
    visible titles, outermost first; ``heading_key`` the same headings' source titles
    (both empty for plain text). ``bare`` is True for a chunk that is
    a heading and nothing else. ``fence`` is the opening run of the fenced code block
    the chunk starts inside (after its opening line), else None: read on its own, the
    chunk's text would be taken for Markdown (:func:`plait.markdown.plain_text`).
    ``table`` is the header and delimiter rows of the Markdown table whose body the
    chunk starts inside, at the start of a row, else None: read on its own, the chunk's
    rows would have no column names (:func:`plait.markdown.prose_blocks`).
    """

    text: str
    start: int
    end: int
    heading_path: tuple[str, ...]
    heading_key: tuple[str, ...] = ()
    bare: bool = False
    fence: str | None = None
    table: str | None = None


_DEFAULT_SETTINGS = ChunkSettings()


def chunk_markdown(text: str, settings: ChunkSettings = _DEFAULT_SETTINGS) -> list[TextChunk]:
    """Cut Markdown by heading, then by size inside each section.

    Returns the chunks in input order; ``[]`` for empty or whitespace-only input.
    """
    sections = _sections(text)
    line_starts = _line_starts(text)
    inside = [(_offset(text, line_starts, a), _offset(text, line_starts, b), run) for a, b, run in fences(text)]
    bodies = [
        _Body(
            _offset(text, line_starts, body),
            _offset(text, line_starts, end),
            text[_offset(text, line_starts, first) : _offset(text, line_starts, body)].rstrip("\r\n"),
        )
        for first, body, end in tables(text)
    ]
    chunks: list[TextChunk] = []
    for index, section in enumerate(sections):
        stop = sections[index + 1].start if index + 1 < len(sections) else len(text)
        heading_only = not text[section.heading_end : stop].strip()
        for span_start, span_end in _split_range(text, section.start, stop, settings, bodies):
            chunks.append(
                TextChunk(
                    text=text[span_start:span_end],
                    start=span_start,
                    end=span_end,
                    heading_path=section.path,
                    heading_key=section.key,
                    bare=heading_only and section.heading_end > section.start,
                    fence=next((run for a, b, run in inside if a <= span_start < b), None),
                    table=next(
                        (
                            body.header
                            for body in bodies
                            if body.start <= span_start < body.end and text[span_start - 1] == "\n"
                        ),
                        None,
                    ),
                )
            )
    return chunks


def chunk_text(text: str, settings: ChunkSettings = _DEFAULT_SETTINGS) -> list[TextChunk]:
    """Cut plain text by size only; every chunk has ``heading_path == ()``."""
    return [
        TextChunk(text=text[start:end], start=start, end=end, heading_path=())
        for start, end in _split_range(text, 0, len(text), settings)
    ]


def split_by_size(text: str, settings: ChunkSettings) -> list[tuple[int, int]]:
    """The size rule: the ``(start, end)`` spans of ``text``'s chunks, in order.

    See the module docstring for the exact rule. Spans never start or end on
    whitespace; whitespace-only text gives ``[]``.
    """
    return _split_range(text, 0, len(text), settings)


# --- sections -------------------------------------------------------------------------


def _line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in _NEWLINE.finditer(text))]


def _offset(text: str, line_starts: list[int], line: int) -> int:
    return line_starts[line] if line < len(line_starts) else len(text)


@dataclass(frozen=True, slots=True)
class _Section:
    start: int
    heading_end: int  # where the heading's lines end (== start without a heading)
    path: tuple[str, ...]
    key: tuple[str, ...]


def _sections(text: str) -> list[_Section]:
    """Each section's offsets and heading paths, in order; the first starts at 0."""
    line_starts = _line_starts(text)

    def offset(line: int) -> int:
        return _offset(text, line_starts, line)

    sections = [_Section(0, 0, (), ())]
    open_headings: list[tuple[int, str, str]] = []
    for heading in headings(text):
        while open_headings and open_headings[-1][0] >= heading.level:
            open_headings.pop()
        open_headings.append((heading.level, heading.title, heading.source))
        section = _Section(
            start=offset(heading.line),
            heading_end=offset(heading.end_line),
            path=tuple(title for _, title, _ in open_headings),
            key=tuple(source for _, _, source in open_headings),
        )
        if section.start == 0:
            sections[0] = section
        else:
            sections.append(section)
    return sections


# --- the size rule --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Body:
    """A Markdown table's body: ``text[start:end]`` (whole lines) and its header rows."""

    start: int
    end: int
    header: str


def _split_range(
    text: str, start: int, stop: int, settings: ChunkSettings, bodies: Sequence[_Body] = ()
) -> list[tuple[int, int]]:
    """Apply the size rule to ``text[start:stop]``; spans are offsets into ``text``."""
    first = _NON_WS.search(text, start, stop)
    if first is None:
        return []
    pos = first.start()
    limit = start + len(text[start:stop].rstrip())
    spans: list[tuple[int, int]] = []
    while limit - pos > settings.target:
        cut, clean, body = _find_cut(text, pos, limit, settings, bodies)
        spans.append((pos, pos + len(text[pos:cut].rstrip())))
        if body is not None:
            pos = _next_row(text, pos, cut, body, settings.overlap, limit)
        else:
            pos = _next_start(text, pos, cut, clean, settings.overlap, limit)
    spans.append((pos, limit))
    return spans


def _find_cut(
    text: str, pos: int, limit: int, settings: ChunkSettings, bodies: Sequence[_Body] = ()
) -> tuple[int, bool, _Body | None]:
    """Where the chunk starting at ``pos`` ends, whether that is a clean break, and the
    table body whose row end it is (None: not a row end).

    Requires ``limit - pos > settings.target``, so the ideal cut lies before ``limit``.
    """
    ideal = pos + settings.target
    low = max(ideal - settings.window + 1, pos + 1)
    high = min(ideal + settings.window, limit - 1)
    if low > high:
        return ideal, False, None
    cut = _nearest_paragraph_break(text, low, high, ideal, limit)
    if cut >= 0:
        return cut, True, None
    body = next((b for b in bodies if b.start <= ideal < b.end), None)
    if body is not None:
        cut = _nearest_row_end(text, max(low, body.start), min(high, body.end - 1), ideal)
        if cut >= 0:
            return cut, True, body
    cut = _nearest_whitespace(text, low, high, ideal)
    if cut < 0:
        return ideal, False, None
    return cut, True, None


def _nearest_row_end(text: str, low: int, high: int, ideal: int) -> int:
    """The ``\\n`` in ``[low, high]`` nearest ``ideal`` (in a table body: row ends), or -1."""
    if low > high:
        return -1
    back = text.rfind("\n", low, min(ideal, high) + 1)
    forward = text.find("\n", max(ideal + 1, low), high + 1)
    return _nearest(back, forward, ideal)


def _next_row(text: str, pos: int, cut: int, body: _Body, overlap: int, limit: int) -> int:
    """Where the chunk after a cut at the row end ``cut`` starts: the first row of
    ``body`` starting in ``[cut - overlap, cut)`` after ``pos`` (whole rows overlap), else
    the first non-whitespace character after ``cut``; always ``> pos`` and ``< limit``."""
    if overlap > 0:
        row = text.find("\n", max(cut - overlap, pos + 1, body.start) - 1, cut)
        while 0 <= row < cut - 1:
            if not text[row + 1].isspace():
                return row + 1
            row = text.find("\n", row + 1, cut)
    following = _NON_WS.search(text, cut, limit)
    return following.start() if following is not None else cut


def _nearest(back: int, forward: int, ideal: int) -> int:
    """The nearer of two candidates (-1 = none) around ``ideal``; ties go back."""
    if back < 0:
        return forward
    if forward < 0 or ideal - back <= forward - ideal:
        return back
    return forward


def _is_paragraph_break(text: str, newline: int, limit: int) -> bool:
    """Whether the line after the ``\\n`` at ``newline`` is blank."""
    return _BLANK_LINE_REST.match(text, newline + 1, limit) is not None


def _nearest_paragraph_break(text: str, low: int, high: int, ideal: int, limit: int) -> int:
    """The paragraph-break ``\\n`` in ``[low, high]`` nearest ``ideal``, or -1."""
    back = text.rfind("\n", low, ideal + 1)
    while back >= 0 and not _is_paragraph_break(text, back, limit):
        back = text.rfind("\n", low, back)
    # Forward candidates only matter while they are strictly nearer than ``back``.
    forward_high = high if back < 0 else min(high, 2 * ideal - back - 1)
    forward = text.find("\n", ideal + 1, forward_high + 1)
    while forward >= 0 and not _is_paragraph_break(text, forward, limit):
        forward = text.find("\n", forward + 1, forward_high + 1)
    return _nearest(back, forward, ideal)


def _nearest_whitespace(text: str, low: int, high: int, ideal: int) -> int:
    """The whitespace character in ``[low, high]`` nearest ``ideal``, or -1."""
    match = _LAST_WS.match(text, low, ideal + 1)
    back = match.end() - 1 if match else -1
    forward_high = high if back < 0 else min(high, 2 * ideal - back - 1)
    found = _WS.search(text, ideal + 1, forward_high + 1)
    forward = found.start() if found else -1
    return _nearest(back, forward, ideal)


def _next_start(text: str, pos: int, cut: int, clean: bool, overlap: int, limit: int) -> int:
    """Where the chunk after ``[pos, cut)`` starts; always ``> pos`` and ``< limit``."""
    if overlap > 0:
        low = max(cut - overlap, pos + 1)
        if low < cut:
            # A "\s\S" match starting at ``low - 1`` or later puts a word start in
            # ``[low, cut)``; ``low - 1 >= pos >= 0``.
            word = _WORD_START.search(text, low - 1, cut)
            if word is not None:
                return word.start() + 1
            if not clean and not text[low].isspace():
                return low
    following = _NON_WS.search(text, cut, limit)
    # ``text[limit - 1]`` is not whitespace and ``cut < limit``, so this always matches;
    # ``cut`` (> pos, < limit) is only a type-checker's fallback.
    return following.start() if following is not None else cut
