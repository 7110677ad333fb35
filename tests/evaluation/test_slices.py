"""The slice rule: identifier-bearing vs natural-language queries."""

from __future__ import annotations

import pytest

from plait.evaluation.slices import (
    IDENTIFIER,
    NATURAL,
    classify,
    identifier_tokens,
    slice_ids,
)


@pytest.mark.parametrize(
    "query",
    [
        "what does ERR-4012 mean",
        "SKU-88213-B out of stock",
        "upgrade to v3.11.2",
        "resolveTenantDB fails",
        "where is resolve_tenant_db defined?",
        "(ERR-4012).",
        "COVID-19 vaccines",
        "erro PIX-2024-88317 no pagamento",
    ],
)
def test_identifier_queries(query: str) -> None:
    assert classify(query) == IDENTIFIER


@pytest.mark.parametrize(
    "query",
    [
        "why was my payment declined",
        "Hello, world.",
        "the bank rejected my purchase (again)",
        "Não é possível configurar a conexão?",
        "UPPERCASE WORDS ONLY",
    ],
)
def test_natural_queries(query: str) -> None:
    assert classify(query) == NATURAL


def test_identifier_tokens_are_the_raw_tokens() -> None:
    assert identifier_tokens("is ERR-4012. related to v3.11.2?") == ["ERR-4012.", "v3.11.2?"]


def test_slice_ids_partition_in_order() -> None:
    queries = {"a": "ERR-4012 meaning", "b": "payment declined", "c": "fix 42", "d": "hello"}
    assert slice_ids(queries) == {
        "all": ["a", "b", "c", "d"],
        "identifier": ["a", "c"],
        "natural": ["b", "d"],
    }
