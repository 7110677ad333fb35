"""The id of the HTTP request being served (a context variable, no web framework needed):
set by the HTTP layer, read by the JSON log formatter and echoed in ``X-Request-Id``."""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

__all__ = ["HEADER", "current_request_id", "request_id_var", "usable_request_id"]

HEADER = "X-Request-Id"
#: An incoming id is kept when it is 1..128 visible ASCII letters, digits or ``-_.:``.
_WELL_FORMED = re.compile(r"[A-Za-z0-9._:\-]{1,128}")

request_id_var: ContextVar[str | None] = ContextVar("plait_request_id", default=None)


def current_request_id() -> str | None:
    return request_id_var.get()


def usable_request_id(incoming: str | None) -> str:
    """``incoming`` when well-formed, else a fresh random id (32 hex digits)."""
    if incoming is not None and _WELL_FORMED.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex
