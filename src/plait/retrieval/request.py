"""The search request every interface validates: the same model the HTTP API accepts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from plait.errors import ValidationError
from plait.retrieval.fusion_choice import (
    CHOICES,
    REQUEST_KNOBS,
    FusionChoice,
    SavedMethodFusion,
    _Choice,
    first_error,
    knob_error,
)
from plait.retrieval.numbers import plain_number
from plait.types import FusionMethod, Model, SearchMode

__all__ = [
    "DEFAULT_K_OVERFETCH",
    "MAX_K",
    "MAX_OFFSET",
    "MAX_QUERY_CHARS",
    "SearchRequest",
    "plain_number",
    "validated",
    "validation_message",
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
    mode: SearchMode = SearchMode.HYBRID
    """``hybrid`` (both arms, fused), ``lexical`` (the embedder is never called) or
    ``vector`` (BM25 never runs)."""
    fusion: FusionMethod | FusionChoice | SavedMethodFusion | None = None
    """A method name (its knobs as the top-level fields below), a method's own object, or
    an object without a method: knobs for the collection's saved method (see
    :mod:`plait.retrieval.fusion_choice`); None: the collection's saved method."""
    lexical_weight: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["auto"] | None = None
    """``rrf`` only."""
    rrf_k: int | None = Field(default=None, ge=1, le=10_000)
    """``rrf`` only."""
    overfetch: int | None = Field(default=None, ge=1, le=10_000)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """``weighted`` only."""
    language_prior: StrictBool | None = None
    """``adaptive`` only: False ignores the embedder's languages (see FusionSettings)."""
    scopes: list[str] | None = None
    metadata: dict[str, str | int | float | bool] | None = None
    rerank: Literal["llm", "cross-encoder"] | None = None
    k_overfetch: int = Field(default=DEFAULT_K_OVERFETCH, ge=1, le=MAX_K)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    max_per_source: int | None = Field(default=None, ge=1, le=MAX_K)
    """At most this many chunks of one source file or session in the hits, applied after
    fusion and before the cut (see :mod:`plait.retrieval.diversity`)."""
    group_by: Literal["source"] | None = None
    """``source``: one entry per source with its best chunks (``maxPerSource`` of them,
    default 3); ``k`` and ``offset`` then count sources."""
    qa_first: StrictBool = False
    """Prefer a matching FAQ card (see :mod:`plait.refinery`); served by the Plait facade."""

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        if not value or not value.strip():
            raise ValueError("query is empty")
        if len(value) > MAX_QUERY_CHARS:
            raise ValueError(f"query has {len(value)} characters; the limit is {MAX_QUERY_CHARS}")
        return value

    @field_validator(
        "k", "rrf_k", "overfetch", "k_overfetch", "offset", "max_per_source", "threshold", "lexical_weight",
        mode="before",
    )
    @classmethod
    def _plain_number(cls, value: Any) -> Any:
        return plain_number(value)

    @field_validator("fusion", mode="before")
    @classmethod
    def _fusion(cls, value: Any) -> Any:
        """A method name or a fusion object (with or without its method), with one clear error."""
        names = [repr(m.value) for m in FusionMethod]
        methods = f"{', '.join(names[:-1])} or {names[-1]}"
        if value is None or isinstance(value, (FusionMethod, _Choice, SavedMethodFusion)):
            return value
        if isinstance(value, str):
            try:
                return FusionMethod(value)
            except ValueError:
                raise ValueError(f"Input should be {methods}") from None
        if isinstance(value, Mapping):
            method = value.get("method")
            model: type[_Choice] | type[SavedMethodFusion] | None = SavedMethodFusion
            if method is not None:  # none: the knobs are for the collection's saved method
                model = next((CHOICES[m] for m in CHOICES if m.value == method), None)
            if model is None:
                raise ValueError(
                    f"a fusion object's method is {methods}, or left out for the collection's own (got {method!r})"
                )
            try:
                return model.model_validate(dict(value))
            except PydanticValidationError as exc:
                raise ValueError(first_error(exc)) from None
        raise ValueError(f"fusion is a method name ({methods}) or a fusion object")

    @property
    def fusion_method(self) -> FusionMethod | None:
        """The method the request names (None: the collection's saved one)."""
        if self.fusion is None or isinstance(self.fusion, FusionMethod):
            return self.fusion
        if isinstance(self.fusion, SavedMethodFusion):
            return None
        return FusionMethod(self.fusion.method)

    def fusion_knobs(self) -> list[str]:
        """The top-level fusion knobs the request gives (camelCase)."""
        given = (
            ("rrfK", self.rrf_k),
            ("lexicalWeight", self.lexical_weight),
            ("threshold", self.threshold),
            ("languagePrior", self.language_prior),
        )
        return [name for name, value in given if value is not None]

    def knob_problem(self, method: FusionMethod, *, where: str = "") -> str | None:
        """Why the top-level knobs do not fit ``method`` (None: they do)."""
        given = self.fusion_knobs()
        if given and self.fusion is not None and not isinstance(self.fusion, FusionMethod):
            return (
                f"{', '.join(given)} given beside a fusion object: put the knobs inside it "
                f"(fusion {method.value!r}{where} takes {', '.join(CHOICES[method].KNOBS) or 'no knobs'})"
            )
        bad = [name for name in given if name not in REQUEST_KNOBS[method]]
        return knob_error(method, bad, REQUEST_KNOBS[method], where=where) if bad else None

    @model_validator(mode="after")
    def _knobs_fit_the_method(self) -> SearchRequest:
        method = self.fusion_method
        problem = self.knob_problem(method) if method is not None else None
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if not key or not set(key) <= _METADATA_KEY_CHARS:
                raise ValueError(
                    f"metadata filter key {key!r} may only hold letters, digits, '_' and '-'"
                )
        return value


def validation_message(exc: PydanticValidationError) -> str:
    """Every error of a request model's ``exc`` as ``field: message``, joined by ``; ``
    (pydantic's ``Value error,`` dropped). An error about the whole request (knobs that do
    not fit the fusion method) is its message alone: it names its fields itself, and reads
    as over HTTP (:func:`plait.api.messages.describe_validation`)."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{field}: {message}" if field else message)
    return "; ".join(parts)


def validated(request: SearchRequest | Mapping[str, Any]) -> SearchRequest:
    """``request`` as a :class:`SearchRequest`; a camelCase mapping is validated (one clear message)."""
    if isinstance(request, SearchRequest):
        return request
    try:
        return SearchRequest.model_validate(dict(request))
    except PydanticValidationError as exc:  # → one clear message
        raise ValidationError(validation_message(exc)) from None
    except (TypeError, ValueError) as exc:  # not a mapping at all
        raise ValidationError(str(exc)) from None
