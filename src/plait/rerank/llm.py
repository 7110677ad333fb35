"""Listwise rerank with a chat LLM: the query and all candidates in one call.

The candidates are shown with short numeric labels (``[1]`` … ``[n]``, in fused
order) rather than their long chunk ids, each cut to ``max_chars``; the model is asked
for a JSON array of labels, most relevant first. Replies are read robustly, in this
order of preference:

1. two or more bracketed labels anywhere: ``[3] > [1] > [2]``;
2. the longest JSON array in the reply (or an object holding one under ``order``,
   ``ranking``, ``ranked``, ``ids`` or ``result``), of labels (``3``, ``"3"``,
   ``"[3]"``) or of chunk ids;
3. phrases such as ``passage 3``, ``candidate 1``;
4. a reply made only of numbers and separators: ``3, 1, 2``.

Labels are 1-based; a list that holds 0 but not ``n`` is read as 0-based. Unknown
labels and ids are ignored, repeats keep their first place, and candidates the model
left out follow the ranked ones in their fused order. When the call fails or times
out, or the reply names no candidate at all, the fused order comes back with
``reranked=False`` and the reason — never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from plait._http import excerpt
from plait.errors import ConfigError
from plait.llm.base import LLM
from plait.rerank.base import Candidate, RerankOutcome, complete_order, fused_order

__all__ = ["LLMReranker", "parse_ordering"]

_SYSTEM = (
    "You rank search results. Given a query and numbered passages, order the passages "
    "from most to least relevant to the query. Reply with only a JSON array of the "
    "passage numbers, most relevant first, for example [3, 1, 2]. Include every "
    "passage number exactly once. No explanation."
)

_BRACKET = re.compile(r"\[\s*(\d+)\s*\]")
_WORDED = re.compile(r"\b(?:passage|candidate|doc(?:ument)?|item|result)\s*#?\s*(\d+)", re.IGNORECASE)
_ONLY_NUMBERS = re.compile(r"^[\d\s,;>|/.\-()\[\]]+$")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*")
_LIST_KEYS = ("order", "ranking", "ranked", "ids", "result")
_LABEL_TEXT = re.compile(r"^\s*(?:#|\[)?\s*(\d+)\s*\]?\s*$")


def _json_list(text: str) -> list[Any] | None:
    """The longest JSON array in ``text`` (or held by an object under a known key)."""
    decoder = json.JSONDecoder()
    best: list[Any] | None = None
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            value = next(
                (value[k] for k in _LIST_KEYS if isinstance(value.get(k), list)), None
            )
        if isinstance(value, list) and value and (best is None or len(value) > len(best)):
            best = value
    return best


def _item(value: Any, ids: set[str]) -> str | int:
    """One JSON element as a chunk id (str), a label (int) or an unknown marker (str)."""
    if isinstance(value, bool):
        return f"?{value}"
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        if value in ids:
            return value
        found = _LABEL_TEXT.match(value)
        return int(found.group(1)) if found else f"?{value}"
    if isinstance(value, dict):
        for key in ("id", "index", "passage", "number"):
            if key in value:
                return _item(value[key], ids)
    return f"?{value!r}"


def parse_ordering(reply: str, ids: Sequence[str]) -> list[str] | None:
    """The ids named by ``reply``, in its order, or None when it holds no ordering.

    Unknown labels or ids come back as strings starting with ``?`` (never a real id
    of this call) so the caller can count them; repeats are kept for the same reason.
    """
    known = set(ids)
    text = _FENCE.sub(" ", _THINK.sub(" ", reply)).strip()
    items: list[str | int] | None = None
    bracketed = [int(n) for n in _BRACKET.findall(text)]
    if len(bracketed) >= 2:
        items = list(bracketed)
    if items is None:
        found = _json_list(text)
        if found is not None:
            items = [_item(v, known) for v in found]
    if items is None:
        worded = [int(n) for n in _WORDED.findall(text)]
        if worded:
            items = list(worded)
    if items is None and text and _ONLY_NUMBERS.match(text):
        numbers = [int(n) for n in re.findall(r"\d+", text)]
        if numbers:
            items = list(numbers)
    if items is None and bracketed:
        items = list(bracketed)
    if items is None:
        return None
    labels = [i for i in items if isinstance(i, int)]
    offset = 1 if (0 in labels and len(ids) not in labels) else 0
    order: list[str] = []
    for entry in items:
        if isinstance(entry, int):
            index = entry + offset - 1
            order.append(ids[index] if 0 <= index < len(ids) else f"?{entry}")
        else:
            order.append(entry)
    return order


class LLMReranker:
    """Listwise rerank through any :class:`~plait.llm.LLM` (see the module docstring).

    ``max_chars`` bounds each candidate's text in the prompt; ``max_tokens`` bounds the
    reply (default: 8 tokens per candidate plus 32).
    """

    name = "llm"

    def __init__(self, llm: LLM, *, max_chars: int = 800, max_tokens: int | None = None) -> None:
        """Wrap ``llm``; nothing is contacted until :meth:`rerank`."""
        if max_chars < 50:
            raise ConfigError(f"max_chars must be >= 50, got {max_chars!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1 or None, got {max_tokens!r}")
        self.llm = llm
        self.max_chars = max_chars
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"LLMReranker(llm={self.llm!r}, max_chars={self.max_chars})"

    def messages(self, query: str, candidates: Sequence[Candidate]) -> list[dict[str, Any]]:
        """The chat messages for one call: the query and the labelled candidates."""
        lines = [f"Query: {query}", "", "Passages:"]
        for label, (_, text) in enumerate(candidates, start=1):
            lines.append(f"[{label}] {excerpt(text, self.max_chars)}")
        lines += ["", f"Rank all {len(candidates)} passages. JSON array of passage numbers:"]
        return [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "\n".join(lines)},
        ]

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> RerankOutcome:
        """Reorder ``candidates`` with one chat call; the fused order on any failure."""
        if not candidates:
            return fused_order(candidates, "no candidates to rerank")
        if len(candidates) == 1:
            return fused_order(candidates, "one candidate: nothing to reorder")
        budget = self.max_tokens or 8 * len(candidates) + 32
        try:
            reply = self.llm.chat(self.messages(query, candidates), temperature=0.0, max_tokens=budget)
        except Exception as exc:  # noqa: BLE001 - rerank must never fail the search
            return fused_order(candidates, f"LLM rerank failed ({type(exc).__name__}): {exc}")
        ids = [cid for cid, _ in candidates]
        proposed = parse_ordering(reply, ids)
        if proposed is None:
            return fused_order(
                candidates, f"no ordering found in the LLM's reply: {excerpt(reply, 120)!r}"
            )
        order, unknown, repeated = complete_order(candidates, proposed)
        ranked = len(proposed) - unknown - repeated
        if ranked == 0:
            return fused_order(
                candidates, f"the LLM's reply named no known candidate: {excerpt(reply, 120)!r}"
            )
        notes = []
        if unknown:
            notes.append(f"ignored {unknown} unknown candidate{'s' if unknown != 1 else ''}")
        if repeated:
            notes.append(f"ignored {repeated} repeat{'s' if repeated != 1 else ''}")
        left_out = len(candidates) - ranked
        if left_out:
            notes.append(f"{left_out} left out kept their fused order after the ranked ones")
        reason = "LLM ordering repaired: " + "; ".join(notes) if notes else None
        return RerankOutcome(order=order, reranked=True, reason=reason)
