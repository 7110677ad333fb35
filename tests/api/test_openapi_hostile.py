"""schemathesis over the whole OpenAPI with hostile values, against a real server on
127.0.0.1 (issue 23): every operation's cases from its schema, then string fields
swapped for lone surrogates, NUL, 100,000-character strings and traversal text, and
integers for huge ones. Not one response may be ≥ 500. Budget: at least
:data:`MIN_CASES` cases in total (``PLAIT_HOSTILE_CASES`` raises it; a benchmark-style
run of 20,000 is ``benchmarks/openapi_hostile.py``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
schemathesis = pytest.importorskip("schemathesis", reason="needs schemathesis (the test extra)")

from http_served import ARTICLE_DOCS, documents, run_dir  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from plait.api.http import create_app  # noqa: E402
from plait.api.keys import KeyStore  # noqa: E402
from plait.embeddings.fake import FakeEmbedder  # noqa: E402
from plait.service import Plait  # noqa: E402
from plait.testing.asgi_server import UvicornThread  # noqa: E402

MIN_CASES = 2000
HOSTILE_STRINGS = (
    "\ud800",
    "ok \udfff tail",
    "a\x00b",
    "\x00",
    "x" * 100_000,
    "\u202eevil\u202c",  # right-to-left override
    "../../../../etc/passwd",
    "/proc/self/fd/3",
    "~nosuchuser/x",
    "%2e%2e%2f",
    "",
    " ",
    "*",
    "faq-card",
)
HOSTILE_NUMBERS = (2**63, -(2**63) - 1, 10**30, -1, 0, 1e308, -1e308)

_ROOT = run_dir("openapi-hostile")  # this process's own folder: never another run's databases
_ENGINE = Plait(str(_ROOT / "plait.db"), embedder=FakeEmbedder(dimension=64), llm="none")
_ENGINE.index_documents(documents(ARTICLE_DOCS), collection="a")
_KEYS = KeyStore(_ROOT / "keys.db")
_TOKEN = _KEYS.create(role="admin", collection="*")[1]
APP = create_app(_ENGINE, auth=True, keys=_KEYS)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
_OPERATIONS = [result.ok() for result in schema.get_all_operations()]
# operations without parameters run out of distinct cases early: the others make up for it
TARGET = max(MIN_CASES, int(os.environ.get("PLAIT_HOSTILE_CASES", "0")))
_PER_OPERATION = math.ceil(1.5 * TARGET / len(_OPERATIONS))


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with UvicornThread(APP) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        yield http
    _ENGINE.close()
    _KEYS.close()


def _hostile(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """``value`` with some strings and numbers swapped for hostile ones."""
    if depth > 6:
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return data.draw(st.sampled_from(HOSTILE_STRINGS)) if data.draw(st.booleans()) else value
    if isinstance(value, (int, float)):
        return data.draw(st.sampled_from(HOSTILE_NUMBERS)) if data.draw(st.booleans()) else value
    if isinstance(value, list):
        return [_hostile(v, data, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: _hostile(v, data, depth + 1) for k, v in value.items()}
    return value


def _send(case: Any, data: st.DataObject, client: httpx.Client) -> int:
    """Sends ``case`` with hostile values swapped in; its status (never ≥ 500)."""
    params = dict(case.path_parameters or {})
    if "collection" in params and data.draw(st.booleans()):
        params["collection"] = "a"  # mostly a real collection, so the handlers run
    path = case.operation.path
    for name, value in params.items():
        # invalid UTF-8 stays invalid; a URL is kept under the client's own length limit
        raw = str(_hostile(value, data)).encode("utf-8", "surrogatepass")[:4000]
        path = path.replace("{" + name + "}", quote(raw, safe=""))
    query = {k: _hostile(v, data) for k, v in (case.query or {}).items()}
    query = {k: str(v).encode("utf-8", "surrogatepass").decode("utf-8", "replace")[:4000] for k, v in query.items()}
    headers = {"Authorization": f"Bearer {_TOKEN}", "Content-Type": "application/json"}
    content = None
    if case.body is not None and not isinstance(case.body, (bytes, bytearray)):
        try:
            content = json.dumps(_hostile(case.body, data)).encode("ascii")  # surrogates travel as \ud800
        except (TypeError, ValueError):
            content = json.dumps(case.body, default=str).encode("ascii")
    response = client.request(case.method, path, params=query, content=content, headers=headers)
    assert response.status_code < 500, (case.method, path, content[:200] if content else None, response.text[:300])
    if response.status_code >= 400:
        assert set(response.json()) == {"error"}
    return response.status_code


def test_no_hostile_case_is_a_server_error(client: httpx.Client) -> None:
    """Every operation's cases, one test (one pytest item, so the budget is counted in one
    process even when the suite runs on several workers: schemathesis' own parametrize
    gives every operation the same node id, which pytest-xdist cannot split by)."""
    sent: list[int] = []  # one status per case sent
    for operation in _OPERATIONS:

        @settings(
            max_examples=_PER_OPERATION,
            derandomize=True,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(), data=st.data())
        def each(case: Any, data: st.DataObject) -> None:
            sent.append(_send(case, data, client))

        each()
    statuses = {str(code): sent.count(code) for code in sorted(set(sent))}
    (_ROOT / "summary.json").write_text(json.dumps({"cases": len(sent), "statuses": statuses}) + "\n")
    assert len(sent) >= TARGET, len(sent)
    assert max(sent) < 500
