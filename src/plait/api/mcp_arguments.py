"""The MCP tools' arguments that are HTTP request fields, and the request they make.

``search``, ``explain`` and ``ask`` take the fields of the HTTP API's bodies
(:class:`~plait.retrieval.request.SearchRequest`, :class:`~plait.ask.AskRequest`) under
snake_case names (``rrf_k`` for ``rrfK``). Each such argument is typed here as *any value*
with the HTTP API's own schema for its field (an agent sees the same limits and choices):
the SDK passes it on as given, and :func:`request` builds the HTTP request model from the
arguments as FastAPI builds it from a body. So every check — ``true`` for a number, NaN,
ranges, ``'auto'``, fusion knobs, metadata filters — is the model's, and a bad value is the
422's own one-line message (:func:`~plait.api.messages.describe_validation`), the field
named as the tool's argument by :func:`plait.api.mcp_strict.snake_named`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, WithJsonSchema
from pydantic import ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from plait.api.messages import describe_validation
from plait.ask import AskRequest
from plait.errors import ValidationError
from plait.retrieval.request import SearchRequest

__all__ = [
    "AskK",
    "Fusion",
    "GroupBy",
    "K",
    "KOverfetch",
    "LanguagePrior",
    "LexicalWeight",
    "MaxPerSource",
    "Metadata",
    "MinCosine",
    "MinTermCoverage",
    "Mode",
    "Offset",
    "Overfetch",
    "QaFirst",
    "Rerank",
    "RrfK",
    "Scopes",
    "Threshold",
    "request",
]

R = TypeVar("R", bound=BaseModel)


def _inlined(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with each ``$ref`` to ``defs`` replaced by its definition (no discriminator:
    its mapping names ``$defs`` a tool argument's schema does not have)."""
    if isinstance(schema, list):
        return [_inlined(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return _inlined(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    return {key: _inlined(value, defs) for key, value in schema.items() if key != "discriminator"}


@cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True)


def _field(model: type[BaseModel], name: str) -> WithJsonSchema:
    """The HTTP API's schema of ``model``'s field ``name`` (camelCase), self-contained.

    >>> _field(SearchRequest, "rrfK").json_schema["anyOf"][0]
    {'maximum': 10000, 'minimum': 1, 'type': 'integer'}
    """
    schema = _schema(model)
    return WithJsonSchema(_inlined(schema["properties"][name], schema.get("$defs", {})))


K = Annotated[Any, _field(SearchRequest, "k")]
Offset = Annotated[Any, _field(SearchRequest, "offset")]
Fusion = Annotated[Any, _field(SearchRequest, "fusion")]
"""A method name or a fusion object, as the HTTP API takes it."""
LexicalWeight = Annotated[Any, _field(SearchRequest, "lexicalWeight")]
RrfK = Annotated[Any, _field(SearchRequest, "rrfK")]
Threshold = Annotated[Any, _field(SearchRequest, "threshold")]
LanguagePrior = Annotated[Any, _field(SearchRequest, "languagePrior")]
Overfetch = Annotated[Any, _field(SearchRequest, "overfetch")]
Scopes = Annotated[Any, _field(SearchRequest, "scopes")]
Metadata = Annotated[Any, _field(SearchRequest, "metadata")]
"""Filters ``{key: value}`` (a string, number or boolean): hits whose metadata has each."""
Rerank = Annotated[Any, _field(SearchRequest, "rerank")]
KOverfetch = Annotated[Any, _field(SearchRequest, "kOverfetch")]
QaFirst = Annotated[Any, _field(SearchRequest, "qaFirst")]
Mode = Annotated[Any, _field(SearchRequest, "mode")]
MaxPerSource = Annotated[Any, _field(SearchRequest, "maxPerSource")]
GroupBy = Annotated[Any, _field(SearchRequest, "groupBy")]
AskK = Annotated[Any, _field(AskRequest, "k")]
MinCosine = Annotated[Any, _field(AskRequest, "minCosine")]
MinTermCoverage = Annotated[Any, _field(AskRequest, "minTermCoverage")]


def request(model: type[R], arguments: Mapping[str, Any]) -> R:
    """A tool's ``arguments`` (snake_case; None: not given) as the HTTP API's request body
    ``model``, validated as the HTTP API validates a body: a bad value is a
    :class:`~plait.errors.ValidationError` with the 422's one-line message.

    >>> request(SearchRequest, {"query": "q", "rrf_k": 30, "fusion": "rrf", "scopes": None}).rrf_k
    30
    >>> request(SearchRequest, {"query": "q", "threshold": 2})
    Traceback (most recent call last):
    plait.errors.ValidationError: threshold: Input should be less than or equal to 1 (got 2)
    """
    body = {to_camel(name): value for name, value in arguments.items() if value is not None}
    try:
        return model.model_validate(body)
    except PydanticValidationError as exc:
        raise ValidationError(describe_validation(exc.errors())) from None
