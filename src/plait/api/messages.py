"""One-line error messages, shared by the HTTP API and the MCP tools.

Both interfaces validate input with pydantic; :func:`describe_validation` turns its
error list into the one line either returns (a 422 body, an MCP tool error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_MESSAGE_CHARS", "describe_unreadable", "describe_validation", "one_line"]

MAX_MESSAGE_CHARS = 300


def one_line(message: str) -> str:
    """``message`` on one line of at most :data:`MAX_MESSAGE_CHARS` characters.

    >>> one_line("k: bad\\n  value")
    'k: bad value'
    """
    # backslashreplace: a lone surrogate in a message must not break the response itself
    text = str(message).encode("utf-8", "backslashreplace").decode("utf-8")
    line = " ".join(text.split())
    return line if len(line) <= MAX_MESSAGE_CHARS else line[: MAX_MESSAGE_CHARS - 1] + "…"


def describe_validation(errors: Sequence[Mapping[str, Any]], *, skip: Sequence[str] = ("body",)) -> str:
    """One line naming the bad field(s) of pydantic ``errors`` (``ValidationError.errors()``),
    with the value given when it is short; ``skip`` leaves location parts out (FastAPI's
    ``body``). A check of the whole request (a model validator's error, at no location
    once ``skip`` is left out) is its message alone, as the engine says it
    (:func:`plait.retrieval.request.validation_message`).

    >>> describe_validation([{"type": "int_parsing", "loc": ("k",), "msg": "Input should be a valid integer",
    ...                       "input": "many"}])
    "k: Input should be a valid integer (got 'many')"
    >>> describe_validation([{"type": "value_error", "loc": ("k",), "msg": "Value error, expected a number, got true",
    ...                       "input": True}])
    'k: expected a number, got true'
    >>> describe_validation([{"type": "value_error", "loc": ("body",), "msg": "Value error, rrfK given beside a fusion object",
    ...                       "input": {}}])
    'rrfK given beside a fusion object'
    """
    errors = _unions_merged(errors)
    parts = []
    for error in errors[:3]:
        loc = [str(p) for p in error.get("loc", ()) if p not in skip]
        if error.get("type") == "json_invalid":
            where = error.get("loc", ("body", "?"))[-1]
            parts.append(f"malformed JSON body (at character {where})")
            continue
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        if not loc and error.get("type") == "value_error":
            # a check of the whole request (knobs that do not fit the fusion method): its
            # message names the fields itself, and reads the same over HTTP, MCP and the CLI
            parts.append(message)
            continue
        field = ".".join(loc) or "body"
        given = error.get("input")
        short = isinstance(given, (int, float, bool)) or (isinstance(given, str) and len(given) <= 40)
        # a message that already names what it got ('expected a number, got true') says it once
        if short and error.get("type") not in ("missing", "extra_forbidden") and "got " not in message:
            message += f" (got {given!r})"
        parts.append(f"{field}: {message}")
    if len(errors) > 3:
        parts.append(f"and {len(errors) - 3} more")
    return one_line("; ".join(parts))


#: The members of a scalar union, as pydantic names them at the end of an error's location.
_MEMBERS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


def _unions_merged(errors: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pydantic reports a value no member of a scalar union takes once per member, at a
    location ending in the member's name (``metadata.a.str``, ``metadata.a.int``, …): a field
    that does not exist. Those become one error at the value's own location, naming the
    members.

    >>> [dict(e) for e in _unions_merged([
    ...     {"type": "string_type", "loc": ("metadata", "a", "str"), "msg": "…", "input": {}},
    ...     {"type": "bool_type", "loc": ("metadata", "a", "bool"), "msg": "…", "input": {}}])]
    [{'type': 'union', 'loc': ('metadata', 'a'), 'msg': 'Input should be a valid string or boolean', 'input': {}}]
    """
    merged: list[tuple[tuple[Any, ...], list[str], Mapping[str, Any]]] = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        member = loc[-1] if loc and isinstance(loc[-1], str) and loc[-1] in _MEMBERS else None
        if member is not None and merged and merged[-1][1] and merged[-1][0] == loc[:-1]:
            merged[-1][1].append(member)
        else:
            merged.append((loc[:-1] if member else loc, [member] if member else [], error))
    out: list[Mapping[str, Any]] = []
    for loc, members, error in merged:
        if len(members) < 2:
            out.append(error)
            continue
        names = [_MEMBERS[m] for m in members]
        listed = ", ".join(names[:-1]) + " or " + names[-1]
        out.append({"type": "union", "loc": loc, "msg": f"Input should be a valid {listed}", "input": error.get("input")})
    return out


def describe_unreadable(cause: BaseException | None) -> str | None:
    """What is wrong with a JSON body the parser gave up on before reading it as JSON (its
    bytes not UTF-8, or nested deeper than the parser recurses), or None for another cause.

    >>> describe_unreadable(UnicodeDecodeError("utf-8", b"\\xe9", 0, 1, "invalid continuation byte"))
    'malformed JSON body: not UTF-8 (byte 0xe9 at character 0)'
    >>> describe_unreadable(RecursionError())
    'malformed JSON body: nested too deeply'
    """
    if isinstance(cause, UnicodeDecodeError):
        return f"malformed JSON body: not UTF-8 (byte 0x{cause.object[cause.start]:02x} at character {cause.start})"
    if isinstance(cause, RecursionError):
        return "malformed JSON body: nested too deeply"
    return None
