"""Typed fusion (issue 19): each method owns its knobs; a knob it does not take is an error.

Scores are checked against the formulas by hand from each hit's per-arm ranks and scores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_served import Served, serve_engine
from typer.testing import CliRunner

from plait.cli import app
from plait.errors import ValidationError
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.types import to_json

QUERY = "ERR-4012 checkout session token"


@pytest.fixture
def indexed(engine: Plait) -> Plait:
    engine.index_documents(documents(ARTICLE_DOCS))
    return engine


def test_an_rrf_object_owns_k_and_the_lexical_weight(indexed: Plait) -> None:
    fusion = {"method": "rrf", "k": 10, "lexicalWeight": 0.75}
    result = indexed.search_request("default", {"query": QUERY, "k": 5, "fusion": fusion})
    assert result.hits
    for hit in result.hits:  # weights 2·0.75 = 1.5 (lexical), 2·0.25 = 0.5 (dense), k = 10
        expected = sum(w / (10 + r) for w, r in ((1.5, hit.ranks.lexical), (0.5, hit.ranks.dense)) if r is not None)
        assert hit.score == pytest.approx(expected)
    data = to_json(result)
    assert data["fusionAsked"] == {"fusion": fusion}
    assert data["fusionDecided"]["method"] == "rrf" and data["fusionDecided"]["methodFrom"] == "request"
    assert data["fusionDecided"]["parameters"] == {"k": 10, "lexicalWeight": 0.75, "overfetch": 50}
    assert data["fusion"]["rrfK"] == 10 and data["fusion"]["lexicalWeight"] == 0.75  # the old echo stays


def test_a_weighted_object_owns_its_weights_and_threshold(indexed: Plait) -> None:
    fusion = {"method": "weighted", "vectorWeight": 0.3, "lexicalWeight": 0.7, "threshold": 0.0}
    result = indexed.search_request("default", {"query": QUERY, "k": 5, "fusion": fusion})
    best = max(h.lexical_score or 0.0 for h in result.hits)
    for hit in result.hits:  # 0.3·cosine + 0.7·BM25/best
        expected = 0.3 * max(0.0, hit.vector_score or 0.0) + 0.7 * ((hit.lexical_score or 0.0) / best)
        assert hit.score == pytest.approx(expected)
    assert result.fusion_decided is not None
    assert result.fusion_decided.parameters == {
        "vectorWeight": 0.3, "lexicalWeight": 0.7, "threshold": 0.0, "overfetch": 50
    }


def test_minmax_object_dense_weight_is_the_weight_used(indexed: Plait) -> None:
    result = indexed.search_request(
        "default", {"query": QUERY, "k": 3, "fusion": {"method": "minmax", "denseWeight": 0.25}}
    )
    decided = result.fusion_decided
    assert decided is not None and decided.dense_weight_used == 0.25
    assert decided.reason == "minmax: fixed dense weight 0.25 (lexical 0.75)"


def test_the_default_adaptive_says_what_was_asked_and_what_was_decided(indexed: Plait) -> None:
    result = indexed.search("why was my card payment declined", k=3)
    assert result.fusion_asked == {}
    decided = result.fusion_decided
    assert decided is not None and decided.method == "adaptive" and decided.method_from == "default"
    assert decided.parameters == {
        "denseWeight": 0.4, "denseWeightFrom": "settings", "languagePrior": True, "overfetch": 50
    }
    assert decided.dense_weight_used == result.fusion.dense_weight_used is not None
    assert decided.reason == result.fusion.fusion_reason and decided.query_language == "en"
    assert decided.lexical_weight_reason is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"lexical_weight": 0.1},
            "lexicalWeight does not apply to fusion 'adaptive' (the default): it takes languagePrior; "
            "overfetch applies to every method",
        ),
        ({"lexical_weight": "auto"}, "lexicalWeight does not apply to fusion 'adaptive' (the default)"),
        (
            {"fusion": "rrf", "threshold": 0.3},
            "threshold does not apply to fusion 'rrf': it takes rrfK, lexicalWeight; overfetch applies to every method",
        ),
        (
            {"fusion": "minmax", "rrf_k": 3, "language_prior": False},
            "rrfK, languagePrior do not apply to fusion 'minmax': it takes no knobs; overfetch applies to every method",
        ),
        (
            {"fusion": "weighted", "language_prior": True},
            "languagePrior does not apply to fusion 'weighted': it takes threshold",
        ),
    ],
)
def test_a_knob_the_method_does_not_take_is_refused(indexed: Plait, options: dict, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        indexed.search("ERR-4012", **options)
    assert message in str(caught.value)
    with pytest.raises(ValidationError, match="not apply to fusion"):
        indexed.explain("ERR-4012", doc="kb-101", **options)


def test_object_knobs_are_the_methods_own(indexed: Plait) -> None:
    own = r"fusion: k does not apply to fusion 'adaptive' \(fusion object\): it takes denseWeight, languagePrior"
    with pytest.raises(ValidationError, match=own):
        indexed.search_request("default", {"query": "x", "fusion": {"method": "adaptive", "k": 3}})
    with pytest.raises(ValidationError, match="rrfK given beside a fusion object: put the knobs inside it"):
        indexed.search_request("default", {"query": "x", "fusion": {"method": "rrf"}, "rrfK": 3})
    # an object without a method holds knobs for the collection's method (here the default)
    with pytest.raises(ValidationError, match=r"k does not apply to fusion 'adaptive' \(the default\), which takes"):
        indexed.search_request("default", {"query": "x", "fusion": {"k": 3}})
    with pytest.raises(ValidationError, match="fusion: a fusion object's method is 'rrf', .* \\(got 'mixed'\\)"):
        indexed.search_request("default", {"query": "x", "fusion": {"method": "mixed"}})


def test_a_whole_request_error_is_its_message_alone(indexed: Plait) -> None:
    """Knobs that do not fit the method are no one field's error: the engine said
    'request: threshold does not apply …' (MCP and the CLI passed it on), HTTP 'body: …'."""
    with pytest.raises(ValidationError) as caught:
        indexed.search_request("default", {"query": "ERR-4012", "fusion": "rrf", "threshold": 0.3})
    assert str(caught.value) == (
        "threshold does not apply to fusion 'rrf': it takes rrfK, lexicalWeight; overfetch applies to every method"
    )


def test_overfetch_inside_a_fusion_object_is_told_it_goes_beside(indexed: Plait) -> None:
    """overfetch is a request field beside fusion, never a fusion object's knob: put inside
    one, it was refused with 'it takes k, lexicalWeight (and overfetch)'."""
    with pytest.raises(ValidationError) as caught:
        indexed.search_request("default", {"query": "ERR-4012", "fusion": {"method": "rrf", "overfetch": 5}})
    assert str(caught.value) == (
        "fusion: overfetch does not apply to fusion 'rrf' (fusion object): it takes k, lexicalWeight; "
        "overfetch goes beside fusion, not inside it"
    )
    beside = indexed.search_request("default", {"query": "ERR-4012", "fusion": {"method": "rrf"}, "overfetch": 5})
    assert beside.fusion_decided is not None
    assert beside.fusion_decided.parameters == {"k": 60, "lexicalWeight": 0.5, "overfetch": 5}


def test_the_collections_saved_method_decides_which_knobs_apply(indexed: Plait) -> None:
    indexed.store.update_settings("default", {"fusion": {"method": "weighted"}})
    result = indexed.search("ERR-4012", k=3, threshold=0.5)
    assert result.fusion.method == "weighted" and result.fusion.threshold == 0.5
    assert result.fusion_decided is not None and result.fusion_decided.method_from == "collection"
    saved = "lexicalWeight does not apply to fusion 'weighted' \\(the collection's method\\)"
    with pytest.raises(ValidationError, match=saved):
        indexed.search("ERR-4012", lexical_weight=0.3)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_engine(tmp_path, auth=False) as s:
        yield s


def test_an_object_without_a_method_is_the_collections_method_with_its_knobs(served: Served) -> None:
    """``{"denseWeight": 0.25}`` (``plait search --dense-weight 0.25``) was refused: 'a fusion
    object needs a method'. It is the collection's saved method (else adaptive) with the
    knob, the same search as naming that method; over HTTP as in Python and on the CLI."""

    def post(body: dict) -> httpx.Response:
        return httpx.post(served.url + "/v1/collections/a/search", json={"query": QUERY, "k": 5, **body}, timeout=30)

    def ranked(data: dict) -> list[tuple[str, float]]:
        return [(h["chunkId"], h["score"]) for h in data["hits"]]

    served.engine.store.update_settings("a", {"fusion": {"method": "minmax"}})
    bare = post({"fusion": {"denseWeight": 0.25}})
    named = post({"fusion": {"method": "minmax", "denseWeight": 0.25}})
    assert bare.status_code == named.status_code == 200
    data = bare.json()
    assert data["fusionAsked"] == {"fusion": {"denseWeight": 0.25}}
    decided = data["fusionDecided"]
    assert (decided["method"], decided["methodFrom"], decided["parameters"]) == (
        "minmax", "collection", {"denseWeight": 0.25, "overfetch": 50})
    assert decided["reason"] == "minmax: fixed dense weight 0.25 (lexical 0.75)"
    assert ranked(data) == ranked(named.json()) and data["hits"]
    assert named.json()["fusionDecided"]["methodFrom"] == "request"

    served.engine.store.update_settings("a", {"fusion": {"method": "rrf"}})
    refused = post({"fusion": {"denseWeight": 0.25}})
    assert refused.status_code == 422
    assert refused.json()["error"] == (
        "denseWeight does not apply to fusion 'rrf' (the collection's method), which takes k and lexicalWeight "
        "(CLI: --lexical-weight); name a method that takes denseWeight: 'minmax', 'dbsf' or 'adaptive', "
        'e.g. fusion {"method": "minmax", "denseWeight": 0.25} (CLI: --fusion minmax --dense-weight 0.25)'
    )
    rrf = post({"fusion": {"lexicalWeight": 0.75, "k": 10}}).json()  # what rrf takes is taken
    assert (rrf["fusionDecided"]["methodFrom"], rrf["fusionDecided"]["parameters"]) == (
        "collection", {"k": 10, "lexicalWeight": 0.75, "overfetch": 50})
    for hit in rrf["hits"]:  # weights 2·0.75 = 1.5 (lexical), 2·0.25 = 0.5 (dense), k = 10
        ranks = ((1.5, hit["ranks"]["lexical"]), (0.5, hit["ranks"]["dense"]))
        assert hit["score"] == pytest.approx(sum(w / (10 + r) for w, r in ranks if r is not None))
    beside = post({"fusion": {"lexicalWeight": 0.75}, "rrfK": 10})
    assert (beside.status_code, beside.json()["error"]) == (
        422,
        "rrfK given beside a fusion object: put the knobs inside it "
        "(fusion 'rrf' (the collection's method) takes k, lexicalWeight)",
    )
    unknown = post({"fusion": {"denseWeigth": 0.25}})
    assert (unknown.status_code, unknown.json()["error"]) == (
        422,
        "fusion: denseWeigth is not a knob of any fusion method (between them they take k, lexicalWeight, "
        "vectorWeight, threshold, denseWeight, languagePrior)",
    )


def test_a_knob_inside_a_fusion_object_is_a_json_number(served: Served) -> None:
    """The top-level numbers refused true and NaN (5bc8082), a fusion object's knobs did not:
    {"method": "minmax", "denseWeight": true} ran minmax at 1.0, {"method": "rrf", "k": true}
    at k 1, and NaN was said to be 'not less than or equal to 1'."""
    refused = {
        '{"method": "minmax", "denseWeight": true}': "fusion: denseWeight: expected a number, got true",
        '{"method": "rrf", "k": true}': "fusion: k: expected a number, got true",
        '{"method": "weighted", "threshold": false}': "fusion: threshold: expected a number, got false",
        '{"denseWeight": NaN}': "fusion: denseWeight: expected a finite number, got nan",
        '{"method": "rrf", "lexicalWeight": "Infinity"}': "fusion: lexicalWeight: expected a finite number, got inf",
    }
    for fusion, message in refused.items():
        response = httpx.post(
            served.url + "/v1/collections/a/search",
            content='{"query": "ERR-4012", "fusion": ' + fusion + "}",
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert (response.status_code, response.json()["error"]) == (422, message), fusion
    kept = httpx.post(  # a boolean knob stays a boolean, 'auto' a string
        served.url + "/v1/collections/a/search",
        json={"query": "ERR-4012", "fusion": {"method": "adaptive", "languagePrior": False, "denseWeight": 0.5}},
        timeout=30,
    )
    assert kept.status_code == 200 and kept.json()["fusionDecided"]["parameters"]["languagePrior"] is False
    auto = httpx.post(
        served.url + "/v1/collections/a/search",
        json={"query": "ERR-4012", "fusion": {"method": "rrf", "lexicalWeight": "auto"}},
        timeout=30,
    )
    assert auto.status_code == 200 and auto.json()["fusion"]["lexicalWeightMode"] == "auto"


def test_http_422_and_cli_exit_1_name_the_method_and_its_knobs(served: Served, tmp_path: Path) -> None:
    response = httpx.post(
        served.url + "/v1/collections/a/search", json={"query": "ERR-4012", "lexicalWeight": 0.9}, timeout=30
    )
    assert response.status_code == 422
    assert "lexicalWeight does not apply to fusion 'adaptive'" in response.json()["error"]
    assert "it takes languagePrior" in response.json()["error"]
    typed = httpx.post(
        served.url + "/v1/collections/a/search",
        json={"query": "ERR-4012", "k": 2, "fusion": {"method": "rrf", "k": 5}},
        timeout=30,
    )
    assert typed.status_code == 200 and typed.json()["fusionDecided"]["parameters"]["k"] == 5

    store = str(tmp_path / "cli.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
    runner = CliRunner()
    bad = runner.invoke(app, ["search", "ERR-4012", "--store", store, "--lexical-weight", "0.3"])
    assert bad.exit_code == 1
    text = " ".join(bad.output.split())  # one message (the console may wrap it)
    assert text.count("error:") == 1 and "Traceback" not in text
    assert "lexicalWeight does not apply to fusion 'adaptive' (the default): it takes languagePrior" in text
    ok = runner.invoke(
        app, ["search", "ERR-4012", "--store", store, "--fusion", "rrf", "--lexical-weight", "0.3", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["fusionAsked"] == {"fusion": "rrf", "lexicalWeight": 0.3}
