"""Usage metering: what the embedding and LLM providers were asked for, per collection.

A provider call reports a :class:`UsageEvent` with :func:`report` — the HTTP embedders
(Ollama, OpenAI-compatible) and chat LLMs do, with the token counts the provider's answer
carries (``usage.prompt_tokens`` / ``completion_tokens``, Ollama's ``prompt_eval_count`` /
``eval_count``). When the answer has none, the count is estimated (characters / 4, at
least 1 per text) and the row says ``estimated``. Events go to the innermost
:func:`metering` scope of the current thread (a context variable); outside any scope they
are dropped. The service opens a scope per operation (index, search, ask, rerank,
refinery run) and writes its rows to the store (``Store.add_usage``), one row per
(hour bucket, kind, purpose, provider, model, estimated) with the counts summed.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from plait.errors import ValidationError
from plait.types import Model

__all__ = [
    "USAGE_COLUMNS",
    "USAGE_COUNTS",
    "Kind",
    "Purpose",
    "UsageEvent",
    "UsageReport",
    "UsageRow",
    "bucket_of",
    "embedding_tokens",
    "estimate_tokens",
    "llm_tokens",
    "metering",
    "report",
    "rows_of",
    "since_bucket",
    "usage_counts",
    "usage_key",
    "usage_report",
    "usage_row",
]

Kind = Literal["embedding", "llm"]
Purpose = Literal["index", "query", "rerank", "ask", "refinery"]


@dataclass(frozen=True)
class UsageEvent:
    """One provider call: ``input_tokens`` (prompt) and ``output_tokens`` (completion, LLMs)."""

    kind: Kind
    provider: str
    model: str
    texts: int
    characters: int
    input_tokens: int
    output_tokens: int = 0
    estimated: bool = False


class UsageRow(Model):
    """Summed usage of one (hour bucket, kind, purpose, provider, model, estimated)."""

    bucket: str
    """The hour the calls fell in, ISO 8601 UTC (``2026-12-01T13:00:00Z``)."""
    kind: Kind
    purpose: Purpose
    provider: str
    model: str
    estimated: bool = False
    """True when the provider returned no token count and the tokens are estimated."""
    calls: int = 0
    texts: int = 0
    characters: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class UsageReport(Model):
    """``plait usage`` / ``GET /v1/collections/{c}/usage``: the rows and their totals."""

    collection: str
    since: str | None = None
    rows: list[UsageRow]
    totals: list[UsageRow]
    """Per (kind, purpose, provider, model, estimated), over every bucket (``bucket`` is the first)."""


def estimate_tokens(texts: Sequence[str]) -> int:
    """A token estimate when the provider gives none: characters / 4, at least 1 per text.

    >>> estimate_tokens(["abcdefgh", "a"])
    3
    """
    return sum(max(1, math.ceil(len(t) / 4)) for t in texts)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def embedding_tokens(answer: Any) -> int | None:
    """The prompt tokens an embedding answer reports (OpenAI ``usage``, Ollama
    ``prompt_eval_count``); None when it reports none."""
    if not isinstance(answer, Mapping):
        return None
    usage = answer.get("usage")
    if isinstance(usage, Mapping):
        found = _count(usage.get("prompt_tokens"))
        return found if found is not None else _count(usage.get("total_tokens"))
    return _count(answer.get("prompt_eval_count"))


def llm_tokens(answer: Any) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens a chat answer reports; None where it reports none."""
    if not isinstance(answer, Mapping):
        return None, None
    usage = answer.get("usage")
    if isinstance(usage, Mapping):
        return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    return _count(answer.get("prompt_eval_count")), _count(answer.get("eval_count"))


Metered = list[tuple[Purpose, UsageEvent]]
_SCOPE: contextvars.ContextVar[tuple[Metered, Purpose] | None] = contextvars.ContextVar("plait_usage", default=None)


