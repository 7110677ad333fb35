"""``plait usage [--since] [--json]``: the collection's embedding and LLM provider usage per
hour, purpose, provider and model (see :mod:`plait.usage`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from plait.cli.options import CollectionOpt, DebugOpt, EmbedderOpt, JsonOpt, StoreOpt, console
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.terminal import safe

__all__ = ["register"]


def usage(
    since: Annotated[
        str | None, typer.Option("--since", help="From this ISO date/time (UTC), or 24h / 7d back.")
    ] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Provider usage: embedding calls, texts and tokens, LLM prompt/completion tokens, per hour."""
    name = _collection(collection)
    with _engine(store, embedder, create=False) as engine:
        report = _run(debug, lambda: engine.usage(name, since=since))
    if as_json:
        _print_json(report)
        return
    if not report.rows:
        console.print(
            f"no provider usage recorded for {safe(repr(name))}" + (f" since {safe(report.since)}" if report.since else ""),
            highlight=False,
        )
        return
    for title, rows in (("usage per hour", report.rows), ("totals", report.totals)):
        table = Table(title=title)
        for column in ("hour", "kind", "purpose", "provider/model", "calls", "texts", "chars", "in tokens", "out tokens"):
            table.add_column(column)
        for r in rows:
            mark = " (estimated)" if r.estimated else ""
            table.add_row(
                r.bucket if title != "totals" else "—", r.kind, r.purpose, f"{r.provider}/{r.model}",
                str(r.calls), str(r.texts), str(r.characters), f"{r.input_tokens}{mark}",
                f"{r.output_tokens}{mark}" if r.kind == "llm" else "—",
            )
        console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``usage`` to the main CLI."""
    app.command()(usage)
