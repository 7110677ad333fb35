"""``plait index``, ``plait index-sessions``, ``plait reindex`` and ``plait coverage``: writing a
collection and saying, honestly, how much of it is indexed."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from plait.cli.options import CollectionOpt, DebugOpt, EmbedderOpt, JsonOpt, StoreOpt, console, err
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.cli.progress import run_indexing
from plait.sources.roots import parse_scope_rules
from plait.terminal import safe
from plait.types import IndexReport

if TYPE_CHECKING:
    from plait.service import Plait

__all__ = ["register"]

AllowEmptyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-empty",
        help="Delete the indexed sources of a root that now yields none or cannot be fully read.",
    ),
]


_LISTED = 20  # sources named per list in a text report; --json has them all


def _listed(names: list[str]) -> str:
    """The first :data:`_LISTED` names, and how many more the --json report holds."""
    shown = ", ".join(safe(name) for name in names[:_LISTED])
    return shown + (f" … and {len(names) - _LISTED} more (all in --json)" if len(names) > _LISTED else "")


def _print_report(report: IndexReport) -> None:
    emb = report.embedding
    console.print(
        f"[bold]{safe(report.collection)}[/bold]: {report.sources_indexed}/{report.sources_seen} sources indexed · "
        f"chunks +{report.chunks_added} ~{report.chunks_updated} ={report.chunks_unchanged} "
        f"-{report.chunks_deleted}",
        highlight=False,
    )
    dedup = f", {emb.deduplicated} deduplicated (same text as another chunk)" if emb.deduplicated else ""
    vec = f"vectors: {emb.embedded} embedded, {emb.reused} reused{dedup}, {emb.skipped} missing"
    if emb.reason:
        vec += f" — {emb.reason}"
    console.print(vec, highlight=False)
    if report.part_of_root:
        console.print(
            f"indexed as part of the recorded root {safe(report.part_of_root)}, with its options "
            "(the folder lies inside it; no root recorded for the folder)",
            highlight=False,
        )
    if report.nested_roots_left:
        console.print(
            f"left to the recorded roots inside (not indexed again here): {_listed(report.nested_roots_left)}",
            highlight=False,
        )
    if report.sources_deleted:
        console.print(f"{report.sources_deleted} vanished sources deleted", highlight=False)
    if report.skipped_by_type:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.skipped_by_type.items()))
        console.print(f"events not indexed by type: {safe(kinds)}", highlight=False)
    for label, names in (
        ("added", report.added_sources),
        ("changed", report.changed_sources),
        ("deleted", report.deleted_sources),
    ):
        if names:
            console.print(f"{label} ({len(names)}): {_listed(names)}", highlight=False)
    for folder, count in sorted(report.adr_folders.items()):
        noun = "ADR" if count == 1 else "ADRs"
        console.print(f"{count} {noun} under {safe(folder)} → adr", highlight=False)
    if report.untracked:
        console.print(
            f"[yellow]not tracked by git[/yellow], not indexed ({len(report.untracked)}; git add them to index "
            f"them): {_listed(report.untracked)}",
            highlight=False,
        )
    for item in report.skipped:
        console.print(f"  [yellow]skipped[/yellow] {safe(item.path)}: {safe(item.reason)}", highlight=False)
    state = "[green]complete[/green]" if report.complete else "[yellow]incomplete[/yellow]"
    console.print(f"{state} in {report.elapsed_ms / 1000:.1f}s")


DetachOpt = Annotated[
    bool,
    typer.Option(
        "--detach",
        help="Return once every chunk is written (searchable lexically); the vectors are embedded "
        "later by 'plait reindex' or 'plait serve'.",
    ),
]


def _indexing(
    engine: Plait,
    name: str,
    store: str | None,
    as_json: bool,
    debug: bool,
    action: Callable[[Any, Any], IndexReport],
) -> IndexReport:
    """Run an indexing action in the foreground (bars, Ctrl-C; see :mod:`plait.cli.progress`)."""
    resume = f"plait reindex --collection {shlex.quote(name)}" + (f" --store {shlex.quote(store)}" if store else "")

    def coverage() -> float | None:
        return engine.vector_coverage(name) if engine.store.get_collection(name) else None

    return run_indexing(debug, action, console=err, as_json=as_json, coverage=coverage, resume=resume)


def index(
    path: Annotated[
        Path, typer.Argument(help="A folder or git repository of Markdown/text files, or a .jsonl file.")
    ],
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    scope: Annotated[str | None, typer.Option(help="Scope for a .jsonl file (default docs).")] = None,
    ref: Annotated[
        str | None, typer.Option(help="Index this git commit, branch or tag (nothing is checked out).")
    ] = None,
    glob: Annotated[
        list[str] | None,
        typer.Option("--glob", help="File-name glob to index (repeatable; default *.md *.markdown *.txt *.rst)."),
    ] = None,
    scope_rule: Annotated[
        list[str] | None,
        typer.Option(
            "--scope-rule",
            help="PREFIX=SCOPE, first match wins (repeatable; default: ADR folders and ADR-shaped files → adr, the rest → docs).",
        ),
    ] = None,
    max_bytes: Annotated[
        int | None, typer.Option("--max-bytes", help="Skip larger files (default 2097152).")
    ] = None,
    allow_empty: AllowEmptyOpt = False,
    detach: DetachOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Index a folder or git repository (ADRs by convention → scope adr, the rest → docs) or a JSONL/BEIR corpus.

    A folder holding .git is read as a git working tree: only tracked files. Every chunk is
    written (searchable lexically) before the vectors are embedded, batch by batch, with a
    progress bar; Ctrl-C keeps a searchable index that 'plait reindex' resumes.
    """
    name = _collection(collection)
    with _engine(store, embedder) as engine:

        def action(tick: Any, embed_tick: Any) -> IndexReport:
            rules = parse_scope_rules(scope_rule) if scope_rule else None
            return engine.index(
                path,
                collection=name,
                scope=scope,
                ref=ref,
                globs=glob or None,
                scope_rules=rules,
                max_bytes=max_bytes,
                progress=tick,
                allow_empty=allow_empty,
                backfill=not detach,
                embed_progress=embed_tick,
            )

        report = _indexing(engine, name, store, as_json, debug, action)
    if as_json:
        _print_json(report)
    else:
        _print_report(report)