def report(event: UsageEvent) -> None:
    """Add ``event`` to the current :func:`metering` scope under its purpose (dropped outside one)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope[0].append((scope[1], event))


@contextmanager
def metering(purpose: Purpose, *, detached: bool = False) -> Iterator[tuple[Metered, bool]]:
    """Collect the events reported inside the block as ``purpose``; yields (the events,
    whether this is the outermost scope). A nested scope adds to the outer one's list
    under its own purpose (a rerank inside a search), so only the outermost writes;
    ``detached`` starts a list of its own (a backfill batch writes its usage with its
    vectors, whoever called it)."""
    outer = None if detached else _SCOPE.get()
    events: Metered = outer[0] if outer is not None else []
    token = _SCOPE.set((events, purpose))
    try:
        yield events, outer is None
    finally:
        _SCOPE.reset(token)


def bucket_of(moment: datetime | None = None) -> str:
    """The hour bucket of ``moment`` (default now), ISO 8601 UTC."""
    at = (moment or datetime.now(UTC)).astimezone(UTC)
    return at.replace(minute=0, second=0, microsecond=0).strftime("%Y-%m-%dT%H:00:00Z")


def since_bucket(since: str | None, *, now: datetime | None = None) -> str | None:
    """``since`` as the first hour bucket to report: an ISO date or time (UTC when it names
    no zone), or ``Nh`` / ``Nd`` back from now; None: everything.

    >>> since_bucket("2026-12-01")
    '2026-12-01T00:00:00Z'
    >>> since_bucket("36h", now=datetime(2026, 12, 2, 13, 30, tzinfo=UTC))
    '2026-12-01T01:00:00Z'
    """
    if since is None or not since.strip():
        return None
    text = since.strip()
    unit = text[-1:].lower()
    if unit in ("h", "d") and text[:-1].isdigit():
        hours = int(text[:-1]) * (24 if unit == "d" else 1)
        return bucket_of((now or datetime.now(UTC)) - timedelta(hours=hours))
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(
            f"since {since!r} is not an ISO date or time (2026-12-01, 2026-12-01T13:00Z) or Nh / Nd"
        ) from None
    return bucket_of(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def rows_of(events: Sequence[tuple[Purpose, UsageEvent]], *, bucket: str | None = None) -> list[UsageRow]:
    """``events`` summed per (purpose, kind, provider, model, estimated), in ``bucket`` (default: now)."""
    at = bucket or bucket_of()
    sums: dict[tuple[Purpose, Kind, str, str, bool], dict[str, int]] = {}
    for purpose, e in events:
        s = sums.setdefault((purpose, e.kind, e.provider, e.model, e.estimated), dict.fromkeys(
            ("calls", "texts", "characters", "input_tokens", "output_tokens"), 0
        ))
        s["calls"] += 1
        s["texts"] += e.texts
        s["characters"] += e.characters
        s["input_tokens"] += e.input_tokens
        s["output_tokens"] += e.output_tokens
    return [
        UsageRow(
            bucket=at, kind=kind, purpose=purpose, provider=provider, model=model, estimated=est,
            calls=s["calls"], texts=s["texts"], characters=s["characters"],
            input_tokens=s["input_tokens"], output_tokens=s["output_tokens"],
        )
        for (purpose, kind, provider, model, est), s in sums.items()
    ]


def usage_report(collection: str, rows: Sequence[UsageRow], since: str | None = None) -> UsageReport:
    """The report of ``rows`` (as the store returns them) with per-key totals."""
    ordered = sorted(rows, key=lambda r: (r.bucket, r.kind, r.purpose, r.provider, r.model, r.estimated))
    totals: dict[tuple[str, str, str, str, bool], UsageRow] = {}
    for row in ordered:
        key = (row.kind, row.purpose, row.provider, row.model, row.estimated)
        seen = totals.get(key)
        totals[key] = row if seen is None else seen.model_copy(
            update={
                name: getattr(seen, name) + getattr(row, name)
                for name in ("calls", "texts", "characters", "input_tokens", "output_tokens")
            }
        )
    return UsageReport(collection=collection, since=since, rows=list(ordered), totals=list(totals.values()))


#: The counters of a row, in the order the stores keep them.
USAGE_COUNTS = ("calls", "texts", "characters", "input_tokens", "output_tokens")
_KEY = ("bucket", "kind", "purpose", "provider", "model", "estimated")
#: The columns of a store's usage table, key then counters.
USAGE_COLUMNS = ", ".join((*_KEY, *USAGE_COUNTS))


def usage_key(row: UsageRow) -> tuple[str, str, str, str, str, bool]:
    """(bucket, kind, purpose, provider, model, estimated): what a stored row is summed by."""
    return row.bucket, row.kind, row.purpose, row.provider, row.model, row.estimated


def usage_counts(row: UsageRow) -> tuple[int, int, int, int, int]:
    return row.calls, row.texts, row.characters, row.input_tokens, row.output_tokens


def usage_row(values: Sequence[Any]) -> UsageRow:
    """A row read back as ``SELECT USAGE_COLUMNS``."""
    data = dict(zip((*_KEY, *USAGE_COUNTS), values, strict=True))
    data["estimated"] = bool(data["estimated"])
    return UsageRow.model_validate(data)
