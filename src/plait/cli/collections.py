"""``plait collections``, ``plait calibrate`` and ``plait delete-collection``: the collections
of a store, their fusion weight and their removal."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from plait.cli.options import CollectionOpt, DebugOpt, EmbedderOpt, JsonOpt, StoreOpt, console
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.errors import NotFoundError
from plait.terminal import safe
from plait.types import to_json

__all__ = ["register"]


def calibrate(
    samples: Annotated[int, typer.Option(help="Chunks to draw pseudo-queries from.")] = 200,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Measure only; do not save the weight.")] = False,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Choose the collection's dense fusion weight on pseudo-queries from its own chunks (no labels)."""
    name = _collection(collection)
    with _engine(store, embedder) as engine:
        result = _run(debug, lambda: engine.calibrate(collection=name, samples=samples, save=not dry_run))
    if as_json:
        _print_json(result)
        return
    state = "not saved (dry run)" if dry_run else f"saved as {safe(name)}'s fusion denseWeight"
    console.print(f"dense weight {result.dense_weight:g} — {state}", highlight=False)
    if result.not_used:
        console.print(f"  [yellow]not used:[/yellow] {escape(result.not_used)}", highlight=False, soft_wrap=True)
    console.print(f"  {escape(result.reason)}", highlight=False)


def delete_collection(
    name: Annotated[str, typer.Argument(help="The collection to delete, with all its chunks.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    keys: Annotated[
        Path | None,
        typer.Option("--keys", help="Also revoke in this API key file (PLAIT_KEYS and keys.db next to the store always)."),
    ] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Delete a collection: its chunks, vectors, lexical index and settings."""
    with _engine(store, embedder, keys=keys) as engine:

        def action() -> dict[str, Any]:
            info = engine.store.get_collection(name)
            if info is None:
                raise NotFoundError(f"collection {name!r} does not exist")
            if not yes and not typer.confirm(f"delete collection {name!r} ({info.chunks} chunks)?"):
                raise typer.Abort()
            done = engine.delete_collection_report(name)  # revokes its keys in every key file
            return {
                "name": name,
                "deleted": done.deleted,
                "chunks": info.chunks,
                "sources": info.sources,
                "revokedKeys": done.revoked_keys,
            }

        result = _run(debug, action)
    if as_json:
        _print_json(result)
    else:
        revoked = result["revokedKeys"]
        keys_note = f", {len(revoked)} API key(s) revoked" if revoked else ""
        console.print(
            f"deleted collection {safe(name)} ({result['chunks']} chunks, {result['sources']} sources{keys_note})",
            highlight=False,
        )



def collections(
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List collections with their embedding model and counts."""
    with _engine(store, embedder, create=False) as engine:
        infos = _run(debug, engine.collections)
    if as_json:
        _print_json([to_json(i) for i in infos])
        return
    table = Table(title="collections")
    for column in ("name", "model", "dim", "sources", "chunks", "no vector", "last indexed"):
        table.add_column(column)
    for i in infos:
        table.add_row(
            safe(i.name),
            f"{i.embedder_provider}/{i.embedder_model}" if i.embedder_model else "—",
            str(i.dimension or "—"),
            str(i.sources),
            str(i.chunks),
            str(i.chunks_without_vector),
            i.last_indexed_at or "—",
        )
    console.print(table)



def register(app: typer.Typer) -> None:
    """Add ``calibrate``, ``delete-collection`` and ``collections`` to the main CLI."""
    app.command()(calibrate)
    app.command("delete-collection")(delete_collection)
    app.command()(collections)
