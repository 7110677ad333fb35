"""Chat / agent session event logs (JSONL): only the conversation is knowledge.

One event per line::

    {"id": "evt-1", "sessionId": "sess-1", "type": "chat.message",
     "createdAt": "2026-10-03T14:02:11Z", "payload": {"text": "…"}, "title": "…"}

``id``, ``sessionId``, ``type`` and, for indexed types, a string ``payload.text`` are
required; ``createdAt`` and ``title`` are optional. Only ``chat.message`` and
``agent.response`` events are indexed; every other type (``tool.call``,
``tool.result``, ``agent.status``, ``agent.error``, …) is mechanism, not knowledge,
and is counted in :attr:`Scan.skipped_by_type`.

Every session is one document (source id = ``sessionId``) whose parts are its indexed
events, in log order, keyed by event id; long messages are cut by the same size rules
as any text, and each chunk's origin is ``{kind: "session", sessionId, eventId,
title}``. A session may span several files of a folder. Malformed lines (not JSON,
not an object, a missing field, a repeated event id, a kept field holding a lone
surrogate) are reported with their file and line number and never stop the run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plait._text import check_texts
from plait.errors import SourceError, ValidationError
from plait.sources.base import Scan, SourceDocument, SourcePart
from plait.types import SessionOrigin, SkippedSource

__all__ = ["DEFAULT_SESSION_SCOPE", "EMPTY_LOG_REASON", "INDEXED_EVENT_TYPES", "SessionSource"]

INDEXED_EVENT_TYPES: frozenset[str] = frozenset({"chat.message", "agent.response"})
DEFAULT_SESSION_SCOPE = "sessions"


def _invalid_text(event: dict[str, Any]) -> str | None:
    """Why a field the index would keep cannot be stored (a lone surrogate such as
    ``"\\ud800"``, which JSON allows and UTF-8 cannot hold), else None. The text and
    time of an event that is not indexed are never stored, so they are not checked."""
    payload = event.get("payload")
    fields = {
        "'id'": event.get("id"),
        "'sessionId'": event.get("sessionId"),
        "'type'": event.get("type"),
        "'title'": event.get("title"),  # any event's may become the session's
    }
    if event.get("type") in INDEXED_EVENT_TYPES:
        fields["'createdAt'"] = event.get("createdAt")
        fields["'payload.text'"] = payload.get("text") if isinstance(payload, dict) else None
    for name, value in fields.items():
        if isinstance(value, str):
            try:
                check_texts(value, name)
            except ValidationError as exc:
                return str(exc)
    return None


_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"((?:[^"\\]|\\.){1,512})"')


def _named_session(raw: bytes) -> str | None:
    """The ``sessionId`` a line that cannot be parsed still names (a line cut short by a
    crash mid-write keeps its opening fields), else None."""
    match = _SESSION_ID.search(raw)
    if match is None:
        return None
    try:
        value = json.loads(b'"' + match.group(1) + b'"')
    except ValueError:  # an escape that is not JSON, or bytes that are not UTF-8
        return None
    return _storable(value)


def _storable(value: object) -> str | None:
    """``value`` when it can be a session id the index holds, else None (not a string,
    blank, or a lone surrogate such as ``"\\ud800"``, which UTF-8 cannot store)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


@dataclass
class _Session:
    session_id: str
    path: str
    title: str | None = None
    started_at: str | None = None
    parts: list[SourcePart] = field(default_factory=list)
    event_lines: dict[str, str] = field(default_factory=dict)  # event id → "file:line"


#: Why a log file with no event at all (empty, or only blank lines) is reported.
EMPTY_LOG_REASON = "no events (the log is empty or only blank lines)"


