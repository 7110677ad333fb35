"""Session logs: only the conversation is indexed, event ids are kept, malformed lines
are reported with their line numbers and never stop the run."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from plait.analysis import analyse
from plait.chunking import ChunkSettings, chunk_text
from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.sources.sessions import SessionSource
from plait.types import SessionOrigin

SESSIONS = Path(__file__).resolve().parents[2] / "examples" / "sessions"
SUPPORT = SESSIONS / "support-2026-10.jsonl"

# chat.message and agent.response events of the example log, read off the file by hand
CONVERSATION = {
    "sess-7c2e91a4": ["evt-7c2e91a4-001", "evt-7c2e91a4-005", "evt-7c2e91a4-006",
                      "evt-7c2e91a4-009", "evt-7c2e91a4-010", "evt-7c2e91a4-013"],
    "sess-b41f0d6e": ["evt-b41f0d6e-001", "evt-b41f0d6e-005", "evt-b41f0d6e-008",
                      "evt-b41f0d6e-009", "evt-b41f0d6e-011", "evt-b41f0d6e-012"],
}  # fmt: skip


def _event(event_id: str, session: str, kind: str, text: str | None, title: str | None = "T") -> str:
    payload = {} if text is None else {"text": text}
    record = {"id": event_id, "sessionId": session, "type": kind, "createdAt": "2026-10-01T10:00:00Z",
              "payload": payload, "title": title}  # fmt: skip
    return json.dumps(record)


def test_example_log_keeps_only_the_conversation() -> None:
    scan = SessionSource(path=SUPPORT).scan()
    docs = list(scan)
    assert [d.source_id for d in docs] == ["sess-7c2e91a4", "sess-b41f0d6e"]
    assert {d.source_id: [p.key for p in d.parts] for d in docs} == CONVERSATION
    assert scan.skipped_by_type == {"agent.status": 4, "tool.call": 5, "tool.result": 4, "agent.error": 1}
    assert scan.skipped == [] and scan.seen == 2
    first = docs[0].parts[0]
    assert first.origin == SessionOrigin(
        session_id="sess-7c2e91a4",
        event_id="evt-7c2e91a4-001",
        title="Merchant support: ERR-4013 during checkout and a refund",
    )
    assert first.text.startswith("Hi, I'm Dara from Casa Tecelã Decor")
    assert docs[0].scope == "sessions"
    assert docs[0].metadata == {
        "sessionId": "sess-7c2e91a4", "path": "support-2026-10.jsonl", "startedAt": "2026-10-03T14:02:11Z"
    }  # fmt: skip


def test_tool_calls_statuses_and_errors_are_never_indexed(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        report = engine.index_sessions(SUPPORT)
        assert (report.sources_seen, report.sources_indexed, report.chunks_added) == (2, 2, 12)
        assert report.skipped_by_type == {"agent.status": 4, "tool.call": 5, "tool.result": 4, "agent.error": 1}
        assert report.complete is True
        chunks = engine.store.get_chunks("default", engine.store.chunk_ids("default"))
        events = {c.origin.event_id for c in chunks.values()}
        assert events == {e for ids in CONVERSATION.values() for e in ids}
        assert all(isinstance(c.origin, SessionOrigin) and c.scope == "sessions" for c in chunks.values())
        # identifiers only a tool result, an agent error or a status carries: not in the index
        for word in ("PaymentVoided", "insufficient_scope", "E12345678202610161602aBcD9xYz", "Aguardando"):
            exact = analyse(word).exact
            assert engine.store.lexical_search("default", exact, [], limit=None) == [], word
            assert all(word.lower() not in c.content.lower() for c in chunks.values()), word
        hit = engine.search("refund re_77Hq2").hits[0]
        assert hit.origin.kind == "session"
        assert (hit.origin.session_id, hit.origin.event_id) == ("sess-7c2e91a4", "evt-7c2e91a4-013")


def test_malformed_lines_are_reported_with_line_numbers(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    lines = [
        _event("e1", "s1", "chat.message", "How do I rotate keys?"),  # 1 ok
        "{not json",  # 2
        "[1, 2]",  # 3
        "",  # 4 blank: ignored
        json.dumps({"id": "e5", "type": "chat.message", "payload": {"text": "x"}}),  # 5 no sessionId
        _event("e6", "s1", "agent.response", None),  # 6 no payload.text
        _event("e1", "s1", "agent.response", "duplicate id"),  # 7
        _event("e8", "s1", "agent.response", "Use the dashboard, section Keys."),  # 8 ok
        _event("e9", "s2", "tool.call", None),  # 9 a session with no conversation
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    scan = SessionSource(path=log).scan()
    docs = list(scan)
    assert [(d.source_id, [p.key for p in d.parts]) for d in docs] == [("s1", ["e1", "e8"])]
    assert [(s.path, s.reason) for s in scan.skipped] == [
        ("mixed.jsonl:2",
         "malformed line: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ("mixed.jsonl:3", "malformed line: not a JSON object"),
        ("mixed.jsonl:5", "malformed event: missing or non-string 'sessionId'"),
        ("mixed.jsonl:6", "malformed event e6: agent.response without a string 'payload.text'"),
        ("mixed.jsonl:7", "duplicate event id 'e1' in session 's1' (first at mixed.jsonl:1); kept the first"),
        ("s2", "session has no chat.message or agent.response events with text"),
    ]
    assert scan.skipped_by_type == {"tool.call": 1}


def test_example_broken_export_line_4_is_reported(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        report = engine.index_sessions(SESSIONS / "broken-export.jsonl")
    assert [s.path for s in report.skipped] == ["broken-export.jsonl:4"]
    assert report.skipped[0].reason.startswith("malformed line: ")
    assert (report.sources_indexed, report.chunks_added, report.complete) == (1, 2, False)


def test_long_messages_are_chunked_by_the_same_rules(tmp_path: Path) -> None:
    words = " ".join(f"word{i}" for i in range(700))  # ~5,600 characters
    log = tmp_path / "long.jsonl"
    log.write_text(_event("long-1", "s-long", "agent.response", words) + "\n", encoding="utf-8")
    expected = [c.text.strip() for c in chunk_text(words, ChunkSettings())]
    assert len(expected) > 1
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        engine.index_sessions(log)
        ids = engine.store.chunk_ids("default", "s-long")
        chunks = engine.store.get_chunks("default", ids)
        assert [chunks[i].content for i in ids] == expected
        assert {chunks[i].origin.event_id for i in ids} == {"long-1"}
        assert len(set(ids)) == len(expected)


def test_a_folder_of_logs_joins_sessions_across_files(tmp_path: Path) -> None:
    (tmp_path / "logs" / "b").mkdir(parents=True)
    (tmp_path / "logs" / "a.jsonl").write_text(_event("e1", "s1", "chat.message", "first part") + "\n")
    (tmp_path / "logs" / "b" / "c.jsonl").write_text(
        _event("e2", "s1", "agent.response", "second part") + "\n" + "oops\n"
    )
    (tmp_path / "logs" / ".hidden.jsonl").write_text("ignored entirely\n")
    scan = SessionSource(path=tmp_path / "logs", scope="support").scan()
    docs = list(scan)
    assert [(d.source_id, d.scope, [p.key for p in d.parts]) for d in docs] == [("s1", "support", ["e1", "e2"])]
    assert [s.path for s in scan.skipped] == ["b/c.jsonl:2"]


def test_cli_index_sessions_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["index-sessions", str(SESSIONS), "--store", str(tmp_path / "p.db"), "--embedder", "fake", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["skippedByType"] == {"agent.status": 5, "tool.call": 6, "tool.result": 5, "agent.error": 1}
    assert (report["sourcesIndexed"], report["chunksAdded"]) == (3, 14)
    assert [s["path"] for s in report["skipped"]] == ["broken-export.jsonl:4"]


def test_a_lone_surrogate_skips_its_event_not_the_run(tmp_path: Path) -> None:
    # JSON may escape a lone surrogate ("\ud800"); UTF-8 cannot hold it: the store refused it
    # and the whole index-sessions run failed. Each such event is now reported by its line.
    log = tmp_path / "s.jsonl"
    lines = [
        _event("e1", "s1", "chat.message", "How do I rotate the webhook secret?"),  # 1 ok
        _event("e2", "s1", "chat.message", "lone surrogate \ud800 here"),  # 2 in payload.text
        _event("e3", "s\udfff", "chat.message", "a session id that cannot be stored"),  # 3 in sessionId
        _event("e4", "s1", "agent.response", "Rotate it under Settings.", title="T\ud83d"),  # 4 in title
        _event("e5", "s1", "tool.result", "tool output \ud800 is never indexed"),  # 5 not indexed: counted
        _event("e6", "s1", "agent.response", "Settings, then Webhooks, then Rotate."),  # 6 ok
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")  # json.dumps escapes them: valid UTF-8
    tail = "text must be valid Unicode (UTF-8)"
    expected_skipped = [
        ("s.jsonl:2", f"malformed line: 'payload.text' contains a lone surrogate (U+D800) at character 15: {tail}"),
        ("s.jsonl:3", f"malformed line: 'sessionId' contains a lone surrogate (U+DFFF) at character 1: {tail}"),
        ("s.jsonl:4", f"malformed line: 'title' contains a lone surrogate (U+D83D) at character 1: {tail}"),
    ]
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        report = engine.index_sessions(log)
        assert [(s.path, s.reason) for s in report.skipped] == expected_skipped
        assert report.skipped_by_type == {"tool.result": 1}
        assert (report.sources_seen, report.sources_indexed, report.chunks_added, report.complete) == (1, 1, 2, False)
        chunks = engine.store.get_chunks("default", engine.store.chunk_ids("default"))
        assert sorted(c.origin.event_id for c in chunks.values()) == ["e1", "e6"]

    result = CliRunner().invoke(
        app, ["index-sessions", str(log), "--store", str(tmp_path / "cli.db"), "--embedder", "fake", "--json"]
    )
    assert result.exit_code == 0, result.output
    cli_report = json.loads(result.stdout)
    assert [(s["path"], s["reason"]) for s in cli_report["skipped"]] == expected_skipped
    assert cli_report["chunksAdded"] == 2


def test_a_byte_order_mark_opening_a_log_is_not_part_of_its_first_event(tmp_path: Path) -> None:
    # a log written with a UTF-8 BOM (Windows tools, PowerShell's Out-File) lost its first
    # event as "malformed line: Unexpected UTF-8 BOM"; a JSONL corpus already dropped the BOM
    log = tmp_path / "bom.jsonl"
    first = _event("e1", "s1", "chat.message", "How do I rotate the webhook secret?")
    second = _event("e2", "s1", "agent.response", "Settings, then Webhooks, then Rotate.")
    log.write_bytes(b"\xef\xbb\xbf" + first.encode() + b"\r\n" + second.encode() + b"\r\n")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        report = engine.index_sessions(log)
        assert (report.skipped, report.chunks_added, report.complete) == ([], 2, True)
        hit = engine.search("rotate the webhook secret", mode="lexical").hits[0]
        assert hit.origin.kind == "session"
        assert (hit.origin.session_id, hit.origin.event_id) == ("s1", "e1")
        assert hit.content == "How do I rotate the webhook secret?"


def test_an_empty_or_blank_log_is_reported_not_passed_over(tmp_path: Path) -> None:
    """Regression (helper walk-through, stop 44): an empty or all-blank log added nothing
    and said nothing, where a folder source reports an empty file (the run incomplete)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_text(_event("e1", "s1", "chat.message", "the refund went through") + "\n")
    (logs / "empty.jsonl").write_text("")
    (logs / "blank.jsonl").write_text("\n   \n\t\n")
    scan = SessionSource(path=logs).scan()
    assert [d.source_id for d in scan] == ["s1"]
    assert [(s.path, s.reason) for s in scan.skipped] == [
        ("blank.jsonl", "no events (the log is empty or only blank lines)"),
        ("empty.jsonl", "no events (the log is empty or only blank lines)"),
    ]
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        report = engine.index_sessions(logs)
    assert report.sources_indexed == 1 and report.complete is False
    assert [s.path for s in report.skipped] == ["blank.jsonl", "empty.jsonl"]


