"""What every CLI command shares: the ``--store``, ``--collection``, ``--embedder``,
``--json``, ``--debug`` options, running an action with one-line errors, and printing
JSON — defined once for :mod:`plait.cli` and the command modules it registers (which
cannot import :mod:`plait.cli` at import time: it imports them)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console

from plait.errors import PlaitError
from plait.types import to_json

__all__ = [
    "CollectionOpt",
    "DebugOpt",
    "EmbedderOpt",
    "JsonOpt",
    "StoreOpt",
    "print_json",
    "run_or_exit",
]

T = TypeVar("T")
_err = Console(stderr=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store: a SQLite path, postgresql://…, milvus:///file.db or http(s)://host:19530 "
        "(env PLAIT_STORE).",
    ),
]
CollectionOpt = Annotated[
    str | None, typer.Option("--collection", "-c", help="Collection name (default 'default').")
]
EmbedderOpt = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        help="e5 | minilm | ollama | openai | none (default: the collection's recorded one).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the API's JSON model.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks (and per-stage timings).")]


def run_or_exit(debug: bool, action: Callable[[], T]) -> T:
    """Run ``action``; a :class:`PlaitError` becomes one red line and exit code 1
    (re-raised with ``--debug``)."""
    try:
        return action()
    except PlaitError as exc:
        if debug:
            raise
        _err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None


def print_json(model: BaseModel | list[Any] | dict[str, Any]) -> None:
    """Print a model as its camelCase JSON (the HTTP API's form), or plain JSON data."""
    data = to_json(model) if isinstance(model, BaseModel) else model
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
