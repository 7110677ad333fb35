"""API keys: the whole auth matrix over a real server, the key file, and the CLI."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

import httpx
from http_served import Served, serve_engine
from typer.testing import CliRunner

from plait.api.keys import KeyStore, Role, default_keys_path, hash_token
from plait.cli import app
from plait.cli.serve import is_loopback
from plait.errors import NotFoundError, ValidationError

runner = CliRunner()
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_engine(tmp_path) as s:
        yield s


def _call(served: Served, method: str, path: str, token: str | None, **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, served.url + path, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]


SEARCH = {"json": {"query": "ERR-4012"}}


@pytest.mark.parametrize(
    ("method", "path", "kw"),
    [
        ("POST", "/v1/collections/a/search", SEARCH),
        ("POST", "/v1/collections/a/reindex", {}),
        ("GET", "/v1/collections/a/coverage", {}),
        ("GET", "/v1/collections", {}),
    ],
)
def test_no_or_unknown_key_is_401(served: Served, method: str, path: str, kw: dict) -> None:
    for token in (None, "plait_not-a-real-token", "x" * 10_000):
        response = _call(served, method, path, token, **kw)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert "API key" in response.json()["error"]


def test_a_revoked_key_stops_working(served: Served) -> None:
    key, token = served.keys.create(role=Role.READER, collection="a")
    assert _call(served, "POST", "/v1/collections/a/search", token, **SEARCH).status_code == 200
    served.keys.revoke(key.id)
    assert _call(served, "POST", "/v1/collections/a/search", token, **SEARCH).status_code == 401


NO_KEY = "a valid API key is required: send 'Authorization: Bearer <token>' or 'X-API-Key: <token>'"
KEY_REFUSED = (
    "this API key is not valid (unknown or revoked): check the token sent, or ask an admin for a key "
    "('plait keys create --role reader -c COLLECTION'; 'plait keys list' shows which are revoked)"
)


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/collections/a/search"), ("GET", "/metrics")])
def test_a_401_says_whether_a_key_was_sent(served: Served, method: str, path: str) -> None:
    # a revoked or mistyped key got "a valid API key is required: send 'Authorization: Bearer
    # <token>'…", as if no key had been sent, sending its holder to fix a header that was right
    key, token = served.keys.create(role=Role.ADMIN, collection="*")
    served.keys.revoke(key.id)
    kw = SEARCH if method == "POST" else {}
    sent = {
        "revoked, Bearer": {"Authorization": f"Bearer {token}"},
        "revoked, X-API-Key": {"X-API-Key": token},
        "unknown": {"Authorization": "Bearer plait_not-a-real-token"},
    }
    for what, headers in sent.items():
        response = httpx.request(method, served.url + path, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]
        assert (response.status_code, response.json()) == (401, {"error": KEY_REFUSED}), what
    not_sent = {"none": {}, "another scheme": {"Authorization": f"Basic {token}"}, "no scheme": {"Authorization": token}}
    for what, headers in not_sent.items():
        response = httpx.request(method, served.url + path, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]
        assert (response.status_code, response.json()) == (401, {"error": NO_KEY}), what
        assert response.headers["www-authenticate"] == "Bearer"


TWO_KEYS = (
    "two different API keys were sent, in 'Authorization: Bearer' and in 'X-API-Key': send one key "
    "(in either header, or the same one in both)"
)
BEARER_IN_X_API_KEY = (
    "X-API-Key takes the token alone, without 'Bearer ': send 'X-API-Key: <token>' "
    "or 'Authorization: Bearer <token>'"
)


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/collections/a/search"), ("GET", "/metrics")])
def test_two_different_keys_or_a_bearer_x_api_key_are_refused_saying_so(
    served: Served, method: str, path: str
) -> None:
    # 'Authorization: Bearer <good>' with 'X-API-Key: bogus' was served (the Authorization
    # key won silently); 'X-API-Key: Bearer <token>' was the plain "not valid" 401
    _, token = served.keys.create(role="admin", collection="*")
    kw = SEARCH if method == "POST" else {}
    refused = {
        "good Bearer, bogus X-API-Key": ({"Authorization": f"Bearer {token}", "X-API-Key": "bogus"}, TWO_KEYS),
        "bogus Bearer, good X-API-Key": ({"Authorization": "Bearer plait_bogus", "X-API-Key": token}, TWO_KEYS),
        "X-API-Key: Bearer <token>": ({"X-API-Key": f"Bearer {token}"}, BEARER_IN_X_API_KEY),
        "X-API-Key: bearer <token>": ({"X-API-Key": f"bearer {token}"}, BEARER_IN_X_API_KEY),
    }
    for what, (headers, message) in refused.items():
        response = httpx.request(method, served.url + path, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]
        assert (response.status_code, response.json()) == (401, {"error": message}), what
        assert response.headers["www-authenticate"] == "Bearer"
    served_ok = {
        "the same key in both": {"Authorization": f"Bearer {token}", "X-API-Key": token},
        "X-API-Key alone": {"X-API-Key": token},
        "another scheme beside X-API-Key": {"Authorization": "Basic dXNlcjpwdw==", "X-API-Key": token},
    }
    for what, headers in served_ok.items():
        response = httpx.request(method, served.url + path, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]
        assert response.status_code == 200, (what, response.text)


def test_reader_can_search_and_see_coverage_but_not_reindex(served: Served) -> None:
    token = served.tokens["reader_a"]
    assert _call(served, "POST", "/v1/collections/a/search", token, **SEARCH).status_code == 200
    coverage = _call(served, "GET", "/v1/collections/a/coverage", token)
    assert coverage.status_code == 200 and coverage.json()["collection"] == "a"
    response = _call(served, "POST", "/v1/collections/a/reindex", token)
    assert response.status_code == 403
    assert response.json() == {"error": "reindex needs the maintainer role; this key is a reader"}


def test_maintainer_can_reindex_its_collection(served: Served) -> None:
    response = _call(served, "POST", "/v1/collections/a/reindex", served.tokens["maintainer_a"])
    assert response.status_code == 200 and response.json()["collection"] == "a"


def test_reindex_takes_the_cli_options_and_refuses_unknown_fields(served: Served, tmp_path: Path) -> None:
    """``{"source": …}`` was ignored and everything reindexed; now every field either
    acts (``scope``, ``full``, ``allowEmpty``) or is a 422."""
    token = served.tokens["maintainer_a"]
    docs = tmp_path / "docs"
    (docs / "adr").mkdir(parents=True)
    (docs / "adr" / "0001-keys.md").write_text("# Keys\n\nIdempotency keys.\n", encoding="utf-8")
    (docs / "guide.md").write_text("# Guide\n\nHow to start.\n", encoding="utf-8")
    served.engine.index(docs, collection="a")
    unknown = _call(served, "POST", "/v1/collections/a/reindex", token, json={"source": "/etc/passwd"})
    assert unknown.status_code == 422 and "source" in unknown.json()["error"], unknown.text
    wrong = _call(served, "POST", "/v1/collections/a/reindex", token, json={"full": "yes please"})
    assert wrong.status_code == 422 and "full" in wrong.json()["error"], wrong.text
    # "yes", "on" and 1 were read as true: a full reindex (195 s on a real repository) nobody asked for
    for loose in ("yes", "on", 1):
        refused = _call(served, "POST", "/v1/collections/a/reindex", token, json={"full": loose, "allowEmpty": False})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"].startswith("full: Input should be a valid boolean"), refused.text
    plain = _call(served, "POST", "/v1/collections/a/reindex", token)
    assert plain.status_code == 200 and plain.json()["embedding"]["embedded"] == 0, plain.text
    scoped = _call(served, "POST", "/v1/collections/a/reindex", token, json={"scope": "adr", "full": True})
    assert scoped.status_code == 200, scoped.text
    report = scoped.json()
    # full: the adr file's one chunk embedded again; scope: the guide left alone
    assert (report["chunksUnchanged"], report["embedding"]["embedded"]) == (1, 1)


def test_another_collection_looks_exactly_like_a_missing_one(served: Served) -> None:
    reader, maintainer = served.tokens["reader_a"], served.tokens["maintainer_a"]
    hidden_search = _call(served, "POST", "/v1/collections/b/search", reader, **SEARCH)
    hidden_reindex = _call(served, "POST", "/v1/collections/b/reindex", maintainer)
    hidden_coverage = _call(served, "GET", "/v1/collections/b/coverage", reader)
    # 'b' exists (the admin sees it); now make it truly missing and ask as the admin.
    admin = served.tokens["admin_all"]
    assert _call(served, "POST", "/v1/collections/b/search", admin, **SEARCH).status_code == 200
    served.engine.delete_collection("b")
    missing_search = _call(served, "POST", "/v1/collections/b/search", admin, **SEARCH)
    missing_reindex = _call(served, "POST", "/v1/collections/b/reindex", admin)
    missing_coverage = _call(served, "GET", "/v1/collections/b/coverage", admin)
    pairs = (
        (hidden_search, missing_search),
        (hidden_reindex, missing_reindex),
        (hidden_coverage, missing_coverage),
    )
    for hidden, missing in pairs:
        assert hidden.status_code == missing.status_code == 404
        assert hidden.content == missing.content == b'{"error":"collection \'b\' does not exist"}'
        assert hidden.headers["content-type"] == missing.headers["content-type"]
    # A reader asking to reindex a collection it does not cover gets 404, not 403.
    assert _call(served, "POST", "/v1/collections/b/reindex", reader).status_code == 404


def test_admin_may_do_everything_everywhere(served: Served) -> None:
    admin = served.tokens["admin_all"]
    for collection in ("a", "b"):
        assert _call(served, "POST", f"/v1/collections/{collection}/search", admin, **SEARCH).status_code == 200
        assert _call(served, "POST", f"/v1/collections/{collection}/reindex", admin).status_code == 200


def test_x_api_key_header_is_accepted(served: Served) -> None:
    response = httpx.post(
        served.url + "/v1/collections/a/search", json=SEARCH["json"],
        headers={"X-API-Key": served.tokens["reader_a"]},
    )
    assert response.status_code == 200


def test_no_auth_server_needs_no_key(tmp_path: Path) -> None:
    with serve_engine(tmp_path, auth=False) as s:
        assert httpx.get(s.url + "/healthz").json()["auth"] is False
        assert httpx.post(s.url + "/v1/collections/b/search", json=SEARCH["json"]).status_code == 200


# the key file -------------------------------------------------------------------------
def test_keys_are_stored_hashed(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.db")
    key, token = keys.create(role="maintainer", collection="docs")
    assert token.startswith("plait_") and len(token) == len("plait_") + 43  # 32 bytes, base64url
    assert key.hint == token[:10] + "…" and key.role is Role.MAINTAINER
    keys.close()
    raw = (tmp_path / "keys.db").read_bytes()
    assert token.encode() not in raw
    with sqlite3.connect(tmp_path / "keys.db") as db:
        stored = db.execute("SELECT token_hash, role, collection FROM api_keys").fetchall()
    assert stored == [(hash_token(token), "maintainer", "docs")]


def test_key_store_validation_and_lookup(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.db")
    with pytest.raises(ValidationError, match="unknown role 'owner'; use one of: reader, maintainer, admin"):
        keys.create(role="owner", collection="a")
    with pytest.raises(ValidationError, match="collection"):
        keys.create(role="reader", collection=" ")
    first, token = keys.create(role="admin", collection="*")
    assert keys.authenticate(token) == first
    assert keys.authenticate(token + "x") is None and keys.authenticate("") is None
    assert first.covers("anything")
    revoked = keys.revoke(first.id)
    assert revoked.revoked_at is not None and keys.authenticate(token) is None
    with pytest.raises(NotFoundError, match="API key 99 does not exist"):
        keys.revoke(99)
    assert Role.ADMIN.includes(Role.MAINTAINER) and not Role.READER.includes(Role.MAINTAINER)
    keys.close()


def test_default_keys_path() -> None:
    assert default_keys_path("/srv/plait/plait.db") == Path("/srv/plait/keys.db")
    assert default_keys_path("sqlite:///srv/x.db") == Path("srv/keys.db")
    assert default_keys_path("postgresql://db/plait") == Path(".plait/keys.db")


# the CLI ------------------------------------------------------------------------------
def test_keys_cli_create_list_revoke(tmp_path: Path) -> None:
    keys = str(tmp_path / "k.db")
    created = runner.invoke(app, ["keys", "create", "--role", "maintainer", "-c", "*", "--keys", keys, "--json"])
    assert created.exit_code == 0, created.output
    data = json.loads(created.stdout)
    assert data["role"] == "maintainer" and data["collection"] == "*" and data["token"].startswith("plait_")
    listed = json.loads(runner.invoke(app, ["keys", "list", "--keys", keys, "--json"]).stdout)
    assert [(k["id"], k["role"], k["revokedAt"]) for k in listed] == [(data["id"], "maintainer", None)]
    assert "token" not in listed[0] and data["token"] not in json.dumps(listed)
    revoked = runner.invoke(app, ["keys", "revoke", str(data["id"]), "--keys", keys, "--json"])
    assert json.loads(revoked.stdout)["revokedAt"] is not None
    missing = runner.invoke(app, ["keys", "revoke", "42", "--keys", keys])
    assert missing.exit_code == 1 and "API key 42 does not exist" in missing.output
    bad = runner.invoke(app, ["keys", "create", "--role", "root", "--keys", keys])
    assert bad.exit_code == 1 and "unknown role 'root'" in bad.output


def test_keys_default_to_the_store_itself(tmp_path: Path) -> None:
    """Issue 19 item 3: keys live in the store (no keys.db beside it any more)."""
    store = str(tmp_path / "s" / "plait.db")
    created = runner.invoke(app, ["keys", "create", "--store", store, "-c", "*", "--json"])
    assert created.exit_code == 0, created.output
    assert not (tmp_path / "s" / "keys.db").exists()
    with sqlite3.connect(store) as db:
        stored = db.execute("SELECT id, role, collection FROM api_keys").fetchall()
    assert stored == [(json.loads(created.stdout)["id"], "reader", "*")]
    listed = json.loads(runner.invoke(app, ["keys", "list", "--store", store, "--json"]).stdout)
    assert [(k["id"], k["collection"]) for k in listed] == [(stored[0][0], "*")]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "example.org", "::"])
def test_no_auth_refuses_a_non_loopback_host(host: str) -> None:
    result = runner.invoke(app, ["serve", "--no-auth", "--host", host])
    assert result.exit_code == 1
    assert "--no-auth only binds to loopback" in result.output and host in result.output


def test_is_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "example.org"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_plait_serve_end_to_end(tmp_path: Path, served: Served) -> None:
    """`plait serve` in its own process over the fixture's store, with a CLI-made key."""
    store = str(tmp_path / "plait.db")
    keys = str(tmp_path / "cli-keys.db")
    created = runner.invoke(
        app, ["keys", "create", "--role", "reader", "-c", "a", "--keys", keys, "--store", store, "--json"]
    )
    token = json.loads(created.stdout)["token"]
    port = _free_port()
    command = [sys.executable, "-c", "from plait.cli import main; main()", "serve", "--port", str(port),
               "--store", store, "--keys", keys, "--embedder", "fake"]
    process = subprocess.Popen(
        command, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120  # a start, not a speed test: a loaded machine is slow
        while True:
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    # stop a live server before reading its output: reading first blocked
                    # forever (the pipe stays open while it runs), hanging the whole suite
                    if process.poll() is None:
                        process.terminate()
                    out, _ = process.communicate(timeout=30)
                    pytest.fail(f"plait serve did not start: {out.decode(errors='replace')}")
                time.sleep(0.1)
        assert httpx.post(url + "/v1/collections/a/search", json=SEARCH["json"]).status_code == 401
        response = httpx.post(
            url + "/v1/collections/a/search", json=SEARCH["json"], headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200
        assert response.json()["hits"][0]["metadata"]["docId"] == "kb-101"
    finally:
        process.terminate()
        process.wait(timeout=10)
