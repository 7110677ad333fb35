"""The CLI's log: ``plait -v`` (INFO), ``-vv`` (DEBUG), ``--quiet`` (errors only), else
``PLAIT_LOG_LEVEL``, else warnings. Library modules only log (``logging.getLogger(__name__)``);
this is the one place that configures a handler — on the ``plait`` logger, to stderr, as
text or (``plait serve --log-json``) one JSON object per line carrying the request id."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from plait.config import Settings
from plait.errors import ConfigError

__all__ = ["JsonFormatter", "configure_logging", "level_for"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]  # StreamHandler is generic only in stubs
    """Writes to the current ``sys.stderr`` (a test runner swaps it between commands)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the request id when one is
    being served, and the extra fields the HTTP access log adds."""

    _EXTRA = ("method", "route", "path", "status", "duration_ms", "client")

    def format(self, record: logging.LogRecord) -> str:
        from plait.api.request_id import current_request_id

        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or current_request_id()
        if request_id:
            out["requestId"] = request_id
        for name in self._EXTRA:
            if hasattr(record, name):
                out[name] = getattr(record, name)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def level_for(verbose: int, quiet: bool) -> int:
    """The log level for ``-v`` × ``verbose`` / ``--quiet``, else ``PLAIT_LOG_LEVEL``, else WARNING."""
    if quiet:
        return logging.ERROR
    if verbose:
        return logging.DEBUG if verbose > 1 else logging.INFO
    configured = Settings.resolve().log_level
    if configured is None:
        return logging.WARNING
    level = _LEVELS.get(configured.strip().lower())
    if level is None:
        raise ConfigError(f"PLAIT_LOG_LEVEL must be one of {', '.join(_LEVELS)}, got {configured!r}")
    return level


def configure_logging(level: int, *, json_format: bool = False) -> None:
    """Send the ``plait`` loggers' records at ``level`` and above to stderr (idempotent)."""
    root = logging.getLogger("plait")
    for handler in list(root.handlers):
        if isinstance(handler, _Stderr):
            root.removeHandler(handler)
    handler = _Stderr()
    handler.setLevel(level)
    handler.setFormatter(
        JsonFormatter() if json_format else logging.Formatter("%(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    root.setLevel(level)