def test_a_line_that_can_no_longer_be_read_keeps_its_session_s_indexed_version(tmp_path: Path) -> None:
    """Regression (helper walk-through, stop 44): a log line cut short (a crash mid-write)
    or made undecodable was skipped on the next reindex and the session rewritten without
    it, so that event's indexed chunk was deleted. A file that cannot be read keeps its last
    good version; a session with a line that names it but cannot be read now does too."""
    log = tmp_path / "a.jsonl"
    lines = [
        _event("e1", "s1", "chat.message", "my refund never arrived"),
        _event("e2", "s1", "agent.response", "refunds settle within five business days"),
        _event("e3", "s2", "chat.message", "the invoice shows the wrong address"),
    ]
    log.write_text("\n".join(lines) + "\n")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        engine.index_sessions(log)
        before = engine.search("refunds settle business days", k=3)
        assert before.hits[0].origin.event_id == "e2"  # type: ignore[union-attr]
        log.write_text("\n".join([lines[0], lines[1][:60], lines[2]]) + "\n")  # e2 cut short
        report = engine.reindex()
        after = engine.search("refunds settle business days", k=3)
        assert [(s.path, s.reason) for s in report.skipped] == [
            ("a.jsonl:2", report.skipped[0].reason),
            ("s1", "a line of it could not be read (a.jsonl:2); the version indexed before is kept "
                   "(fix the file and reindex)"),
        ]
        assert report.skipped[0].reason.startswith("malformed line: ")
        assert report.sources_deleted == 0 and report.complete is False
        assert after.hits[0].chunk_id == before.hits[0].chunk_id  # e2 is still searchable
        log.write_text("\n".join([lines[0], lines[1]]) + "\n")  # fixed, and s2's log gone
        fixed = engine.reindex()
        assert fixed.skipped == [] and fixed.sources_deleted == 1  # s2
    unnamed = SessionSource(path=tmp_path / "b.jsonl")
    (tmp_path / "b.jsonl").write_text(lines[0] + '\n{"id": "e9", "type"\n')  # names no session
    scan = unnamed.scan()
    assert [d.source_id for d in scan] == ["s1"] and scan.unread == set()


def test_a_line_never_indexed_that_cannot_be_read_holds_nothing_back(tmp_path: Path) -> None:
    """A session whose unreadable line held no indexed event is written from its readable
    lines (a permanently bad line must not freeze the session): only a write that would
    delete an indexed chunk is held back."""
    log = tmp_path / "a.jsonl"
    good = _event("e1", "s1", "chat.message", "my refund never arrived")
    bad = '{"id": "e2", "sessionId": "s1", "type": "chat.mess'  # cut short from the start
    log.write_text(f"{good}\n{bad}\n")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        first = engine.index_sessions(log)
        assert first.sources_indexed == 1 and [s.path for s in first.skipped] == ["a.jsonl:2"]
        added = _event("e3", "s1", "agent.response", "refunds settle within five business days")
        log.write_text(f"{good}\n{bad}\n{added}\n")
        again = engine.reindex()
        assert [s.path for s in again.skipped] == ["a.jsonl:2"] and again.chunks_added == 1  # e3 indexed
        hit = engine.search("refunds settle business days", k=1).hits[0]
        assert hit.origin.event_id == "e3"  # type: ignore[union-attr]
