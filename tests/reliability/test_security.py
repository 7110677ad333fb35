"""Security: nothing outside an indexed root is read; a key for collection 'a' cannot
touch collection 'b' on any route; oversized bodies are refused with 413.

Covered elsewhere and not repeated: keys stored hashed and looked up by hash
(tests/api/test_auth.py::test_keys_are_stored_hashed, ``hmac.compare_digest`` in
plait/api/keys.py), the 401/403 matrix and search/reindex/coverage isolation
(tests/api/test_auth.py), 413 on search by Content-Length and by stream
(tests/api/test_http.py::test_bodies_over_the_limit_are_413), symlinks out of a git
repository (tests/sources/test_git.py).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.api.http import MAX_BODY_BYTES
from plait.embeddings.fake import FakeEmbedder
from plait.errors import PlaitError
from plait.service import Plait
from plait.sources.folder import FolderSource

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

import httpx
from http_served import Served, serve_engine


def test_symlinks_out_of_a_folder_root_are_skipped_and_never_read(tmp_path: Path) -> None:
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "passwords.md").write_text("SECRET-1 hunter2", encoding="utf-8")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "good.md").write_text("# Good\n\nGOOD-1 inside", encoding="utf-8")
    (root / "escape.md").symlink_to(secret_dir / "passwords.md")
    (root / "sub" / "dotdot.md").symlink_to(Path("..") / ".." / "secret" / "passwords.md")
    (root / "linked_dir").symlink_to(secret_dir, target_is_directory=True)  # not walked
    (root / "alias.md").symlink_to("good.md")  # inside the root: allowed
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(root)
        reasons = {s.path: s.reason for s in report.skipped}
        assert set(reasons) == {"escape.md", "sub/dotdot.md"}
        assert all(r.startswith("resolves outside the indexed root") for r in reasons.values())
        assert sorted(s.source_id for s in engine.store.list_sources("default")) == ["alias.md", "good.md"]
        hits = engine.search("SECRET-1 hunter2").hits
        assert hits and all("SECRET" not in h.content for h in hits)  # only the good files come back


def test_a_root_given_with_dotdot_is_resolved_and_ids_stay_relative(tmp_path: Path) -> None:
    root = tmp_path / "a" / "docs"
    root.mkdir(parents=True)
    (root / "x.md").write_text("X-1 text", encoding="utf-8")
    docs = list(FolderSource(root=tmp_path / "a" / ".." / "a" / "docs").scan())
    assert [d.source_id for d in docs] == ["x.md"]
    with pytest.raises(PlaitError, match="not a folder"):
        FolderSource(root=tmp_path / "a" / "docs" / ".." / "missing").scan()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_engine(tmp_path_factory.mktemp("sec")) as s:
        yield s


# Every collection route; the card and run ids need not exist: the collection check comes first.
ROUTES = [
    ("POST", "search", {"query": "release"}),
    ("POST", "explain", {"query": "release"}),
    ("POST", "ask", {"question": "How do I roll back a bad release?"}),
    ("GET", "coverage", None),
    ("POST", "reindex", None),
    ("GET", "faq", None),
    ("POST", "faq/card-1/approve", None),
    ("POST", "faq/card-1/reject", None),
    ("PATCH", "faq/card-1", {"answer": "changed"}),
    ("POST", "refinery/runs", None),
    ("GET", "refinery/runs", None),
    ("GET", "refinery/runs/run-1", None),
    ("POST", "refinery/runs/run-1/cancel", None),
]
HIDDEN = b'{"error":"collection \'b\' does not exist"}'


def _call(served: Served, method: str, path: str, token: str, body: object) -> httpx.Response:
    return httpx.request(
        method,
        f"{served.url}/v1/collections/{path}",
        headers={"Authorization": f"Bearer {token}"},
        json=body,
        timeout=30,
    )


@pytest.mark.parametrize(("method", "route", "body"), ROUTES, ids=[f"{m} {r}" for m, r, _ in ROUTES])
def test_a_key_for_a_cannot_reach_b_on_any_route(
    served: Served, method: str, route: str, body: object
) -> None:
    for token in ("reader_a", "maintainer_a"):
        response = _call(served, method, f"b/{route}", served.tokens[token], body)
        assert (response.status_code, response.content) == (404, HIDDEN), (token, response.text)
    # The same route on 'b' for the admin does not say "missing": the 404 above is isolation.
    admin = _call(served, method, f"b/{route}", served.tokens["admin_all"], body)
    assert admin.content != HIDDEN and admin.status_code != 500, admin.text


@pytest.mark.parametrize("name", ["a%2F..%2Fb", "..%2Fb", "b%00", "*"])
def test_collection_names_cannot_traverse_to_another(served: Served, name: str) -> None:
    response = _call(served, "POST", f"{name}/search", served.tokens["reader_a"], {"query": "release"})
    assert response.status_code == 404, response.text
    assert "Traceback" not in response.text


@pytest.mark.parametrize("route", ["ask", "explain", "refinery/runs"])
def test_oversized_bodies_are_413_on_other_routes(served: Served, route: str) -> None:
    big = b'{"question": "' + b"x" * (MAX_BODY_BYTES + 1) + b'"}'
    response = httpx.post(
        f"{served.url}/v1/collections/a/{route}",
        content=big,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {served.tokens['admin_all']}"},
        timeout=30,
    )
    assert response.status_code == 413
    assert response.json() == {"error": f"the request body is over {MAX_BODY_BYTES} bytes"}
