"""Shared fixtures: the article's five documents and engines over temporary stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, doc_of, documents

__all__ = ["ARTICLE_DOCS", "doc_of", "documents"]


@pytest.fixture(autouse=True)
def _width_of_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees the terminal size of a piped run, whoever started pytest: pytest-xdist
    workers inherit COLUMNS=80 and LINES=24, so output that fits a serial run wrapped in a
    parallel one, and tests counting its lines failed there only. A test that needs a width
    sets COLUMNS itself."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder(dimension=64)


@pytest.fixture
def engine(tmp_path: Path, fake: FakeEmbedder) -> Iterator[Plait]:
    with Plait(str(tmp_path / "plait.db"), embedder=fake) as e:
        yield e
