"""The article's five documents (seeds/001) with the real offline models.

The semantic query shares no word with kb-102 ("the bank rejected my purchase" vs
"Payment timeouts: how to retry declined card transactions safely."): only the
dense arm can return it, so it must come back with ``match: semantic``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, doc_of, documents
from plait.types import Match

pytestmark = pytest.mark.slow


@pytest.fixture(params=["e5", "minilm"], scope="module")
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = Path(tmp_path_factory.mktemp(request.param)) / "plait.db"
    with Plait(str(path), embedder=request.param) as e:
        report = e.index_documents(documents(ARTICLE_DOCS))
        assert report.complete is True and report.embedding.embedded == 5
        yield e


def test_identifier_query_finds_kb101_first(engine: Plait) -> None:
    hit = engine.search("what does ERR-4012 mean").hits[0]
    assert doc_of(hit) == "kb-101"
    assert hit.match is Match.BOTH and hit.ranks.lexical == 1


def test_paraphrase_returns_kb102_semantically(engine: Plait) -> None:
    result = engine.search("the bank rejected my purchase", k=5)
    assert result.vector_available is True
    by_doc = {doc_of(h): h for h in result.hits}
    assert by_doc["kb-102"].match is Match.SEMANTIC
    assert by_doc["kb-102"].lexical_score is None
    # the closest paraphrase ("Why was my payment refused?") is the dense arm's first
    assert by_doc["kb-104"].ranks.dense == 1


def test_sku_query_finds_kb103_first(engine: Plait) -> None:
    hit = engine.search("stock wrong for SKU-88213-B").hits[0]
    assert doc_of(hit) == "kb-103"
    assert hit.ranks.lexical == 1