def index_sessions(
    path: Annotated[Path, typer.Argument(help="A .jsonl session event log, or a folder of them.")],
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    scope: Annotated[str, typer.Option(help="Scope of the sessions' chunks.")] = "sessions",
    detach: DetachOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Index chat/agent session logs: only chat.message and agent.response events."""
    name = _collection(collection)
    with _engine(store, embedder) as engine:
        report = _indexing(
            engine,
            name,
            store,
            as_json,
            debug,
            lambda tick, embed_tick: engine.index_sessions(
                path, collection=name, scope=scope, progress=tick, backfill=not detach,
                embed_progress=embed_tick,
            ),
        )
    if as_json:
        _print_json(report)
    else:
        _print_report(report)


def reindex(
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    scope: Annotated[str | None, typer.Option(help="Only this scope.")] = None,
    source: Annotated[
        Path | None, typer.Option(help="Only the recorded source at this path.")
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="Embed every chunk of the selected sources again, replacing each source atomically.")
    ] = False,
    allow_empty: AllowEmptyOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Re-read recorded sources: unchanged chunks keep their vectors, vanished sources lose theirs.

    Missing vectors are backfilled. --full re-embeds every chunk of the selected scope / source.
    """
    name = _collection(collection)
    with _engine(store, embedder) as engine:
        report = _indexing(
            engine,
            name,
            store,
            as_json,
            debug,
            lambda tick, embed_tick: engine.reindex(
                collection=name,
                scope=scope,
                source=source,
                full=full,
                progress=tick,
                allow_empty=allow_empty,
                embed_progress=embed_tick,
            ),
        )
    if as_json:
        _print_json(report)
    else:
        _print_report(report)


def _figure(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def coverage(
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Per scope: sources present vs indexed, chunks without a vector, model, last indexed."""
    name = _collection(collection)
    with _engine(store, embedder, create=False) as engine:
        report = _run(debug, lambda: engine.coverage(collection=name))
    if as_json:
        _print_json(report)
        return
    table = Table(title=f"coverage of {safe(report.collection)}")
    for column in (
        "scope", "present", "indexed", "outdated", "vanished", "chunks", "no vector", "model", "last indexed"
    ):
        table.add_column(column)
    for row in report.scopes:
        table.add_row(
            safe(row.scope),
            _figure(row.sources_present),
            _figure(row.sources_indexed),
            _figure(row.sources_outdated),
            _figure(row.sources_vanished),
            str(row.chunks),
            str(row.chunks_without_vector),
            row.embedding_model or "—",
            row.last_indexed_at or "—",
        )
    console.print(table)
    for root in report.roots:
        where = root.path + (f" @ {root.ref}" if root.ref else "")
        if not root.available:
            console.print(f"[red]unreadable[/red] {root.kind} {safe(where)}: {safe(root.reason)}", highlight=False)
            continue
        console.print(
            f"{root.kind} {safe(where)}: {root.sources_present} sources, {len(root.skipped)} skipped",
            highlight=False,
        )
        for item in root.skipped:
            console.print(f"  [yellow]skipped[/yellow] {safe(item.path)}: {safe(item.reason)}", highlight=False)
    if report.sources_without_root:
        console.print(f"{report.sources_without_root} sources indexed from code (no recorded root)")



def register(app: typer.Typer) -> None:
    """Add ``index``, ``index-sessions``, ``reindex`` and ``coverage`` to the main CLI."""
    app.command()(index)
    app.command("index-sessions")(index_sessions)
    app.command()(reindex)
    app.command()(coverage)
