"""Query slices: identifier-bearing queries versus natural-language ones.

The rule (documented in ``docs/evaluation.md``): split the query on whitespace into
raw tokens; the query is **identifier-bearing** if at least one raw token is an
identifier by :func:`plait.analysis.is_identifier` — the same rule the lexical arm
uses to keep a token whole — and **natural language** otherwise.

``is_identifier`` ignores surrounding punctuation and calls a token an identifier
when it holds a digit, an internal ``-``, ``_`` or ``.``, or a lowercase letter
directly followed by an uppercase one (camelCase). So ``ERR-4012``, ``v3.11.2``,
``resolveTenantDB`` and also ``COVID-19``, ``IL-6`` or ``1,000`` make a query
identifier-bearing; ``Hello,`` or ``(end)`` do not.
"""

from __future__ import annotations

from collections.abc import Mapping

from plait.analysis import is_identifier

__all__ = ["ALL", "IDENTIFIER", "NATURAL", "SLICES", "classify", "identifier_tokens", "slice_ids"]

IDENTIFIER = "identifier"
NATURAL = "natural"
ALL = "all"
#: The slices every metric is reported for, in report order.
SLICES: tuple[str, ...] = (ALL, IDENTIFIER, NATURAL)


def identifier_tokens(query: str) -> list[str]:
    """The whitespace-separated raw tokens of ``query`` that are identifiers."""
    return [token for token in query.split() if is_identifier(token)]


def classify(query: str) -> str:
    """:data:`IDENTIFIER` if any raw token of ``query`` is an identifier, else :data:`NATURAL`."""
    return IDENTIFIER if identifier_tokens(query) else NATURAL


def slice_ids(queries: Mapping[str, str]) -> dict[str, list[str]]:
    """Query ids per slice (``all``, ``identifier``, ``natural``), in the given order."""
    out: dict[str, list[str]] = {name: [] for name in SLICES}
    for qid, text in queries.items():
        out[ALL].append(qid)
        out[classify(text)].append(qid)
    return out
