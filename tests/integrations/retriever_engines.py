"""The three engines a retriever takes, over the hand-ranked store of ``hand_ranked``:
an embedded Plait, a Client and an AsyncClient talking to a real uvicorn on 127.0.0.1.
A session log is indexed into collection 's' for the session branch of the metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hand_ranked import make_engine, serve
from plait.client import AsyncClient, Client

__all__ = ["ENGINES", "SESSION_TEXT", "open_engine"]

ENGINES = ["embedded", "client", "async-client"]
SESSION_TEXT = "Checkout failed with ERR-4013 after the cart was saved."


@contextmanager
def open_engine(kind: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """(the engine to give the retriever, the embedded Plait behind it)."""
    log = tmp_path / "sessions" / "s.jsonl"
    log.parent.mkdir()
    event = {"id": "evt-1", "sessionId": "sess-1", "type": "chat.message", "payload": {"text": SESSION_TEXT}}
    tool = {"id": "evt-2", "sessionId": "sess-1", "type": "tool.call", "payload": {"text": "ERR-4013 tool"}}
    log.write_text(json.dumps(event) + "\n" + json.dumps(tool) + "\n", encoding="utf-8")
    with make_engine(tmp_path) as plait:
        plait.index_sessions(log, collection="s")
        if kind == "embedded":
            yield plait, plait
            return
        with serve(plait, tmp_path) as (url, token):
            if kind == "client":
                with Client(url, api_key=token) as client:
                    yield client, plait
            else:
                yield AsyncClient(url, api_key=token), plait
