"""Text that cannot be stored or sent: lone surrogates (``"\\ud800"``).

Python strings may hold them (JSON ``"\\ud800"``, invalid UTF-8 argv decoded with
``surrogateescape``), UTF-8 cannot: every store, JSON response and terminal would fail
with ``UnicodeEncodeError`` deep inside. :func:`check_texts` finds one in a request
before any work; :func:`valid_text` makes a service method raise
:class:`~plait.errors.ValidationError` for them instead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel

from plait.errors import ValidationError

__all__ = ["check_texts", "surrogate_error", "valid_text"]

P = ParamSpec("P")
T = TypeVar("T")
_MAX_DEPTH = 20


def _describe(text: str, position: int, where: str) -> ValidationError:
    code = ord(text[position])
    if 0xDC80 <= code <= 0xDCFF:  # how Python reads a byte that is not UTF-8 (argv, file names)
        what = f"the byte 0x{code - 0xDC00:02X}, which is not valid UTF-8 (or a lone surrogate U+{code:04X}),"
    else:
        what = f"a lone surrogate (U+{code:04X})"
    return ValidationError(f"{where} contains {what} at character {position}: text must be valid Unicode (UTF-8)")


def _first_surrogate(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_texts(value: Any, where: str, *, _depth: int = 0) -> None:
    """Raise :class:`ValidationError` naming the first string in ``value`` (strings,
    mappings, lists, tuples, pydantic models) that holds a lone surrogate."""
    if _depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        position = _first_surrogate(value)
        if position is not None:
            raise _describe(value, position, where)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            check_texts(getattr(value, name, None), f"{where}.{name}", _depth=_depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_texts(key, f"{where} key", _depth=_depth + 1)
            check_texts(item, f"{where}.{key}", _depth=_depth + 1)
    elif isinstance(value, (list, tuple)) and not isinstance(value, PurePath):
        for index, item in enumerate(value[:10_000]):
            check_texts(item, f"{where}[{index}]", _depth=_depth + 1)


def surrogate_error(exc: UnicodeEncodeError) -> ValidationError | None:
    """The :class:`ValidationError` for a surrogate that reached an encoder, else None."""
    if "surrogate" not in str(exc.reason):
        return None
    text = exc.object if isinstance(exc.object, str) else ""
    if 0 <= exc.start < len(text):
        return _describe(text, exc.start, "a text")
    return ValidationError("a text contains a lone surrogate: text must be valid Unicode (UTF-8)")


def valid_text(method: Callable[P, T]) -> Callable[P, T]:
    """Check a service method's string arguments, and turn a surrogate that still
    reaches an encoder into :class:`ValidationError`."""

    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError:
            bound = dict(kwargs)
        for name, value in bound.items():
            if name != "self":
                check_texts(value, name)
        try:
            return method(*args, **kwargs)
        except UnicodeEncodeError as exc:
            error = surrogate_error(exc)
            if error is None:
                raise
            raise error from None

    return wrapper
