"""``plait copy``, ``plait export``, ``plait import``, ``plait backup``: move and keep
collections without re-embedding (:mod:`plait.copying`, :mod:`plait.archive`,
:mod:`plait.backup`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from plait.cli.options import CollectionOpt, DebugOpt, JsonOpt, StoreOpt, console, err, fail
from plait.cli.options import collection_name as _collection
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.config import Settings
from plait.copying import CopyProgress, CopyReport
from plait.stores.base import Store
from plait.terminal import safe
from plait.types import to_json

__all__ = ["register"]

T = TypeVar("T")

ReplaceOpt = Annotated[
    bool, typer.Option("--replace", help="Overwrite a target collection that already holds chunks.")
]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="Replace an existing output file.")]


@contextmanager
def _opened(debug: bool, url: str, *, create: bool) -> Iterator[Store]:
    """The store at ``url`` (errors: one line). ``create=False``: a missing SQLite file is an
    error, not a new empty store (a copy's source, an export). A store this opened as a new
    file is removed again when the command fails before a collection was written into it."""
    from plait.stores import close_store, new_sqlite_file, open_store

    created = new_sqlite_file(url) if create else None
    opened = _run(debug, lambda: open_store(url, create=create))
    try:
        yield opened
    except BaseException as exc:
        close_store(opened, created, failed=not (isinstance(exc, typer.Exit) and exc.exit_code == 0))
        raise
    close_store(opened, created, failed=False)


def _on_store(debug: bool, url: str, action: Callable[[Store], T], *, create: bool) -> T:
    """``action`` on the store at ``url``, opened for it and closed after (errors: one line)."""
    with _opened(debug, url, create=create) as opened:
        return _run(debug, lambda: action(opened))


def copy(
    from_store: Annotated[str | None, typer.Option("--from", help="Source store (default --store / PLAIT_STORE).")] = None,
    to_store: Annotated[str, typer.Option("--to", help="Target store URL (SQLite path, postgresql://…, milvus://…).")] = "",
    collection: Annotated[
        list[str] | None, typer.Option(
            "--collection", "-c", help="Collection(s) to copy (default: all of them; PLAIT_COLLECTION does not narrow a copy)."
        )
    ] = None,
    target_name: Annotated[
        str | None,
        typer.Option("--as", help="Copy under this name (exactly one --collection); needed within one store."),
    ] = None,
    replace: ReplaceOpt = False,
    store: StoreOpt = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            help="Must be the model of the copied collections' vectors (a copy embeds nothing); a "
            "collection never embedded records it on the copy. PLAIT_EMBEDDER alone only records: "
            "it does not refuse another model's vectors.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Copy collections to another store with no embedding call; a re-run after an
    interruption continues where it stopped; verified at the end."""
    from plait.copy_plan import copy_names

    if not to_store:
        fail("--to STORE is required")
    if target_name is not None and len(set(collection or [])) != 1:
        fail("--as NAME needs exactly one --collection")
    settings = Settings.resolve(store=from_store or store, embedder=embedder)
    chosen, default = settings.embedder, embedder is None  # default: PLAIT_EMBEDDER's, not the flag's
    with _opened(debug, settings.store, create=False) as source:
        # the whole request is checked before the target is opened (plait.copy_plan)
        names = _run(debug, partial(
            copy_names, source, collection, target_name=target_name, embedder=chosen, embedder_is_default=default
        ))
        with _opened(debug, to_store, create=True) as target:
            reports = _copy_each(
                debug, source, target, names, target_name, replace, chosen, default=default, as_json=as_json
            )
    if as_json:
        _print_json([to_json(r) for r in reports])
        return
    failed = False
    for r in reports:
        check = r.verification
        verdict = "verified" if check is not None and check.ok else "VERIFICATION FAILED"
        failed |= not (check is not None and check.ok)
        console.print(
            f"{safe(r.collection)}{'' if r.target_collection == r.collection else ' -> ' + safe(r.target_collection)}: "
            f"{r.sources_copied} sources copied, {r.sources_already_there} already there, "
            f"{r.chunks_copied} chunks ({r.vectors_copied} vectors, {r.chunks_per_second:g} chunks/s), "
            f"{r.cards} cards, {r.keys} keys, {r.usage_rows} usage rows — {verdict}",
            highlight=False,
        )
        if check is not None and not check.ok:
            console.print(f"  {to_json(check)}", highlight=False)
    if failed:
        raise typer.Exit(1)


def _copy_each(
    debug: bool,
    source: Store,
    target: Store,
    names: list[str],
    target_name: str | None,
    replace: bool,
    embedder: str | None,
    *,
    default: bool,
    as_json: bool,
) -> list[CopyReport]:
    """Copy the collections ``names`` one by one, with a progress bar on a terminal."""
    from plait.copying import copy_collection

    reports = []
    for name in names:
        with Progress(
            TextColumn(f"[bold]{safe(name)}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("sources · {task.fields[chunks]} chunks"), TimeElapsedColumn(),
            console=err, disable=as_json or not err.is_terminal, transient=True,
        ) as bar:
            task = bar.add_task(name, total=None, chunks=0)

            def tick(done: int, total: int, chunks: int, task: TaskID = task) -> None:
                bar.update(task, completed=done, total=total, chunks=chunks)

            def one(name: str = name, tick: CopyProgress = tick) -> CopyReport:
                return copy_collection(
                    source, target, name, target_name=target_name, replace=replace, progress=tick, embedder=embedder,
                    embedder_is_default=default,
                )

            reports.append(_run(debug, one))
    return reports


def export(
    output: Annotated[Path, typer.Option("--output", "-o", help="Archive file (.jsonl; .zst compresses).")],
    overwrite: OverwriteOpt = False,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            help="Must be the model of the collection's vectors (an export embeds nothing); a "
            "collection never embedded records it in the archive. PLAIT_EMBEDDER alone only "
            "records: it does not refuse another model's vectors.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Write a collection to a versioned JSONL archive (vectors included)."""
    from plait.archive import export_collection

    settings = Settings.resolve(store=store, embedder=embedder)
    name = _collection(collection)  # -c "" is an error, not the default collection
    report = _on_store(
        debug,
        settings.store,
        lambda opened: export_collection(
            opened, name, output, overwrite=overwrite, embedder=settings.embedder,
            embedder_is_default=embedder is None,
        ),
        create=False,
    )
    if as_json:
        _print_json(report)
    else:
        console.print(f"exported {safe(report.collection)}: {report.chunks} chunks, {report.vectors} vectors, "
                      f"{report.cards} cards, {report.keys} keys, {report.usage} usage rows -> {safe(report.path)}", highlight=False)


def import_(
    archive: Annotated[Path, typer.Argument(help="An archive written by plait export.")],
    replace: ReplaceOpt = False,
    store: StoreOpt = None,
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection", "-c",
            help="Import under this name (default: the archive's collection; PLAIT_COLLECTION does not rename it).",
        ),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            help="Must be the model of the archive's vectors (an import embeds nothing); an archive "
            "without vectors records it as the collection's embedder. PLAIT_EMBEDDER alone only "
            "records: it does not refuse another model's vectors.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Import an archive (validated line by line before anything is written)."""
    from plait.archive import import_collection

    settings = Settings.resolve(store=store, embedder=embedder)
    report = _on_store(
        debug,
        settings.store,
        lambda opened: import_collection(
            opened, archive, collection=collection, replace=replace, embedder=settings.embedder,
            embedder_is_default=embedder is None,
        ),
        create=True,
    )
    if as_json:
        _print_json(report)
    else:
        console.print(f"imported {safe(report.collection)}: {report.sources} sources, {report.chunks} chunks, "
                      f"{report.vectors} vectors, {report.cards} cards, {report.keys} keys, {report.usage} usage rows",
                      highlight=False)


def backup(
    output: Annotated[Path, typer.Option("--output", "-o", help="The backup file (a SQLite store file).")],
    overwrite: OverwriteOpt = False,
    store: StoreOpt = None,
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection", "-c",
            help="Refused: a backup is the whole store, every collection (PLAIT_COLLECTION is not refused).",
        ),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            help="Refused: a backup copies the vectors as they are, embedding nothing (PLAIT_EMBEDDER is not refused).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """A consistent snapshot of a live SQLite store (searches and indexing may go on)."""
    from plait.backup import backup_store

    url = Settings.resolve(store=store).store
    # the flags as given, not the environment's defaults: only an explicit one is refused
    report = _run(
        debug, lambda: backup_store(url, output, overwrite=overwrite, collection=collection, embedder=embedder)
    )
    if as_json:
        _print_json(report)
    else:
        console.print(f"backed up {report.store} -> {report.path} ({report.bytes} bytes)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``copy``, ``export``, ``import`` and ``backup`` to the main CLI."""
    app.command()(copy)
    app.command()(export)
    app.command("import")(import_)
    app.command()(backup)
