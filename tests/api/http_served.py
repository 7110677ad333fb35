"""A real uvicorn server over an engine with two collections ('a' and 'b') and API keys.

Not a conftest (a second ``conftest`` module would shadow ``tests/conftest.py``): test
modules wrap :func:`serve_engine` in their own fixture.
"""

from __future__ import annotations

import atexit
import importlib.util
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from plait.api.http import create_app
from plait.api.keys import KeyStore
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread


def _root_conftest() -> ModuleType:
    """tests/conftest.py (ARTICLE_DOCS, documents) by path: another folder's conftest may
    hold the name ``conftest`` in ``sys.modules`` when the whole suite runs."""
    module = sys.modules.get("conftest")
    if module is not None and hasattr(module, "ARTICLE_DOCS"):
        return module
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("plait_tests_root_conftest", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_dir(name: str) -> Path:
    """A folder of its own for this process under ``test-artifacts/<name>/``, for modules that
    must build their engine at import (schemathesis reads the app's schema then): two runs in
    one tree (or a ``--collect-only`` beside a running suite) never share or delete each
    other's databases. Its database files go when the process exits; ``summary.json``-style
    outputs stay for reading."""
    parent = Path(__file__).resolve().parents[2] / "test-artifacts" / name
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="run-", dir=parent))

    def remove_databases() -> None:
        for path in root.glob("*.db*"):
            path.unlink(missing_ok=True)

    atexit.register(remove_databases)
    return root


_root = _root_conftest()
ARTICLE_DOCS: dict[str, str] = _root.ARTICLE_DOCS
documents = _root.documents

B_DOCS = {"b-1": "Release notes for v3.11.2.", "b-2": "Rollback steps for a bad release."}


@dataclass
class Served:
    url: str
    engine: Plait
    keys: KeyStore
    tokens: dict[str, str]


@contextmanager
def serve_engine(tmp_path: Path, *, auth: bool = True) -> Iterator[Served]:
    """Collections 'a' (the article's five docs) and 'b'; keys by name in ``tokens``."""
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="a")
        engine.index_documents(documents(B_DOCS), collection="b")
        keys = KeyStore(tmp_path / "keys.db")
        tokens = {
            "reader_a": keys.create(role="reader", collection="a")[1],
            "maintainer_a": keys.create(role="maintainer", collection="a")[1],
            "admin_all": keys.create(role="admin", collection="*")[1],
        }
        try:
            with UvicornThread(create_app(engine, auth=auth, keys=keys)) as server:
                yield Served(url=server.url, engine=engine, keys=keys, tokens=tokens)
        finally:
            keys.close()
