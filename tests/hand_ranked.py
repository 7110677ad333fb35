"""An engine over a store whose every rank and score is known by hand, and a real server for it.

Used by the client and the framework-integration tests. Dense ranks are placed with
FakeEmbedder overrides: the query on the e0 axis, each document at a chosen angle.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from plait.api.http import create_app
from plait.api.keys import KeyStore
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.testing.asgi_server import UvicornThread
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.types import FileOrigin

__all__ = ["ANGLES", "DIM", "FILES", "MULTI", "QUERY", "angle", "make_engine", "serve"]

DIM = 8
QUERY = "ERR-4012"
# kb-101 is the only document with the identifier (lexical rank 1) and the farthest from
# the query in the dense arm (80°: rank 5); the others at 10°, 20°, 30°, 40° (ranks 1-4).
ANGLES = {"kb-101": 80, "kb-102": 10, "kb-103": 20, "kb-104": 30, "kb-105": 40}
FILES = {"refunds.md": "# Refunds\n\nRefund within 7 days.\n", "keys.md": "# Keys\n\nEvery payment carries a key.\n"}


def angle(degrees: float) -> list[float]:
    v = np.zeros(DIM)
    v[0], v[1] = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    return list(v)


# collection 'multi': source 'long' has three chunks that match ERR-7, 'short' one
MULTI = [
    SourceDocument(
        source_id="long",
        scope="docs",
        parts=tuple(
            SourcePart(text=f"ERR-7 {word}", origin=FileOrigin(source_path="long.md", heading_path=[word]), key=word)
            for word in ("alpha", "beta", "gamma")
        ),
    ),
    SourceDocument(
        source_id="short",
        scope="docs",
        parts=(SourcePart(text="ERR-7 delta", origin=FileOrigin(source_path="short.md")),),
    ),
]


def make_engine(tmp_path: Path) -> Plait:
    """Collection 'a': the article's five documents; 'files': two Markdown files on disk;
    'other': indexed with another embedding model (so 'a''s engine must refuse it);
    'multi': three chunks of one source and one of another (``MULTI``)."""
    overrides = {QUERY: angle(0)} | {ARTICLE_DOCS[d]: angle(a) for d, a in ANGLES.items()}
    store = str(tmp_path / "plait.db")
    with Plait(store, embedder=FakeEmbedder(dimension=DIM, model="other-model")) as other:
        other.index_documents(documents({"o-1": "ERR-4012 elsewhere"}), collection="other")
    engine = Plait(store, embedder=FakeEmbedder(dimension=DIM, overrides=overrides))
    engine.index_documents(documents(ARTICLE_DOCS), collection="a")
    folder = tmp_path / "files"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    engine.index(folder, collection="files", scope="docs")
    engine.index_documents(MULTI, collection="multi")
    return engine


@contextmanager
def serve(engine: Plait, tmp_path: Path, *, role: str = "admin", collection: str = "*") -> Iterator[tuple[str, str]]:
    """A real uvicorn on 127.0.0.1 serving ``engine`` with auth on: (url, a key's token)."""
    keys = KeyStore(tmp_path / "keys.db")
    token = keys.create(role=role, collection=collection)[1]
    try:
        with UvicornThread(create_app(engine, auth=True, keys=keys)) as server:
            yield server.url, token
    finally:
        keys.close()
