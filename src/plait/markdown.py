"""Read Markdown as CommonMark: headings, the document title and the visible text.

Markdown is parsed with markdown-it-py (the CommonMark preset, raw HTML allowed, plus
GFM tables and YAML front matter from mdit-py-plugins); nothing here guesses at syntax
with regular expressions. Three things come out of a parse:

Headings (:func:`headings`)
    Every ATX (``# Title``) and setext (``Title`` over ``===`` or ``---``) heading at
    the top level of the document, in order: never one inside a code fence, an HTML
    block, a list item or a block quote. Each carries its level, the line it starts
    on, its *visible* title (escapes and entities resolved, emphasis markers, code
    backticks, HTML tags and link targets removed; lines of a multi-line setext title
    joined with a space) and its *source* title (the parser's raw inline text, which
    for an ATX heading is what plait used before it read CommonMark, so chunk ids stay
    the same).

The document title (:func:`document_title`)
    The ``title`` of a YAML front matter block, else the first level-1 heading, else
    None.

Visible text (:func:`plain_text`)
    What a reader sees: text and code spans without their markup, backslash escapes and
    entities resolved, link and image targets dropped (link text and image alt text
    kept, an autolink keeps its address), HTML tags and comments dropped (the text
    between them kept), code blocks verbatim, each table row on one line with its
    cells separated by `` | ``, the front matter's lines as written. Blocks are
    separated by one newline. A text nested deeper than the parser follows (100 lists or
    quotes inside each other) is its own visible text, as written, since the parser
    would drop what lies deeper. This is what the lexical arm indexes and what snippets
    show; the stored chunk keeps the raw Markdown.

The text is parsed with each ``\\r\\n`` read as ``\\n`` and a lone ``\\r`` read as a
space, so that only ``\\n`` ends a line (the chunker's rule) and line numbers match the
input's. A leading byte-order mark is read as a space.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

__all__ = [
    "MarkdownBlock",
    "MarkdownHeading",
    "document_title",
    "fences",
    "headings",
    "plain_text",
    "prose_blocks",
    "tables",
]

_TAG_OR_COMMENT = re.compile(r"<!--.*?(?:-->|$)|<[^>]*>?", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title\s*:\s*(?P<value>.*?)\s*$", re.MULTILINE)
_CELL_SEPARATOR = " | "
# A line that could be an ATX heading or a setext underline (a necessary condition).
_MAYBE_HEADING = re.compile(r"^[ \t\ufeff]*(?:#|=|-)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class MarkdownHeading:
    """One top-level heading: level 1–6, the 0-based line it starts on, its titles."""

    level: int
    line: int
    end_line: int
    title: str
    source: str


@dataclass(frozen=True, slots=True)
class MarkdownBlock:
    """A block a reader reads as prose: ``text`` (a paragraph, a list item's or a quote's
    paragraph) or ``row`` (a table body row, each cell labelled by its column header)."""

    kind: str
    text: str


_MAX_NESTING = 100


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "maxNesting": _MAX_NESTING})
    return md.use(front_matter_plugin).enable("table")


def _truncated(tokens: tuple[Token, ...]) -> bool:
    """Whether the parser reached its nesting limit (it drops what lies deeper)."""
    return any(token.level >= _MAX_NESTING - 1 for token in tokens)


def _normalised(text: str) -> str:
    """The text as parsed: same lines as the input (only ``\\n`` ends one)."""
    text = text.replace("\r\n", "\n").replace("\r", " ")
    if text.startswith("\ufeff"):
        text = " " + text[1:]
    return text


@lru_cache(maxsize=8)  # a document's title and sections come from one parse
def _tokens(text: str) -> tuple[Token, ...]:
    return tuple(_parser().parse(_normalised(text)))


def headings(text: str) -> list[MarkdownHeading]:
    """The document's top-level headings in order (see the module docstring)."""
    if _MAYBE_HEADING.search(text) is None:
        return []  # no line could start or underline a heading: skip the parse
    tokens = _tokens(text)
    found: list[MarkdownHeading] = []
    for index, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or token.map is None:
            continue
        inline = tokens[index + 1]
        found.append(
            MarkdownHeading(
                level=int(token.tag[1]),
                line=token.map[0],
                end_line=token.map[1],
                title=" ".join(_inline_text(inline).split()),
                source=inline.content,
            )
        )
    return found


def fences(text: str) -> list[tuple[int, int, str]]:
    """Each fenced code block as (first line inside it, line after its end, opening run)."""
    if "```" not in text and "~~~" not in text:
        return []
    return [
        (token.map[0] + 1, token.map[1], token.markup)
        for token in _tokens(text)
        if token.type == "fence" and token.map is not None
    ]


def tables(text: str) -> list[tuple[int, int, int]]:
    """Each top-level table with a body as (its first line, its body's first line, the line
    after it): lines ``first`` to ``body - 1`` are the header row and the delimiter row.

    >>> tables("Intro\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n| 3 | 4 |\\n\\nAfter\\n")
    [(2, 4, 6)]
    """
    if "|" not in text:
        return []
    found: list[tuple[int, int, int]] = []
    table: list[int] | None = None
    for token in _tokens(text):
        if token.type == "table_open":
            table = token.map if token.level == 0 and token.map is not None else None
        elif token.type == "tbody_open" and table is not None and token.map is not None:
            found.append((table[0], token.map[0], table[1]))
            table = None
    return found


