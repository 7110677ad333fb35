"""The web page's debug views over HTTP (a real uvicorn server on 127.0.0.1, auth on):
the three lists of one search, the sources for completion, one chunk rendered and
sanitised, the favicon."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
pytest.importorskip("nh3", reason="needs the server extra: pip install 'plait[server]'")

import httpx

from plait.api.http import create_app
from plait.api.keys import KeyStore
from plait.cockpit import render_html
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread
from plait.testing.corpus import documents

XSS = (
    "# Hostile\n\nUse <script>alert('x')</script> **bold** <img src=x onerror=alert(1)> and "
    "[a link](javascript:alert(2)) and <a href=\"https://example.org\" onclick=\"alert(3)\">out</a> "
    "<a href=\"javascript:alert(4)\">raw</a>.\n"
)
FILES = {
    "guide.md": "# Guide\n\n## Setup\n\nRun the ERR-4012 fix before deploying.\n",
    "adr/0001-hostile.md": XSS,
    "notes.txt": "plain <b>text</b> & more\n",
    "other.md": "# Other\n\nNothing about errors here, only rollback steps.\n",
}
FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"


@dataclass
class Server:
    url: str
    engine: Plait
    reader: dict[str, str]
    maintainer: dict[str, str]

    def get(self, path: str, *, as_: str = "reader") -> httpx.Response:
        headers = self.reader if as_ == "reader" else self.maintainer
        return httpx.get(self.url + path, headers=headers, timeout=30)

    def post(self, path: str, body: dict[str, object], *, as_: str = "reader") -> httpx.Response:
        headers = self.reader if as_ == "reader" else self.maintainer
        return httpx.post(self.url + path, json=body, headers=headers, timeout=30)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "docs"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=32)) as engine:
        engine.index(root, collection="f")
        engine.index_documents([], collection="empty")
        keys = KeyStore(tmp_path / "keys.db")
        reader = keys.create(role="reader", collection="f")[1]
        maintainer = keys.create(role="maintainer", collection="f")[1]
        try:
            with UvicornThread(create_app(engine, auth=True, keys=keys)) as running:
                yield Server(
                    url=running.url,
                    engine=engine,
                    reader={"Authorization": "Bearer " + reader},
                    maintainer={"Authorization": "Bearer " + maintainer},
                )
        finally:
            keys.close()


def _chunk_of(server: Server, source: str) -> str:
    (chunk_id,) = server.engine.store.chunk_ids("f", source)
    return chunk_id


def test_arm_lists_match_the_search_they_come_from(server: Server) -> None:
    body = {"query": "ERR-4012", "k": 2}
    arms = server.post("/v1/collections/f/arms?limit=3", body)
    assert arms.status_code == 200, arms.text
    data = arms.json()
    guide = _chunk_of(server, "guide.md")
    # Only guide.md holds the identifier: one lexical candidate, at rank 1.
    assert data["lexicalCandidates"] == 1
    assert [(e["chunkId"], e["rank"], e["lexicalRank"]) for e in data["lexical"]] == [(guide, 1, 1)]
    # Every one of the four chunks has a vector: the dense arm ranks all four, 3 shown.
    assert data["denseCandidates"] == 4
    assert [e["rank"] for e in data["dense"]] == [1, 2, 3]
    assert data["limit"] == 3 and data["depth"] == 50 and data["k"] == 2
    assert data["vectorAvailable"] is True
    # Each entry's ranks in the other lists agree with those lists and with the search.
    dense_ranks = {e["chunkId"]: e["rank"] for e in data["dense"]}
    for entry in data["fused"]:
        if entry["chunkId"] in dense_ranks:
            assert entry["denseRank"] == dense_ranks[entry["chunkId"]]
    hits = server.post("/v1/collections/f/search", body).json()["hits"]
    assert [(h["chunkId"], h["ranks"]["fused"]) for h in hits] == [
        (e["chunkId"], e["fusedRank"]) for e in data["fused"][:2]
    ]
    assert [e["returned"] for e in data["fused"]] == [True, True, False]
    assert data["lexical"][0]["origin"] == {
        "kind": "file", "sourcePath": "guide.md", "headingPath": ["Guide", "Setup"], "title": "Guide",
    }


def test_arm_lists_validate_the_limit_and_the_collection(server: Server) -> None:
    bad = server.post("/v1/collections/f/arms?limit=0", {"query": "x"})
    assert bad.status_code == 422
    assert "limit" in bad.json()["error"]
    assert server.post("/v1/collections/f/arms?limit=201", {"query": "x"}).status_code == 422
    # a collection the key does not cover looks exactly like one that does not exist
    hidden = server.post("/v1/collections/empty/arms", {"query": "x"})
    missing = server.post("/v1/collections/nope/arms", {"query": "x"})
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"].replace("empty", "nope") == missing.json()["error"]


def test_sources_for_completion(server: Server) -> None:
    listed = server.get("/v1/collections/f/sources").json()
    assert [(s["sourceId"], s["kind"], s["target"], s["scope"], s["chunks"]) for s in listed] == [
        ("adr/0001-hostile.md", "file", "path", "adr", 1),
        ("guide.md", "file", "path", "docs", 1),
        ("notes.txt", "file", "path", "docs", 1),
        ("other.md", "file", "path", "docs", 1),
    ]
    by_prefix = server.get("/v1/collections/f/sources?prefix=AD").json()
    assert [s["sourceId"] for s in by_prefix] == ["adr/0001-hostile.md"]
    assert [s["sourceId"] for s in server.get("/v1/collections/f/sources?limit=2").json()] == [
        "adr/0001-hostile.md", "guide.md",
    ]
    assert server.get("/v1/collections/f/sources?limit=0").status_code == 422


def test_documents_without_a_root_are_named_by_doc(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=8)) as engine:
        engine.index_documents(documents({"kb-1": "hello there"}), collection="d")
        (entry,) = engine.sources(collection="d")
        assert (entry.source_id, entry.kind, entry.target) == ("kb-1", "document", "doc")


def test_chunk_view_renders_markdown_and_leaves_nothing_active(server: Server) -> None:
    view = server.get("/v1/collections/f/chunks/" + _chunk_of(server, "adr/0001-hostile.md"))
    assert view.status_code == 200
    data = view.json()
    assert data["renderedAs"] == "markdown"
    assert data["content"] == XSS.rstrip("\n")
    html = data["html"]
    assert "<h1>Hostile</h1>" in html
    assert "<strong>bold</strong>" in html
    for active in ("<script", "alert('x')", "onerror", "onclick", 'href="javascript', "<img"):
        assert active not in html, active
    assert '<a href="https://example.org" rel="noopener noreferrer">out</a>' in html
    # markdown-it leaves a javascript: link as its text; nh3 drops a raw one's href
    assert "[a link](javascript:alert(2))" in html
    assert '<a rel="noopener noreferrer">raw</a>' in html


def test_chunk_view_of_a_text_file_is_escaped_pre(server: Server) -> None:
    data = server.get("/v1/collections/f/chunks/" + _chunk_of(server, "notes.txt")).json()
    assert data["renderedAs"] == "text"
    assert data["html"] == "<pre>plain &lt;b&gt;text&lt;/b&gt; &amp; more</pre>"


def test_render_html_drops_styles_and_event_handlers() -> None:
    assert render_html('<p style="color:red" onmouseover="x()">hi</p>', markdown=True) == "<p>hi</p>"
    # the style block goes with its content; the GFM table after it is rendered
    assert render_html("<style>p{}</style>\n\n| a |\n|---|\n| b |", markdown=True) == (
        "\n<table>\n<thead>\n<tr>\n<th>a</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td>b</td>\n</tr>\n</tbody>\n</table>\n"
    )


def test_unknown_chunk_and_draft_cards_are_not_found_for_a_reader(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)
    missing = server.get("/v1/collections/f/chunks/0123456789abcdef01234567")
    assert missing.status_code == 404
    assert missing.json() == {"error": "chunk '0123456789abcdef01234567' does not exist in collection 'f'"}
    folder = tmp_path / "faq"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    server.engine.index(folder, collection="f")
    server.engine.refinery.run("f", mode="extractive")
    from plait.refinery.cards import card_source_id

    card = server.engine.refinery.cards("f")[0]
    (chunk_id,) = server.engine.store.chunk_ids("f", card_source_id(card.id))
    as_reader = server.get("/v1/collections/f/chunks/" + chunk_id)
    assert as_reader.status_code == 404
    assert as_reader.json() == {"error": f"chunk {chunk_id!r} does not exist in collection 'f'"}
    as_maintainer = server.get("/v1/collections/f/chunks/" + chunk_id, as_="maintainer")
    assert as_maintainer.status_code == 200
    assert card.question in as_maintainer.json()["content"]


def test_favicon_is_served_without_a_key(server: Server) -> None:
    icon = httpx.get(server.url + "/favicon.ico", timeout=10)
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/svg+xml"
    assert icon.text.startswith("<svg")


def test_me_names_the_keys_role_and_scope(server: Server, tmp_path: Path) -> None:
    assert server.get("/v1/me").json() == {"auth": True, "role": "reader", "collection": "f"}
    assert server.get("/v1/me", as_="maintainer").json() == {"auth": True, "role": "maintainer", "collection": "f"}
    refused = httpx.get(server.url + "/v1/me", timeout=10)
    assert refused.status_code == 401
    with UvicornThread(create_app(server.engine, auth=False)) as open_server:
        assert httpx.get(open_server.url + "/v1/me", timeout=10).json() == {
            "auth": False, "role": "admin", "collection": "*",
        }
