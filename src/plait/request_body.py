"""Keyword options as a request's camelCase JSON: one rule for the facade and the clients.

:meth:`plait.Plait.search`, ``ask`` and ``explain`` take snake_case keyword options and
hand a request body to ``search_request`` / ``ask_request``; :class:`plait.Client`
sends the same body over HTTP. Both build it here, so a served and an embedded call
with the same options validate the same request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic.alias_generators import to_camel

__all__ = ["request_body"]


def request_body(values: Mapping[str, Any], *, skip: Sequence[str] = ("self", "collection")) -> dict[str, Any]:
    """``values`` (snake_case keyword options, e.g. a method's ``locals()``) as a camelCase
    request body: names in ``skip`` left out, None and empty scopes / metadata = not given,
    sequences as lists and mappings as dicts.

    >>> request_body({"self": 0, "collection": "c", "query": "q", "k_overfetch": 5, "rerank": None, "scopes": ()})
    {'query': 'q', 'kOverfetch': 5}
    >>> request_body({"scopes": ("a", "b"), "metadata": {"lang": "en"}})
    {'scopes': ['a', 'b'], 'metadata': {'lang': 'en'}}
    """
    body: dict[str, Any] = {}
    for name, value in values.items():
        if name in skip or value is None:
            continue
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, Sequence) and not isinstance(value, str):
            value = list(value)
        if isinstance(value, (dict, list)) and not value:
            continue  # empty scopes / metadata are none given
        body[to_camel(name)] = value
    return body
