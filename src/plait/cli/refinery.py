"""CLI commands for the Knowledge Refinery, added by :func:`register`:

``plait refinery run|status|cancel|list|settings`` and
``plait faq list|approve|reject|edit``. Each takes ``--store``, ``--collection`` and
``--embedder``; each that prints results takes ``--json`` (the HTTP API's model).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from plait.cli.options import CollectionOpt, DebugOpt, EmbedderOpt, JsonOpt, LlmOpt, StoreOpt, console, err
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.refinery.models import EditedCard, FaqCard, RefineryRun, RunProgress
from plait.terminal import safe
from plait.types import to_json

if TYPE_CHECKING:
    from plait.refinery import Refinery

__all__ = ["register"]

# refinery ---------------------------------------------------------------------------
refinery_app = typer.Typer(help="Knowledge Refinery: distil FAQ cards from a collection in runs.")


def _print_run(run: RefineryRun) -> None:

    p = run.progress
    colour = {"succeeded": "green", "failed": "red", "cancelled": "yellow"}.get(run.status.value, "cyan")
    console.print(
        f"run {safe(run.id)} · {safe(run.collection)} · [{colour}]{run.status.value}[/{colour}] · mode {run.mode.value}",
        highlight=False,
    )
    console.print(
        f"chunks {p.chunks_scanned}/{p.chunks_total} · cards made {p.cards_made} · merged {p.cards_merged}"
        + (f" · LLM calls {p.llm_calls}" if p.llm_calls else "")
        + (f" · groups skipped {p.groups_skipped}" if p.groups_skipped else ""),
        highlight=False,
    )
    console.print(
        f"created {run.created_at} · started {run.started_at or '—'} · finished {run.finished_at or '—'}",
        highlight=False,
    )
    if run.error:
        console.print(f"[red]error:[/red] {safe(run.error)}", highlight=False)
    if run.cancel_requested and not run.status.finished:
        console.print("cancel requested: the run stops after its current group of chunks", highlight=False)
    if run.note:
        console.print(f"note: {safe(run.note)}", highlight=False)


@refinery_app.command("run")
def refinery_run(
    mode: Annotated[str, typer.Option(help="auto (llm if configured) | llm | extractive")] = "auto",
    detach: Annotated[
        bool, typer.Option("--detach", help="Start a background worker process and return at once.")
    ] = False,
    llm: LlmOpt = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Distil FAQ cards from the collection: waits with a progress bar, or --detach."""
    from plait.config import Settings

    name = _collection(collection)
    with _engine(store, embedder, llm=llm) as engine:
        refinery = engine.refinery
        if detach:
            from plait.refinery.worker import worker_command, worker_env

            run = _run(debug, lambda: refinery.create_run(name, mode=mode))
            resolved = Settings.resolve(store=store, embedder=embedder)
            argv = worker_command(run.id, store=resolved.store, embedder=resolved.embedder, llm=llm)
            subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=worker_env(),
                start_new_session=True,
            )
            run = refinery.store.get_run(run.id)
        elif as_json or not err.is_terminal:
            run = _run(debug, lambda: refinery.run(name, mode=mode))
        else:
            run = _with_bar(debug, lambda tick: refinery.run(name, mode=mode, progress=tick))
    if as_json:
        _print_json(run)
    else:
        _print_run(run)
        if detach:

            console.print(f"follow it with: plait refinery status {run.id}", highlight=False)
    if run.status.value == "failed":
        raise typer.Exit(1)


