"""Shared fixtures: the article's five documents and engines over temporary stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, doc_of, documents

__all__ = ["ARTICLE_DOCS", "doc_of", "documents"]


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder(dimension=64)


@pytest.fixture
def engine(tmp_path: Path, fake: FakeEmbedder) -> Iterator[Plait]:
    with Plait(str(tmp_path / "plait.db"), embedder=fake) as e:
        yield e