@dataclass(frozen=True, kw_only=True)
class SessionSource:
    """A ``.jsonl`` event log, or a folder of them (read recursively, hidden ones ignored)."""

    path: Path
    scope: str = DEFAULT_SESSION_SCOPE

    def files(self) -> list[tuple[Path, str]]:
        """(file, name used in reports) for every log, in a stable order."""
        if self.path.is_file():
            return [(self.path, self.path.name)]
        if not self.path.is_dir():
            raise SourceError(f"{self.path} is neither a .jsonl file nor a folder of them")
        found = []
        for file in sorted(self.path.rglob("*.jsonl")):
            relative = file.relative_to(self.path)
            if any(part.startswith(".") for part in relative.parts) or not file.is_file():
                continue
            found.append((file, relative.as_posix()))
        return found

    def scan(self) -> Scan:
        files = self.files()
        scan = Scan(documents=[])
        scan.documents = self._documents(files, scan)
        return scan

    def _documents(self, files: list[tuple[Path, str]], scan: Scan) -> Iterator[SourceDocument]:
        sessions: dict[str, _Session] = {}
        held: dict[str, str] = {}  # session id → the first line of it that could not be read
        for file, name in files:
            try:
                handle = file.open("rb")
            except OSError as exc:
                scan.skipped.append(SkippedSource(path=name, reason=f"unreadable: {exc.strerror or exc}"))
                continue
            blank = True
            with handle:
                for number, raw in enumerate(handle, start=1):
                    if raw.strip():
                        blank = False
                        self._line(raw, f"{name}:{number}", name, sessions, scan, held, first=number == 1)
            if blank:  # said, as a folder source says an empty file, not passed over in silence
                scan.skipped.append(SkippedSource(path=name, reason=EMPTY_LOG_REASON))
        for session_id, where in held.items():
            if session_id not in sessions:  # no line of it could be read: seen all the same
                sessions[session_id] = _Session(session_id=session_id, path=where.rpartition(":")[0])
        for session in sessions.values():
            scan.seen += 1
            if session.session_id in held:
                # Scan.unread: a version the index holds stays as it is (the indexer keeps it);
                # a session not indexed yet is indexed from its lines that could be read
                scan.unread.add(session.session_id)
                scan.skipped.append(
                    SkippedSource(path=session.session_id, reason=f"a line of it could not be read ({held[session.session_id]})")
                )
            if not session.parts:
                scan.skipped.append(
                    SkippedSource(
                        path=session.session_id,
                        reason="session has no chat.message or agent.response events with text",
                    )
                )
                continue
            metadata: dict[str, Any] = {"sessionId": session.session_id, "path": session.path}
            if session.started_at:
                metadata["startedAt"] = session.started_at
            yield SourceDocument(
                source_id=session.session_id,
                scope=self.scope,
                parts=tuple(session.parts),
                metadata=metadata,
            )

    def _line(
        self,
        raw: bytes,
        where: str,
        name: str,
        sessions: dict[str, _Session],
        scan: Scan,
        held: dict[str, str],
        *,
        first: bool,
    ) -> None:
        def bad(reason: str) -> None:
            scan.skipped.append(SkippedSource(path=where, reason=reason))

        def unreadable(reason: str, session_id: str | None) -> None:
            """A line that cannot be read: its session (when the line names one) keeps the
            version indexed before, as a file that cannot be read does."""
            bad(reason)
            if session_id:
                held.setdefault(session_id, where)

        try:
            # a byte-order mark opening a file is not part of its first event
            event = json.loads(raw.decode("utf-8-sig" if first else "utf-8"))
        except UnicodeDecodeError as exc:
            return unreadable(f"malformed line: not valid UTF-8 (byte {exc.start})", _named_session(raw))
        except json.JSONDecodeError as exc:
            return unreadable(f"malformed line: {exc}", _named_session(raw))
        except RecursionError:
            return unreadable("malformed line: JSON nested too deeply", _named_session(raw))
        if not isinstance(event, dict):
            return bad("malformed line: not a JSON object")
        missing = [k for k in ("id", "sessionId", "type") if not isinstance(event.get(k), str) or not event[k]]
        if missing:
            return bad(f"malformed event: missing or non-string {', '.join(repr(m) for m in missing)}")
        invalid = _invalid_text(event)
        if invalid is not None:
            return unreadable(f"malformed line: {invalid}", _storable(event["sessionId"]))
        event_type, session_id, event_id = event["type"], event["sessionId"], event["id"]
        session = sessions.get(session_id)
        if session is None:
            session = sessions[session_id] = _Session(session_id=session_id, path=name)
        title = event.get("title") if isinstance(event.get("title"), str) else None
        session.title = session.title or title
        if event_type not in INDEXED_EVENT_TYPES:
            scan.skipped_by_type[event_type] = scan.skipped_by_type.get(event_type, 0) + 1
            return None
        payload = event.get("payload")
        text = payload.get("text") if isinstance(payload, dict) else None
        if not isinstance(text, str):
            return bad(f"malformed event {event_id}: {event_type} without a string 'payload.text'")
        if not text.strip():
            return bad(f"event {event_id}: empty text")
        if event_id in session.event_lines:
            return bad(
                f"duplicate event id {event_id!r} in session {session_id!r} "
                f"(first at {session.event_lines[event_id]}); kept the first"
            )
        session.event_lines[event_id] = where
        created = event.get("createdAt")
        if session.started_at is None and isinstance(created, str):
            session.started_at = created
        origin = SessionOrigin(
            session_id=session_id, event_id=event_id, title=title or session.title
        )
        session.parts.append(SourcePart(text=text, origin=origin, markdown=False, key=event_id))
        return None
