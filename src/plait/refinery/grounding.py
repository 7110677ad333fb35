"""Whether a FAQ card's answer is backed by the chunks it cites.

A card records no such verdict: its answer can be edited by hand after it was drafted,
and its chunks re-indexed, so the check is made of the answer and the chunks as they
read *now*, each time a card answers (``ask`` with ``qaFirst``) and when an edit changes
its answer. It is the claim check ``ask`` makes of an LLM's answer
(:func:`plait.ask_grounding.ground`), for a text that cites its sources as a whole:

* every sentence of the answer holding a content word must share one with a cited
  chunk (the chunk's text with its headings, as it is indexed);
* a chunk that shares a content word with some sentence supports the answer (only those
  are cited), and the answer is grounded when at least one does and no sentence is
  left unsupported; with no chunk left to check against (every one re-indexed away) it
  is not, and the note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plait.chunk_build import index_text
from plait.refinery.extract import content_stems, sentences, text_stems
from plait.types import Origin, heading_path

__all__ = ["CardSupport", "card_support", "indexed_text"]


def indexed_text(content: str, origin: Origin) -> str:
    """A chunk's text as the check reads it: its headings, then its content."""
    return index_text(content, heading_path(origin))


@dataclass(frozen=True)
class CardSupport:
    """How a card's answer stands against its chunks: ``supporting`` the positions of the
    chunks given that share a content word with the answer, ``unsupported`` the answer's
    sentences that share none with any, ``checked`` how many of its ``total`` sentences hold a
    content word, ``chunks`` how many chunks were given (0: none of the card's is indexed)."""

    supporting: tuple[int, ...]
    unsupported: tuple[str, ...]
    checked: int
    total: int
    chunks: int

    @property
    def grounded(self) -> bool:
        return bool(self.supporting) and not self.unsupported

    @property
    def note(self) -> str | None:
        """Why the answer is not grounded in the chunks given (None when it is)."""
        if self.grounded:
            return None
        why = "the card's answer is not grounded:"
        if not self.chunks:
            return f"{why} none of its source chunks is indexed any more"
        if not self.checked:
            return f"{why} it holds no content word to check against the card's source chunks"
        if self.total == 1:
            return f"{why} it shares no content word with the card's source chunks"
        if len(self.unsupported) == self.total:
            return f"{why} none of its {self.total} sentences shares a content word with the card's source chunks"
        verb = "shares" if len(self.unsupported) == 1 else "share"
        return (
            f"{why} {len(self.unsupported)} of its {self.total} sentences {verb} no content word "
            "with the card's source chunks"
        )


def card_support(answer: str, chunks: Sequence[str]) -> CardSupport:
    """Check ``answer`` against ``chunks`` (their :func:`indexed_text`; module docstring)."""
    stems = [text_stems(text) for text in chunks]
    parts = sentences(answer) or [answer]
    supporting: set[int] = set()
    unsupported: list[str] = []
    checked = 0
    for sentence in parts:
        words = content_stems(sentence)
        if not words:
            continue
        checked += 1
        backing = {n for n, chunk in enumerate(stems) if words & chunk}
        if backing:
            supporting |= backing
        else:
            unsupported.append(sentence)
    return CardSupport(
        supporting=tuple(sorted(supporting)),
        unsupported=tuple(unsupported),
        checked=checked,
        total=len(parts),
        chunks=len(chunks),
    )
