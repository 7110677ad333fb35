"""Issue 23 D6: a lone surrogate ("\\ud800") in any string field is a clear error —
422 over HTTP (the keep-alive connection survives), one line from the CLI, a
plait.errors.ValidationError from Python — never a 500 or a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.errors import ValidationError
from plait.service import Plait

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from http_served import ARTICLE_DOCS, Served, documents, serve_engine

SRC = Path(__file__).resolve().parents[2] / "src"
LONE = "\ud800"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_engine(tmp_path_factory.mktemp("surrogates")) as s:
        yield s


CASES = [
    ("POST", "a/search", {"query": f"release {LONE}"}, "query"),
    ("POST", "a/search", {"query": "release", "scopes": [LONE]}, "scopes[0]"),
    ("POST", "a/search", {"query": "release", "metadata": {"docId": LONE}}, "metadata.docId"),
    ("POST", "a/explain", {"query": "release", "doc": LONE}, "doc"),
    ("POST", "a/explain", {"query": LONE, "chunk": "c-1"}, "query"),
    ("POST", "a/ask", {"question": f"How {LONE}?"}, "question"),
    ("PATCH", "a/faq/card-1", {"answer": LONE}, None),
]


@pytest.mark.parametrize(("method", "route", "body", "field"), CASES, ids=[f"{m} {r} {f}" for m, r, _, f in CASES])
def test_a_lone_surrogate_is_a_422_and_the_connection_survives(
    served: Served, method: str, route: str, body: dict[str, object], field: str | None
) -> None:
    headers = {"Authorization": f"Bearer {served.tokens['admin_all']}"}
    with httpx.Client(base_url=f"{served.url}/v1/collections/", headers=headers, timeout=30) as client:
        content = json.dumps(body).encode("ascii")  # the surrogate travels as the escape "\ud800"
        response = client.request(method, route, content=content, headers={"Content-Type": "application/json"})
        assert response.status_code in (404, 422), response.text
        if response.status_code == 422:
            message = response.json()["error"]
            assert "lone surrogate (U+D800)" in message
            if field is not None:
                assert field in message
        else:  # the card does not exist: a clean 404 before any text is used
            assert response.json() == {"error": "FAQ card 'card-1' does not exist in collection 'a'"}
        assert response.headers.get("connection") != "close"
        after = client.post("a/search", json={"query": "release"})
        assert after.status_code == 200
    assert served.engine.search("release", collection="a").hits  # the store is intact


def test_python_callers_get_a_validation_error(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        calls = [
            (lambda: engine.search(LONE), "query contains a lone surrogate (U+D800) at character 0"),
            (lambda: engine.search("x", scopes=["ok", LONE]), "scopes[1] contains"),
            (lambda: engine.search("x", collection=LONE), "collection contains"),
            (lambda: engine.explain("x", doc=f"ab{LONE}"), "doc contains a lone surrogate (U+D800) at character 2"),
            (lambda: engine.ask(f"why {LONE}"), "question contains"),
            (lambda: engine.coverage(collection=LONE), "collection contains"),
            (lambda: engine.delete_collection(LONE), "name contains"),
            (lambda: engine.index_documents(documents({"z": f"bad {LONE} text"})), "a text contains"),
        ]
        for call, expected in calls:
            with pytest.raises(ValidationError, match=re.escape(expected)):
                call()
        assert len(engine.search("ERR-4012").hits) > 0


def test_the_cli_turns_invalid_utf8_argv_into_one_line(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
    done = subprocess.run(
        [sys.executable, "-c", "from plait.cli import main; main()", "search", os.fsencode("caf\udce9"),
         "--store", store, "--embedder", "fake"],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "COLUMNS": "300"},
        capture_output=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0]
    # the byte the user typed, not only Python's escape for it (U+DCE9 alone read as a character they passed)
    assert lines[0] == (
        "error: query contains the byte 0xE9, which is not valid UTF-8 (or a lone surrogate U+DCE9), "
        "at character 3: text must be valid Unicode (UTF-8)"
    )


def test_a_file_name_that_is_not_utf8_is_skipped_not_fatal(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nGOOD-1", encoding="utf-8")
    (root / os.fsdecode(b"caf\xe9.md")).write_text("# Cafe\n\nCAFE-1", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(root)
        assert [(s.path, s.reason) for s in report.skipped] == [("caf\\xe9.md", "file name is not valid UTF-8")]
        assert [s.source_id for s in engine.store.list_sources("default")] == ["good.md"]
        json.dumps(report.model_dump(by_alias=True), ensure_ascii=False).encode("utf-8")  # printable