def _with_bar(debug: bool, action: Any) -> RefineryRun:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )


    with Progress(
        TextColumn("[bold]refining"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks · {task.fields[cards]} cards"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("refine", total=None, cards=0)

        def tick(progress: RunProgress) -> None:
            bar.update(task, total=progress.chunks_total, completed=progress.chunks_scanned, cards=progress.cards_made)

        result: RefineryRun = _run(debug, lambda: action(tick))
        return result


#: ``--collection`` of status and cancel: a run id names one run, so no collection is
#: needed; one given must be the run's (as over HTTP, where the path names it).
RunCollectionOpt = Annotated[
    str | None,
    typer.Option(
        "--collection",
        "-c",
        help="The run's collection: a run of another collection is not found "
        "(default: any collection; PLAIT_COLLECTION does not narrow it).",
    ),
]


def _run_command(
    action: Callable[[Refinery, str, str | None], RefineryRun], doc: str
) -> Callable[..., None]:
    """A command that does ``action`` to one run (of ``--collection`` when given) and
    prints it (status, cancel)."""

    def command(
        run_id: Annotated[str, typer.Argument(help="The run id (see 'plait refinery list').")],
        store: StoreOpt = None,
        collection: RunCollectionOpt = None,
        embedder: EmbedderOpt = None,
        as_json: JsonOpt = False,
        debug: DebugOpt = False,
    ) -> None:
        with _engine(store, embedder) as engine:
            run = _run(debug, lambda: action(engine.refinery, run_id, collection))
        _print_json(run) if as_json else _print_run(run)

    command.__doc__ = doc
    return command


refinery_app.command("status")(
    _run_command(
        lambda refinery, run_id, collection: refinery.get_run(run_id, collection),
        "A run's status, progress, timestamps and error.",
    )
)
refinery_app.command("cancel")(
    _run_command(
        lambda refinery, run_id, collection: refinery.cancel(run_id, collection),
        "Ask a run to stop (a queued run stops at once; a running one after its current group).",
    )
)


@refinery_app.command("list")
def refinery_list(
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """The collection's runs, newest first."""
    from rich.table import Table


    name = _collection(collection)
    with _engine(store, embedder) as engine:
        runs = _run(debug, lambda: engine.refinery.list_runs(name))
    if as_json:
        _print_json([to_json(r) for r in runs])
        return
    table = Table(title=f"refinery runs of {safe(name)}")
    for column in ("id", "status", "mode", "chunks", "cards", "created", "error"):
        table.add_column(column)
    for r in runs:
        table.add_row(
            r.id, r.status.value, r.mode.value, f"{r.progress.chunks_scanned}/{r.progress.chunks_total}",
            str(r.progress.cards_made), r.created_at, safe(r.error) if r.error else "—",
        )
    console.print(table)


@refinery_app.command("settings")
def refinery_settings(
    enable: Annotated[bool | None, typer.Option("--enable/--disable", help="Allow runs on the collection.")] = None,
    scope: Annotated[list[str] | None, typer.Option(help="Scan only these scopes (repeatable).")] = None,
    all_scopes: Annotated[bool, typer.Option("--all-scopes", help="Scan every scope again.")] = False,
    max_cards: Annotated[int | None, typer.Option("--max-cards", help="Most non-rejected cards.")] = None,
    include_drafts: Annotated[
        bool | None, typer.Option("--qa-drafts/--qa-approved-only", help="Let qa_first serve drafts.")
    ] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Show or change the collection's refinery settings."""

    name = _collection(collection)
    changes: dict[str, Any] = {}
    if enable is not None:
        changes["enabled"] = enable
    if scope:
        changes["scopes"] = list(scope)
    if all_scopes:
        changes["scopes"] = None
    if max_cards is not None:
        changes["max_cards"] = max_cards
    if include_drafts is not None:
        changes["qa_include_drafts"] = include_drafts
    with _engine(store, embedder) as engine:
        refinery = engine.refinery
        settings = _run(
            debug, lambda: refinery.configure(name, **changes) if changes else refinery.settings(name)
        )
    if as_json:
        _print_json(settings)
        return
    for key, value in to_json(settings).items():
        console.print(f"{key}: {value}", highlight=False)


# faq ------------------------------------------------------------------------------
faq_app = typer.Typer(help="FAQ cards: list and review (approve, reject, edit).")


def _print_card(card: FaqCard, *, full: bool = True) -> None:

    colour = {"approved": "green", "rejected": "red"}.get(card.status.value, "yellow")
    console.print(
        f"[bold]{card.id}[/bold] [{colour}]{card.status.value}[/{colour}] ({card.mode.value}) {safe(card.question)}",
        highlight=False,
    )
    answer = card.answer if full else card.answer[:160] + ("…" if len(card.answer) > 160 else "")
    console.print(f"    {safe(answer)}", highlight=False, soft_wrap=True)
    console.print(f"    [dim]sources: {safe(', '.join(card.sources))}[/dim]", highlight=False)
    if isinstance(card, EditedCard) and card.note:
        console.print(f"note: {safe(card.note)}", highlight=False)


@faq_app.command("list")
def faq_list(
    status: Annotated[str | None, typer.Option(help="draft | approved | rejected")] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """The collection's FAQ cards, oldest first."""

    name = _collection(collection)
    with _engine(store, embedder) as engine:
        cards = _run(debug, lambda: engine.refinery.cards(name, status=status))
    if as_json:
        _print_json([to_json(c) for c in cards])
        return
    if not cards:
        console.print("no cards")
    for card in cards:
        _print_card(card, full=False)


def _review(action: str, card_id: str, store: str | None, collection: str | None, embedder: str | None,
            as_json: bool, debug: bool, **changes: Any) -> None:

    name = _collection(collection)
    with _engine(store, embedder) as engine:
        refinery = engine.refinery
        if action == "edit":
            card = _run(debug, lambda: refinery.edit(name, card_id, **changes))
        else:
            card = _run(debug, lambda: getattr(refinery, action)(name, card_id))
    _print_json(card) if as_json else _print_card(card)


def _review_command(action: str, doc: str) -> Callable[..., None]:
    """``plait faq approve`` / ``reject``: ``action`` on one card, printed."""

    def command(
        card_id: Annotated[str, typer.Argument(help="The card id.")],
        store: StoreOpt = None,
        collection: CollectionOpt = None,
        embedder: EmbedderOpt = None,
        as_json: JsonOpt = False,
        debug: DebugOpt = False,
    ) -> None:
        _review(action, card_id, store, collection, embedder, as_json, debug)

    command.__doc__ = doc
    return command


faq_app.command("approve")(_review_command("approve", "Approve a card: qa_first serves it from now on."))
faq_app.command("reject")(
    _review_command("reject", "Reject a card: it leaves the index and later runs do not draft it again.")
)


@faq_app.command("edit")
def faq_edit(
    card_id: Annotated[str, typer.Argument(help="The card id.")],
    question: Annotated[str | None, typer.Option(help="The new question.")] = None,
    answer: Annotated[str | None, typer.Option(help="The new answer.")] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Change a card's question and/or answer (an approved card whose text changes is a
    draft again, to be approved anew)."""
    _review("edit", card_id, store, collection, embedder, as_json, debug, question=question, answer=answer)


def register(app: typer.Typer) -> None:
    """Add ``refinery`` and ``faq`` to the main CLI."""
    app.add_typer(refinery_app, name="refinery")
    app.add_typer(faq_app, name="faq")
