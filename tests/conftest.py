"""Shared fixtures: the article's five documents and engines over temporary stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin

ARTICLE_DOCS = {
    "kb-101": "ERR-4012: checkout API rejects the cart when the session token expired.",
    "kb-102": "Payment timeouts: how to retry declined card transactions safely.",
    "kb-103": "ERR-4021: inventory service returns stale stock for SKU-88213-B.",
    "kb-104": "Why was my payment refused? Common reasons a card gets declined.",
    "kb-105": "Session management: refreshing expired tokens in the checkout flow.",
}


def documents(docs: dict[str, str], scope: str = "docs") -> list[SourceDocument]:
    return [
        SourceDocument(
            source_id=doc_id,
            scope=scope,
            parts=(SourcePart(text=text, origin=FileOrigin(source_path=f"{doc_id}.md", title=doc_id)),),
            metadata={"docId": doc_id},
        )
        for doc_id, text in docs.items()
    ]


def doc_of(hit) -> str:  # type: ignore[no-untyped-def]
    return hit.metadata["docId"]


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder(dimension=64)


@pytest.fixture
def engine(tmp_path: Path, fake: FakeEmbedder) -> Iterator[Plait]:
    with Plait(str(tmp_path / "plait.db"), embedder=fake) as e:
        yield e
