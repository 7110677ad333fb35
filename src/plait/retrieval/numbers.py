"""Numbers as JSON means them: ``true`` is not 1 and NaN is not a weight."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["plain_number"]


def plain_number(value: Any) -> Any:
    """``value`` unchanged, unless pydantic would read it as a number it is not: ``true`` /
    ``false`` (1 / 0), or NaN and ±infinity, given as a float or as a string ('NaN').

    Every interface's numeric fields take it as a before-validator
    (:class:`~plait.retrieval.request.SearchRequest` and the knobs of its fusion objects,
    :class:`~plait.ask.AskRequest`, the MCP tools' arguments).

    >>> plain_number(0.5), plain_number("auto")
    (0.5, 'auto')
    >>> plain_number(True)
    Traceback (most recent call last):
    ValueError: expected a number, got true
    >>> plain_number("-Infinity")
    Traceback (most recent call last):
    ValueError: expected a finite number, got -inf
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    if isinstance(value, (float, str)):
        try:
            number = float(value)
        except ValueError:
            return value  # not a number at all: the field's own type says so
        if not math.isfinite(number):
            raise ValueError(f"expected a finite number, got {number}")
    return value