def document_title(text: str) -> str | None:
    """The front matter's ``title``, else the first level-1 heading's visible title."""
    tokens = _tokens(text)
    if tokens and tokens[0].type == "front_matter":
        match = _FRONT_TITLE.search(tokens[0].content)
        if match:
            value = match.group("value")
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            if value.strip():
                return value.strip()
    for heading in headings(text):
        if heading.level == 1 and heading.title:
            return heading.title
    return None


def plain_text(text: str, *, fence: str | None = None) -> str:
    """The visible text of a Markdown document or fragment (see the module docstring).

    ``fence`` is the opening run (three backticks, say) of a fenced code block the fragment
    starts inside: the fragment is then read as the rest of that block.
    """
    if fence:
        text = fence + "\n" + text
    tokens = _tokens(text)
    if _truncated(tokens):
        return _normalised(text)  # nested past the parser's limit: indexed as written
    lines: list[str] = []
    row: list[str] | None = None
    for token in tokens:
        kind = token.type
        if kind == "tr_open":
            row = []
        elif kind == "tr_close":
            if row is not None and any(cell.strip() for cell in row):
                lines.append(_CELL_SEPARATOR.join(cell.strip() for cell in row))
            row = None
        elif kind == "inline":
            rendered = _inline_text(token)
            if row is not None:
                row.append(" ".join(rendered.split()))
            elif rendered.strip():
                lines.append(rendered.strip())
        elif kind in ("fence", "code_block"):
            if token.content.strip():
                lines.append(token.content.rstrip("\n"))
        elif kind == "html_block":
            stripped = _strip_tags(token.content).strip()
            if stripped:
                lines.append(stripped)
        elif kind == "front_matter" and token.content.strip():
            lines.append(token.content.strip("\n"))
    return "\n".join(lines)


def _strip_tags(raw: str) -> str:
    """HTML text without its tags and comments, entities resolved."""
    return html.unescape(_TAG_OR_COMMENT.sub(" ", raw))


def _inline_text(token: Token) -> str:
    """An inline token's visible text (text, code spans, link text, image alt text)."""
    parts: list[str] = []
    _render_children(token.children or [], parts)
    return "".join(parts)


def _render_children(children: list[Token], parts: list[str]) -> None:
    for child in children:
        kind = child.type
        if kind in ("text", "code_inline", "text_special"):
            parts.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif kind == "image":
            _render_children(child.children or [], parts)


def prose_blocks(text: str, *, table: str | None = None, fence: str | None = None) -> list[MarkdownBlock]:
    """The paragraphs and table rows of ``text``, in order, as visible text.

    Headings, code, HTML blocks and front matter are not prose and are left out; a
    table body row comes as ``header: cell; header: cell`` (empty cells dropped), so a
    row can be quoted on its own. Ask picks answer sentences from these
    (:mod:`plait.ask_extract`). ``table`` is the header and delimiter rows of the table
    a chunk starts inside (:attr:`plait.chunking.TextChunk.table`): the fragment is read
    as the rest of that table, so its rows keep their column names. ``fence`` is the
    opening run of the fenced code block a chunk starts inside
    (:attr:`plait.chunking.TextChunk.fence`): read alone, the block's closing run would
    open a fence, its code lines would be prose and the prose after it code.

    >>> [(b.kind, b.text) for b in prose_blocks("# T\\n\\nSome text.\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n")]
    [('text', 'Some text.'), ('row', 'a: 1; b: 2')]
    >>> [(b.kind, b.text) for b in prose_blocks("| 3 | 4 |\\n\\nMore.", table="| a | b |\\n|---|---|")]
    [('row', 'a: 3; b: 4'), ('text', 'More.')]
    """
    if table:
        text = table + "\n" + text
    elif fence:
        text = fence + "\n" + text
    tokens = _tokens(text)
    if _truncated(tokens):
        return [MarkdownBlock("text", _normalised(text))]
    blocks: list[MarkdownBlock] = []
    header: list[str] = []
    row: list[str] | None = None
    in_head = in_heading = False
    for token in tokens:
        kind = token.type
        if kind in ("heading_open", "heading_close"):
            in_heading = kind == "heading_open"
        elif kind in ("thead_open", "thead_close"):
            in_head = kind == "thead_open"
            if in_head:
                header = []
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close" and row is not None:
            if not in_head:
                cells = [
                    f"{label}: {cell}" if label else cell
                    for label, cell in zip([*header, *[""] * len(row)], row, strict=False)
                    if cell
                ]
                if cells:
                    blocks.append(MarkdownBlock("row", "; ".join(cells)))
            row = None
        elif kind == "inline" and not in_heading:
            rendered = " ".join(_inline_text(token).split())
            if row is not None:
                (header if in_head else row).append(rendered)
            elif rendered:
                blocks.append(MarkdownBlock("text", rendered))
    return blocks
