"""The search request every interface validates: the same model the HTTP API accepts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from plait.errors import ValidationError
from plait.types import FusionMethod, Model

__all__ = [
    "DEFAULT_K_OVERFETCH",
    "MAX_K",
    "MAX_OFFSET",
    "MAX_QUERY_CHARS",
    "SearchRequest",
    "validated",
]

MAX_QUERY_CHARS = 4096
MAX_K = 200
#: The deepest page start a request may ask for.
MAX_OFFSET = 1000
#: Fused candidates handed to a reranker when the request names none.
DEFAULT_K_OVERFETCH = 20
_METADATA_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class SearchRequest(Model):
    """A validated search request: the same model the HTTP API accepts."""

    query: str
    k: int = Field(default=8, ge=1, le=MAX_K)
    fusion: FusionMethod | None = None
    lexical_weight: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["auto"] | None = None
    rrf_k: int | None = Field(default=None, ge=1, le=10_000)
    overfetch: int | None = Field(default=None, ge=1, le=10_000)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    language_prior: bool | None = None
    """``adaptive``: False ignores the embedder's languages (see FusionSettings)."""
    scopes: list[str] | None = None
    metadata: dict[str, str | int | float | bool] | None = None
    rerank: Literal["llm", "cross-encoder"] | None = None
    k_overfetch: int = Field(default=DEFAULT_K_OVERFETCH, ge=1, le=MAX_K)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    qa_first: bool = False
    """Prefer a matching FAQ card (see :mod:`plait.refinery`); served by the Plait facade."""

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        if not value or not value.strip():
            raise ValueError("query is empty")
        if len(value) > MAX_QUERY_CHARS:
            raise ValueError(f"query has {len(value)} characters; the limit is {MAX_QUERY_CHARS}")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if not key or not set(key) <= _METADATA_KEY_CHARS:
                raise ValueError(
                    f"metadata filter key {key!r} may only hold letters, digits, '_' and '-'"
                )
        return value


def validated(request: SearchRequest | Mapping[str, Any]) -> SearchRequest:
    """``request`` as a :class:`SearchRequest`; a camelCase mapping is validated (one clear message)."""
    if isinstance(request, SearchRequest):
        return request
    try:
        return SearchRequest.model_validate(dict(request))
    except Exception as exc:  # pydantic.ValidationError → one clear message
        errors = getattr(exc, "errors", None)
        if callable(errors):
            parts = [f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in errors()]
            raise ValidationError("; ".join(parts)) from None
        raise ValidationError(str(exc)) from None
