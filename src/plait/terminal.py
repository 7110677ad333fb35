"""Printing corpus and user text through rich without it being read as markup.

Every string that comes from a corpus (file names, headings, chunk text) or from a
user (queries, paths) goes through :func:`safe` before rich prints it: rich markup
(``[bold]``, ``[/bold]``, ``[link](url)`` brackets) is escaped so it prints as
written, and control characters (ESC sequences, carriage returns, bells) are replaced
by ``�`` so they cannot move the cursor or recolour the terminal. Tabs and newlines
are kept.
"""

from __future__ import annotations

import re

from rich.markup import escape

__all__ = ["highlighted", "plain", "safe"]

# C0 controls except \t and \n, DEL, C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text: object) -> str:
    """``text`` as a string with control characters replaced (for markup=False output)."""
    return _CONTROL.sub("\ufffd", str(text))


def safe(text: object) -> str:
    """``text`` ready to embed in a rich markup string: controls replaced, markup escaped."""
    return escape(plain(text))


def highlighted(text: str, highlights: list[list[int]]) -> str:
    """``text`` as safe rich markup with each ``[start, end)`` of ``highlights`` in bold."""
    parts: list[str] = []
    at = 0
    for start, end in sorted(highlights):
        if start < at or end > len(text):
            continue
        parts.append(safe(text[at:start]))
        parts.append(f"[bold]{safe(text[start:end])}[/bold]")
        at = end
    parts.append(safe(text[at:]))
    return "".join(parts)
