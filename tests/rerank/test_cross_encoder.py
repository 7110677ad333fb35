"""The cross-encoder reranker's plumbing, with a tiny BERT built here (no download).

No cross-encoder ships inside a registry package, so these tests build a tiny, randomly
initialised BERT sequence classifier (one layer, hidden size 32) and a vocab of the test documents' words,
save them with ``save_pretrained`` and load them through ``CrossEncoder(path)``. The
model's judgements are meaningless: the tests prove plumbing (loading from a directory
or an installed package, pairing the query with each candidate, ordering by score,
``ranks.rerank`` in search), not quality. Expected orders come from scoring the same
pairs with plain ``transformers``, independently of sentence-transformers.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError
from plait.rerank import CrossEncoderReranker, Reranker, make_reranker
from plait.rerank.cross_encoder import resolve_model_path
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents

pytestmark = pytest.mark.slow  # importing torch + transformers takes ~10 s on 2 cores

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("sentence_transformers")

QUERY = "what does err-4012 mean"
#: Every word and punctuation mark of the article's documents and the queries.
VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *sorted(
        {
            w
            for t in [*ARTICLE_DOCS.values(), QUERY, "ERR-4012 checkout"]
            for w in re.findall(r"[a-z0-9]+|[^\sa-z0-9]", t.lower())
        }
    ),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny cross-encoder saved to disk the way a real one is."""
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}), encoding="utf-8"
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    pieces = tokenizer.convert_ids_to_tokens(tokenizer(QUERY, ARTICLE_DOCS["kb-101"])["input_ids"])
    assert "[UNK]" not in pieces and pieces[1:5] == ["what", "does", "err", "-"]
    torch.manual_seed(7)
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.2,  # wide enough that the five documents get distinct scores
    )
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def reference_scores(path: Path, query: str, texts: list[str]) -> list[float]:
    """The same pairs scored with plain transformers (logits; sigmoid keeps the order)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
    batch = tokenizer([query] * len(texts), texts, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits[:, 0].tolist()


def by_descending(ids: list[str], scores: list[float]) -> list[str]:
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])]


CANDIDATES = [(doc_id, text) for doc_id, text in ARTICLE_DOCS.items()]


def test_order_follows_the_model_scores(model_dir: Path) -> None:
    reranker = CrossEncoderReranker(model_dir, max_length=128)
    assert isinstance(reranker, Reranker) and reranker.name == "cross-encoder"
    ids = [cid for cid, _ in CANDIDATES]
    scores = reference_scores(model_dir, QUERY, [text for _, text in CANDIDATES])
    assert len({round(s, 4) for s in scores}) == len(scores)  # no ties
    expected = by_descending(ids, scores)

    outcome = reranker.rerank(QUERY, CANDIDATES)
    assert outcome.order == expected
    assert outcome.reranked is True and outcome.reason is None
    assert sorted(outcome.scores) == sorted(ids)

    # fed in ascending-score order, the answer must be the input reversed
    ascending = [next(c for c in CANDIDATES if c[0] == cid) for cid in reversed(expected)]
    assert reranker.rerank(QUERY, ascending).order == expected


def test_loaded_from_an_installed_package(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "tiny_ce_model"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        f"from pathlib import Path\n\ndef get_model_path():\n    return Path({str(model_dir)!r})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert resolve_model_path("tiny-ce-model") == model_dir
    reranker = make_reranker("cross-encoder", cross_encoder="tiny-ce-model")
    assert isinstance(reranker, CrossEncoderReranker) and reranker.path == model_dir


def test_bad_model_specs_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'/no/such/dir' is neither a directory.*never downloads"):
        CrossEncoderReranker("/no/such/dir")
    with pytest.raises(ConfigError, match="'cross-encoder/ms-marco-MiniLM-L-6-v2' is neither"):
        CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L-6-v2")  # a hub name: never fetched
    with pytest.raises(ConfigError, match="has no config.json"):
        CrossEncoderReranker(tmp_path)
    with pytest.raises(ConfigError, match="package 'json' folder .* has no config.json"):
        CrossEncoderReranker("json")


def test_missing_dependencies_give_an_install_hint(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    reranker = CrossEncoderReranker(model_dir)
    with pytest.raises(ConfigError, match=r"pip install 'plait\[rerank\]'"):
        reranker.rerank(QUERY, CANDIDATES)


def test_search_with_cross_encoder_fills_rerank_ranks(model_dir: Path, tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=64), cross_encoder=model_dir) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        plain = engine.search(QUERY, k=5)
        result = engine.search(QUERY, k=3, rerank="cross-encoder", k_overfetch=5)
    assert len(plain.hits) == 5
    pool = [h.chunk_id for h in plain.hits]
    scores = reference_scores(model_dir, QUERY, [h.content for h in plain.hits])
    expected = by_descending(pool, scores)[:3]
    assert expected != pool[:3]  # the rerank changes the top 3, so the test can tell
    assert [h.chunk_id for h in result.hits] == expected
    assert [h.ranks.rerank for h in result.hits] == [1, 2, 3]
    assert [h.ranks.fused for h in result.hits] == [pool.index(cid) + 1 for cid in expected]
    assert (result.rerank, result.reranked, result.rerank_reason) == ("cross-encoder", True, None)
    assert "rerank" in result.timings_ms
