"""Identifier-aware fusion: ``lexical_weight="auto"`` tilts RRF towards BM25 for queries
that carry identifiers.

An exact identifier (``ERR-4012``, ``SKU-88213-B``, ``resolveTenantDB``, ``v3.11.2``)
carries little meaning an embedding can place, so the dense arm fills its list with
look-alike neighbours; BM25 finds the one chunk holding the rare token. With ``auto``
the search service picks, per query:

* ``auto_identifier_weight`` (default 0.7) when the query has at least one
  identifier-like token, else
* ``auto_default_weight`` (default 0.5, plain RRF).

A raw token (whitespace-separated, surrounding punctuation stripped) is
*identifier-like* when it

1. mixes letters and digits (``ERR4012``, ``e5``, ``SKU-88213-B``, ``v3``);
2. is camelCase — a lowercase letter directly followed by an uppercase one
   (``resolveTenantDB``);
3. has an internal ``_`` (``resolve_tenant_db``);
4. has an internal ``.`` between letters or digits, unless every dotted part is a
   single letter (``e.g.``, ``U.S.`` are abbreviations, ``plait.search`` is not);
5. has an internal ``-`` with a part in capitals of two or more letters
   (``X-Request-ID``, ``SKU-AB``).

Pure numbers (``1964``, ``1,000``) and prose hyphenation (``well-known``,
``chama-se``) are *not* identifiers: they are common in natural-language questions,
and tilting those towards BM25 would be a guess, not a rule. This is narrower than
the evaluation slices' rule (:mod:`plait.evaluation.slices`, which counts any digit
or internal separator) on purpose; the figures in ``benchmarks/results/auto_weight.md``
are measured with this classifier.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from plait.types import FusionSettings, LexicalWeightMode

__all__ = ["WeightChoice", "choose_lexical_weight", "identifier_like", "identifier_tokens", "resolve_weight"]

_EDGE_RE = re.compile(r"^[\W_]+|[\W_]+$")
_CAMEL_RE = re.compile(r"[a-z][A-Z]")
_INNER_DOT_RE = re.compile(r"[^\W_]\.[^\W_]")
_INNER_UNDERSCORE_RE = re.compile(r"[^\W_]_[^\W_]")


def _strip(raw: str) -> str:
    folded = unicodedata.normalize("NFKD", raw)
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return _EDGE_RE.sub("", folded)


def identifier_like(raw_token: str) -> bool:
    """True if a raw query token is identifier-like (see the module docstring)."""
    token = _strip(raw_token)
    if not token:
        return False
    has_digit = any(c.isdigit() for c in token)
    has_letter = any(c.isalpha() for c in token)
    if has_digit and has_letter:
        return True
    if _CAMEL_RE.search(token) or _INNER_UNDERSCORE_RE.search(token):
        return True
    if _INNER_DOT_RE.search(token):
        parts = [p for p in token.split(".") if p]
        if not all(len(p) == 1 and p.isalpha() for p in parts):
            return True
    if "-" in token.strip("-"):
        parts = [p for p in token.split("-") if p]
        if any(len(p) >= 2 and p.isalpha() and p.isupper() for p in parts):
            return True
    return False


def identifier_tokens(query: str) -> list[str]:
    """The identifier-like raw tokens of ``query``, in order (edge punctuation stripped)."""
    return [_strip(raw) for raw in query.split() if identifier_like(raw)]


@dataclass(frozen=True, slots=True)
class WeightChoice:
    """The lexical weight chosen for one query, and why."""

    weight: float
    identifiers: tuple[str, ...]
    reason: str


def choose_lexical_weight(
    query: str, *, identifier_weight: float = 0.7, default_weight: float = 0.5
) -> WeightChoice:
    """``identifier_weight`` if ``query`` has an identifier-like token, else ``default_weight``.

    >>> choose_lexical_weight("what does ERR-4012 mean").weight
    0.7
    >>> choose_lexical_weight("the bank rejected my purchase").weight
    0.5
    """
    found = tuple(dict.fromkeys(identifier_tokens(query)))
    if found:
        shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
        return WeightChoice(
            weight=identifier_weight,
            identifiers=found,
            reason=f"identifier-like tokens ({shown}): auto identifier weight {identifier_weight}",
        )
    return WeightChoice(
        weight=default_weight,
        identifiers=(),
        reason=f"no identifier-like token: auto default weight {default_weight}",
    )


def resolve_weight(settings: FusionSettings, query: str) -> FusionSettings:
    """``settings`` with ``lexical_weight`` chosen for ``query`` when the mode is auto."""
    if settings.lexical_weight_mode != LexicalWeightMode.AUTO:
        return settings
    choice = choose_lexical_weight(
        query,
        identifier_weight=settings.auto_identifier_weight,
        default_weight=settings.auto_default_weight,
    )
    return settings.model_copy(
        update={"lexical_weight": choice.weight, "lexical_weight_reason": choice.reason}
    )
