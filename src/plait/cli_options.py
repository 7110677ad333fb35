"""The options every CLI command shares (``--store``, ``--collection``, ``--embedder``,
``--json``, ``--debug``), defined once for :mod:`plait.cli` and the command modules it
registers (which cannot import :mod:`plait.cli` at import time: it imports them)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["CollectionOpt", "DebugOpt", "EmbedderOpt", "JsonOpt", "StoreOpt"]

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
