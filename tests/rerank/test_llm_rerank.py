"""LLM listwise rerank: prompt, robust parsing, fallbacks, and the rerank step in search.

Every LLM here is a real OllamaLLM / OpenAILLM talking HTTP to a WireServer on
127.0.0.1 that replies with canned orderings.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError, ValidationError
from plait.llm import OllamaLLM, OpenAILLM
from plait.rerank import LLMReranker, Reranker, RerankOutcome, complete_order, parse_ordering
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, doc_of, documents
from plait.testing.wire import WireServer, closed_port
from plait.types import to_json

IDS = ["chunk-a", "chunk-b", "chunk-c", "chunk-d"]
CANDIDATES = [
    ("chunk-a", "Payment timeouts: how to retry declined card transactions safely."),
    ("chunk-b", "ERR-4012: checkout API rejects the cart when the session token expired."),
    ("chunk-c", "Session management: refreshing expired tokens in the checkout flow."),
    ("chunk-d", "ERR-4021: inventory service returns stale stock for SKU-88213-B."),
]


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_LLM_TIMEOUT", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


def labels_in(messages: list[dict]) -> list[int]:
    """The candidate labels ``[n]`` the prompt shows, in order."""
    return [int(n) for n in re.findall(r"^\[(\d+)\] ", messages[-1]["content"], re.MULTILINE)]


def reverse_all(messages: list[dict]) -> str:
    return json.dumps(list(reversed(labels_in(messages))))


# -- parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("[3, 1, 2, 4]", ["chunk-c", "chunk-a", "chunk-b", "chunk-d"]),
        ("[3] > [1] > [2]", ["chunk-c", "chunk-a", "chunk-b"]),
        ('```json\n{"ranking": ["[2]", "4"]}\n```', ["chunk-b", "chunk-d"]),
        ('["chunk-d", "chunk-a"]', ["chunk-d", "chunk-a"]),  # ids instead of labels
        ("Passage 4 is best, then passage 1.", ["chunk-d", "chunk-a"]),
        ("2, 4, 1", ["chunk-b", "chunk-d", "chunk-a"]),
        ("Passage [2] is best. Final: [2, 4, 1, 3]", ["chunk-b", "chunk-d", "chunk-a", "chunk-c"]),
        ("<think>[1] or [2]?</think>[4, 3]", ["chunk-d", "chunk-c"]),
        ("[0, 3, 1]", ["chunk-a", "chunk-d", "chunk-b"]),  # 0 present, 4 absent: 0-based
        ('[2, 9, 2, "zzz"]', ["chunk-b", "?9", "chunk-b", "?zzz"]),
        ("I am sorry, I cannot rank these.", None),
        ("", None),
    ],
)
def test_parse_ordering(reply: str, expected: list[str] | None) -> None:
    assert parse_ordering(reply, IDS) == expected


def test_complete_order_drops_unknowns_and_repeats_and_appends_the_rest() -> None:
    order, unknown, repeated = complete_order(CANDIDATES, ["chunk-c", "?9", "chunk-c", "chunk-a"])
    assert order == ["chunk-c", "chunk-a", "chunk-b", "chunk-d"]
    assert (unknown, repeated) == (1, 1)


# -- the reranker over HTTP -------------------------------------------------------------


@pytest.mark.parametrize("cls", [OllamaLLM, OpenAILLM])
def test_canned_ordering_is_applied(cls: type) -> None:
    with WireServer(chat=lambda m: "[3, 1, 4, 2]") as srv:
        reranker = LLMReranker(cls(base_url=srv.url))
        assert isinstance(reranker, Reranker) and reranker.name == "llm"
        outcome = reranker.rerank("what does ERR-4012 mean", CANDIDATES)
        assert outcome == RerankOutcome(
            order=["chunk-c", "chunk-a", "chunk-d", "chunk-b"], reranked=True, reason=None
        )
        (request,) = srv.requests
        messages = request.body["messages"]
        prompt = messages[-1]["content"]
        assert messages[0]["role"] == "system" and "JSON array" in messages[0]["content"]
        assert "Query: what does ERR-4012 mean" in prompt
        assert labels_in(messages) == [1, 2, 3, 4]
        assert "[2] ERR-4012: checkout API rejects the cart" in prompt
        assert "chunk-a" not in prompt  # short labels, not chunk ids
        budget = request.body.get("max_tokens") or request.body["options"]["num_predict"]
        assert budget == 8 * 4 + 32
        temperature = request.body.get("temperature", request.body.get("options", {}).get("temperature"))
        assert temperature == 0.0


def test_bracket_chain_reply() -> None:
    with WireServer(chat=lambda m: "Ranking: [4] > [2] > [1] > [3]") as srv:
        outcome = LLMReranker(OllamaLLM(base_url=srv.url)).rerank("q", CANDIDATES)
    assert outcome.order == ["chunk-d", "chunk-b", "chunk-a", "chunk-c"]
    assert outcome.reranked is True


def test_invented_duplicated_and_missing_ids_are_repaired() -> None:
    with WireServer(chat=lambda m: "[4, 9, 4, 2]") as srv:
        outcome = LLMReranker(OpenAILLM(base_url=srv.url)).rerank("q", CANDIDATES)
    # 4 and 2 as ranked; 9 invented; the second 4 a repeat; 1 and 3 follow in fused order
    assert outcome.order == ["chunk-d", "chunk-b", "chunk-a", "chunk-c"]
    assert outcome.reranked is True
    assert outcome.reason == (
        "LLM ordering repaired: ignored 1 unknown candidate; ignored 1 repeat; "
        "2 left out kept their fused order after the ranked ones"
    )


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I'm sorry, but I can't help with that.", "no ordering found in the LLM's reply"),
        ("[7, 8, 12]", "the LLM's reply named no known candidate"),
    ],
)
def test_garbage_keeps_the_fused_order(reply: str, reason: str) -> None:
    with WireServer(chat=lambda m: reply) as srv:
        outcome = LLMReranker(OllamaLLM(base_url=srv.url)).rerank("q", CANDIDATES)
    assert outcome.order == IDS
    assert outcome.reranked is False
    assert outcome.reason is not None and outcome.reason.startswith(reason)


def test_timeout_falls_back_within_the_bound() -> None:
    with WireServer(chat=lambda m: "[2, 1]", delay=5.0) as srv:
        reranker = LLMReranker(OllamaLLM(base_url=srv.url, timeout=0.3, retries=0))
        started = time.perf_counter()
        outcome = reranker.rerank("q", CANDIDATES)
        elapsed = time.perf_counter() - started
    assert outcome.order == IDS and outcome.reranked is False
    assert outcome.reason is not None
    assert "ProviderUnavailableError" in outcome.reason and "timed out after 0.3s" in outcome.reason
    assert elapsed < 3.0  # one 0.3 s attempt, not the server's 5 s


@pytest.mark.parametrize(
    ("fault", "cause"),
    [({"status": 500}, "HTTP 500"), ({"malformed": True}, "malformed JSON")],
)
def test_provider_errors_fall_back(fault: dict, cause: str) -> None:
    with WireServer(**fault) as srv:
        outcome = LLMReranker(OpenAILLM(base_url=srv.url, retries=0)).rerank("q", CANDIDATES)
    assert (outcome.order, outcome.reranked) == (IDS, False)
    assert outcome.reason is not None and cause in outcome.reason


def test_unreachable_llm_falls_back() -> None:
    outcome = LLMReranker(OllamaLLM(base_url=closed_port(), retries=0)).rerank("q", CANDIDATES)
    assert (outcome.order, outcome.reranked) == (IDS, False)
    assert outcome.reason is not None and "unreachable" in outcome.reason


def test_zero_or_one_candidate_makes_no_call() -> None:
    with WireServer(chat=reverse_all) as srv:
        reranker = LLMReranker(OllamaLLM(base_url=srv.url))
        assert reranker.rerank("q", []) == RerankOutcome([], False, "no candidates to rerank")
        one = reranker.rerank("q", CANDIDATES[:1])
        assert (one.order, one.reranked) == (["chunk-a"], False)
        assert srv.requests == []


def test_long_candidates_are_cut_in_the_prompt() -> None:
    with WireServer(chat=reverse_all) as srv:
        long_text = "word " * 1000
        LLMReranker(OllamaLLM(base_url=srv.url), max_chars=100).rerank("q", [("x", long_text), ("y", "short")])
        line = srv.requests[0].body["messages"][-1]["content"].splitlines()[3]
    assert line.startswith("[1] word word") and line.endswith("…")
    assert len(line) == len("[1] ") + 100


def test_bad_reranker_settings() -> None:
    llm = OllamaLLM()
    with pytest.raises(ConfigError, match="max_chars must be >= 50, got 10"):
        LLMReranker(llm, max_chars=10)
    with pytest.raises(ConfigError, match="max_tokens must be >= 1"):
        LLMReranker(llm, max_tokens=0)


# -- end to end through Plait.search ----------------------------------------------------


@pytest.fixture
def indexed(tmp_path: Path) -> str:
    path = str(tmp_path / "plait.db")
    with Plait(path, embedder=FakeEmbedder(dimension=64)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
    return path


def _engine(path: str, **kwargs: object) -> Plait:
    return Plait(path, embedder=FakeEmbedder(dimension=64), **kwargs)  # type: ignore[arg-type]


QUERY = "ERR-4012 checkout session token"


def test_search_applies_the_llm_order_and_fills_rerank_ranks(indexed: str) -> None:
    with WireServer(chat=reverse_all) as srv, _engine(indexed, llm=OllamaLLM(base_url=srv.url)) as engine:
        plain = engine.search(QUERY, k=5)
        assert len(plain.hits) == 5  # the dense arm returns every chunk: 5 fused candidates
        assert plain.reranked is None and plain.rerank is None and plain.k_overfetch is None
        assert all(h.ranks.rerank is None for h in plain.hits) and "rerank" not in plain.timings_ms
        fused_docs = [doc_of(h) for h in plain.hits]

        result = engine.search(QUERY, k=3, rerank="llm", k_overfetch=5)
        (request,) = [r for r in srv.requests if r.path == "/api/chat"]
        assert labels_in(request.body["messages"]) == [1, 2, 3, 4, 5]

    # the LLM reversed the 5 fused candidates; the top 3 of that order survive the cut
    assert [doc_of(h) for h in result.hits] == fused_docs[::-1][:3]
    assert [h.ranks.fused for h in result.hits] == [5, 4, 3]
    assert [h.ranks.rerank for h in result.hits] == [1, 2, 3]
    assert (result.rerank, result.k_overfetch, result.reranked, result.rerank_reason) == ("llm", 5, True, None)
    assert "rerank" in result.timings_ms
    data = to_json(result)
    assert data["reranked"] is True and data["rerankReason"] is None and data["kOverfetch"] == 5
    assert data["hits"][0]["ranks"] == {"dense": data["hits"][0]["ranks"]["dense"],
                                        "lexical": data["hits"][0]["ranks"]["lexical"],
                                        "fused": 5, "rerank": 1}


def test_search_overfetch_pool_is_at_least_k(indexed: str) -> None:
    with WireServer(chat=reverse_all) as srv, _engine(indexed, llm=OllamaLLM(base_url=srv.url)) as engine:
        fused_docs = [doc_of(h) for h in engine.search(QUERY, k=4).hits]
        result = engine.search(QUERY, k=4, rerank="llm", k_overfetch=2)
        assert labels_in(srv.requests[-1].body["messages"]) == [1, 2, 3, 4]
    assert [doc_of(h) for h in result.hits] == fused_docs[::-1]
    assert result.k_overfetch == 2


def test_search_falls_back_to_the_fused_order_when_the_llm_fails(indexed: str) -> None:
    with WireServer(status=500) as srv, _engine(indexed, llm=OpenAILLM(base_url=srv.url, retries=0)) as engine:
        plain = engine.search(QUERY, k=3)
        result = engine.search(QUERY, k=3, rerank="llm")
    assert [h.chunk_id for h in result.hits] == [h.chunk_id for h in plain.hits]
    assert [h.ranks.fused for h in result.hits] == [1, 2, 3]
    assert all(h.ranks.rerank is None for h in result.hits)
    assert result.reranked is False and result.k_overfetch == 20
    assert result.rerank_reason is not None and "HTTP 500" in result.rerank_reason


def test_search_request_json_form_and_cli_names(indexed: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with WireServer(chat=reverse_all) as srv:
        monkeypatch.setenv("PLAIT_LLM", "ollama")
        monkeypatch.setenv("PLAIT_OLLAMA_URL", srv.url)
        with _engine(indexed) as engine:  # the LLM comes from the environment
            result = engine.search_request("default", {"query": QUERY, "k": 2, "rerank": "llm", "kOverfetch": 3})
        assert result.reranked is True and [h.ranks.rerank for h in result.hits] == [1, 2]
        assert [h.ranks.fused for h in result.hits] == [3, 2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rerank": "bm25"}, "rerank: Input should be 'llm' or 'cross-encoder'"),
        ({"rerank": "llm", "k_overfetch": 0}, "kOverfetch: Input should be greater than or equal to 1"),
        ({"rerank": "llm", "k_overfetch": 201}, "kOverfetch: Input should be less than or equal to 200"),
    ],
)
def test_bad_rerank_requests(indexed: str, kwargs: dict, message: str) -> None:
    with _engine(indexed, llm="ollama") as engine, pytest.raises(ValidationError, match=message):
        engine.search(QUERY, **kwargs)


def test_rerank_llm_without_an_llm_is_a_config_error(
    indexed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _engine(indexed) as engine, pytest.raises(ConfigError, match="rerank='llm' needs an LLM"):
        engine.search(QUERY, rerank="llm")
    monkeypatch.setenv("PLAIT_LLM", "ollama")  # an explicit llm="none" wins over the environment
    with _engine(indexed, llm="none") as engine, pytest.raises(ConfigError, match="PLAIT_LLM"):
        engine.search(QUERY, rerank="llm")


def test_rerank_cross_encoder_without_a_model_is_a_config_error(
    indexed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAIT_CROSS_ENCODER", raising=False)
    with _engine(indexed) as engine, pytest.raises(ConfigError, match="needs a model.*PLAIT_CROSS_ENCODER"):
        engine.search(QUERY, rerank="cross-encoder")


# -- CLI --------------------------------------------------------------------------------

runner = CliRunner()


def test_cli_rerank_llm(indexed: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with WireServer(chat=reverse_all) as srv:
        monkeypatch.setenv("PLAIT_OLLAMA_URL", srv.url)
        args = ["search", QUERY, "--store", indexed, "--embedder", "fake", "-k", "2"]
        plain = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
        result = runner.invoke(app, [*args, "--json", "--rerank", "llm", "--llm", "ollama", "--k-overfetch", "4"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert (data["rerank"], data["kOverfetch"], data["reranked"]) == ("llm", 4, True)
        assert [h["ranks"]["fused"] for h in data["hits"]] == [4, 3]
        assert [h["ranks"]["rerank"] for h in data["hits"]] == [1, 2]
        assert plain["reranked"] is None

        table = runner.invoke(app, [*args, "--rerank", "llm", "--llm", "ollama", "--debug"])
        assert table.exit_code == 0, table.output
        assert "rerank 1" in table.stdout and "rerank llm over the fused top 20 · reordered" in table.stdout
        assert "rerank" in table.stdout.split("timings (ms):")[1]

        srv.status = 500
        failed = runner.invoke(app, [*args, "--rerank", "llm", "--llm", "ollama"])
        assert failed.exit_code == 0, failed.output
        assert "fused order kept" in failed.stdout and "HTTP 500" in failed.stdout


def test_cli_rerank_errors_are_one_line(indexed: str) -> None:
    args = ["search", QUERY, "--store", indexed, "--embedder", "fake"]
    no_llm = runner.invoke(app, [*args, "--rerank", "llm", "--llm", "none"])
    assert no_llm.exit_code == 1 and "rerank='llm' needs an LLM" in no_llm.output
    bad = runner.invoke(app, [*args, "--rerank", "magic"])
    assert bad.exit_code == 1 and "Input should be 'llm' or 'cross-encoder'" in bad.output
