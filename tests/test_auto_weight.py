"""``lexicalWeight: "auto"``: the identifier classifier, the weight it picks, and the echo."""

from __future__ import annotations

import pydantic
import pytest

from plait.autoweight import (
    choose_lexical_weight,
    identifier_like,
    identifier_tokens,
    resolve_weight,
)
from plait.errors import ValidationError
from plait.search import SearchRequest
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.types import FusionSettings, LexicalWeightMode, to_json


@pytest.mark.parametrize(
    "token",
    ["ERR-4012", "ERR-4012.", "SKU-88213-B", "PIX-2024-88317", "resolveTenantDB", "v3.11.2",
     "resolve_tenant_db", "plait.search", "e5", "(ERR4012)", "X-Request-ID", "COVID-19", "`TRANSFER_IN`"],
)
def test_identifiers(token: str) -> None:
    assert identifier_like(token)


@pytest.mark.parametrize(
    "token",
    ["payment", "Hello,", "1964", "1,000", "well-known", "chama-se", "e.g.", "U.S.", "Não", "(end)", "---", ""],
)
def test_not_identifiers(token: str) -> None:
    assert not identifier_like(token)


def test_identifier_tokens_strip_edges_in_order() -> None:
    assert identifier_tokens("why does ERR-4012. follow resolveTenantDB, in 2024?") == ["ERR-4012", "resolveTenantDB"]


def test_choice_and_reason() -> None:
    ident = choose_lexical_weight("what does ERR-4012 mean", identifier_weight=0.8, default_weight=0.4)
    assert (ident.weight, ident.identifiers) == (0.8, ("ERR-4012",))
    assert ident.reason == "identifier-like tokens (ERR-4012): auto identifier weight 0.8"
    prose = choose_lexical_weight("the bank rejected my purchase in 2024")
    assert (prose.weight, prose.identifiers) == (0.5, ())
    assert prose.reason == "no identifier-like token: auto default weight 0.5"


def test_resolve_weight_leaves_fixed_settings_alone() -> None:
    fixed = FusionSettings(lexical_weight=0.3)
    assert resolve_weight(fixed, "ERR-4012") is fixed
    auto = FusionSettings(lexical_weight_mode=LexicalWeightMode.AUTO, auto_identifier_weight=0.9)
    assert resolve_weight(auto, "ERR-4012").lexical_weight == 0.9
    assert resolve_weight(auto, "card declined").lexical_weight == 0.5


def test_request_accepts_a_number_or_auto_only() -> None:
    assert SearchRequest.model_validate({"query": "x", "lexicalWeight": "auto"}).lexical_weight == "auto"
    assert SearchRequest.model_validate({"query": "x", "lexicalWeight": 0.25}).lexical_weight == 0.25
    for bad in ("heavy", 1.5, -0.1):
        with pytest.raises(pydantic.ValidationError):
            SearchRequest.model_validate({"query": "x", "lexicalWeight": bad})


def test_search_auto_echoes_the_weight_used_and_fuses_with_it(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.search("ERR-4012 session", k=5, lexical_weight="auto", fusion="rrf")
    data = to_json(result)["fusion"]
    assert data["lexicalWeight"] == 0.7 and data["lexicalWeightMode"] == "auto"
    assert data["lexicalWeightReason"] == "identifier-like tokens (ERR-4012): auto identifier weight 0.7"
    # RRF with weights 2*0.7 = 1.4 (lexical) and 2*0.3 = 0.6 (dense)
    for hit in result.hits:
        expected = sum(
            w / (60 + r) for w, r in ((1.4, hit.ranks.lexical), (0.6, hit.ranks.dense)) if r is not None
        )
        assert hit.score == pytest.approx(expected)
    prose = engine.search("bank rejected purchase", k=3, lexical_weight="auto", fusion="rrf").fusion
    assert (prose.lexical_weight, prose.lexical_weight_mode) == (0.5, LexicalWeightMode.AUTO)
    fixed = engine.search("ERR-4012", k=3, lexical_weight=0.2, fusion="rrf").fusion
    assert (fixed.lexical_weight, fixed.lexical_weight_mode, fixed.lexical_weight_reason) == (0.2, "fixed", None)
    with pytest.raises(ValidationError, match="lexicalWeight"):
        engine.search("ERR-4012", lexical_weight="heavy")
    # issue 19: under the default adaptive fusion the lexical weight is not used, so it is refused
    for weight in (0.1, 0.9, "auto"):
        with pytest.raises(ValidationError, match="lexicalWeight does not apply to fusion 'adaptive'"):
            engine.search("ERR-4012", k=3, lexical_weight=weight)


def test_collection_default_can_be_auto(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    engine.store.update_settings(
        "default", {"fusion": {"method": "rrf", "lexicalWeightMode": "auto", "autoIdentifierWeight": 0.9}}
    )
    assert engine.search("SKU-88213-B", k=1).fusion.lexical_weight == 0.9
    assert engine.search("SKU-88213-B", k=1, lexical_weight=0.4).fusion.lexical_weight_mode == "fixed"
