"""LLM-drafted FAQ cards: the model reads a group of numbered chunks and writes cards.

The prompt asks for a JSON array ``[{"question", "answer", "sources": [n, …]}]``
where ``n`` numbers the excerpts given. The reply is read leniently (the first JSON
array in it, code fences allowed); source numbers that were not given are dropped,
and a card left with no valid source is dropped too — a card must cite what it
distils. A reply with no readable array yields ``None`` (the run counts the group as
skipped); a provider failure propagates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from plait.chunk_build import index_text
from plait.llm import LLM
from plait.refinery.extract import MAX_QUESTION_CHARS, Extracted, trim
from plait.types import Chunk, FileOrigin, heading_path

__all__ = ["MAX_CARDS_PER_GROUP", "card_messages", "draft_cards", "parse_cards"]

#: The most cards asked for per group of chunks.
MAX_CARDS_PER_GROUP = 3
_EXCERPT_CHARS = 1800

_SYSTEM = (
    "You distil FAQ cards from documentation excerpts. A card is a question a user "
    "would actually ask and a short, self-contained answer (at most 3 sentences) that "
    "the excerpts state explicitly. Never add facts that are not in the excerpts. "
    "Write each card in the language of the excerpt it comes from. Reply with only a "
    'JSON array: [{"question": "...", "answer": "...", "sources": [1]}], where sources '
    "lists the numbers of the excerpts the answer comes from. Reply [] when the "
    "excerpts answer no useful question."
)


def _label(chunk: Chunk) -> str:
    origin = chunk.origin
    if isinstance(origin, FileOrigin):
        return " › ".join([origin.source_path, *origin.heading_path])
    return f"session {origin.session_id}"


def card_messages(chunks: Sequence[Chunk], *, max_cards: int = MAX_CARDS_PER_GROUP) -> list[dict[str, Any]]:
    """The chat messages asking for at most ``max_cards`` cards from ``chunks``."""
    parts = []
    for n, chunk in enumerate(chunks, start=1):
        text = index_text(chunk.content, heading_path(chunk.origin))[:_EXCERPT_CHARS]
        parts.append(f"[{n}] ({_label(chunk)})\n{text}")
    user = (
        "Excerpts:\n\n" + "\n\n".join(parts)
        + f"\n\nWrite at most {max_cards} FAQ cards as a JSON array."
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def _first_array(reply: str) -> Any:
    text = re.sub(r"```(?:json)?", "", reply)
    start = text.find("[")
    while start != -1:
        depth = 0
        for end in range(start, len(text)):
            if text[end] == "[":
                depth += 1
            elif text[end] == "]":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(text[start : end + 1])
                    except ValueError:
                        break
        start = text.find("[", start + 1)
    return None


def parse_cards(reply: str, chunks: Sequence[Chunk]) -> list[Extracted] | None:
    """Cards from an LLM reply; None when the reply holds no JSON array of cards."""
    data = _first_array(reply)
    if not isinstance(data, list):
        return None
    cards: list[Extracted] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        question = " ".join(str(item.get("question") or "").split())
        answer = trim(str(item.get("answer") or ""))
        raw_sources = item.get("sources")
        if not isinstance(raw_sources, list):
            raw_sources = [raw_sources]
        numbers = []
        for value in raw_sources:
            if isinstance(value, bool):
                continue
            try:
                n = int(value)
            except (TypeError, ValueError):
                continue
            if 1 <= n <= len(chunks) and n not in numbers:
                numbers.append(n)
        if not question or not answer or not numbers or len(question) > MAX_QUESTION_CHARS:
            continue
        ids = tuple(chunks[n - 1].id for n in numbers)
        cards.append(Extracted(question=question, answer=answer, chunk_ids=ids))
    return cards


def draft_cards(
    llm: LLM, chunks: Sequence[Chunk], *, max_cards: int = MAX_CARDS_PER_GROUP
) -> list[Extracted] | None:
    """Ask ``llm`` for cards over ``chunks`` (one chat call); see :func:`parse_cards`."""
    reply = llm.chat(card_messages(chunks, max_cards=max_cards), temperature=0.0, max_tokens=1200)
    return parse_cards(reply, chunks)
