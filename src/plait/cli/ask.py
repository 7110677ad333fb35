"""``plait ask QUESTION``: an answer grounded in the collection, citing numbered sources (or
``--json``: the HTTP API's model); it says so when nothing fits."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from plait.ask_gate import calibration_note
from plait.cli.options import CollectionOpt, DebugOpt, EmbedderOpt, JsonOpt, LlmOpt, ModeOpt, StoreOpt, console
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.terminal import safe

__all__ = ["register"]


def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    k: Annotated[int | None, typer.Option("-k", help="Sources given to the answer (default 5).")] = None,
    mode: ModeOpt = "hybrid",
    qa_first: Annotated[
        bool, typer.Option("--qa-first", help="Answer with a matching approved FAQ card when there is one.")
    ] = False,
    include_drafts: Annotated[
        bool, typer.Option("--include-drafts", help="With --qa-first, draft cards count too.")
    ] = False,
    rerank: Annotated[str | None, typer.Option(help="llm | cross-encoder: rerank before answering.")] = None,
    scope: Annotated[list[str] | None, typer.Option(help="Only these scopes (repeatable).")] = None,
    min_cosine: Annotated[
        float | None, typer.Option("--min-cosine", help="Relevance gate: dense cosine (default: the collection's calibrated gate).")
    ] = None,
    llm: LlmOpt = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Answer a question from the collection, citing numbered sources; says so when nothing fits."""

    name = _collection(collection)
    with _engine(store, embedder, llm=llm, create=False) as engine:
        result = _run(
            debug,
            lambda: engine.ask(
                question,
                collection=name,
                k=k,
                qa_first=qa_first,
                include_drafts=include_drafts or None,
                rerank=rerank,
                scopes=scope,
                min_cosine=min_cosine,
                mode=mode,
            ),
        )
    if as_json:
        _print_json(result)
        return
    console.print(safe(result.answer), highlight=False, soft_wrap=True)
    console.print()
    for citation in result.citations:
        origin = citation.origin
        where = (
            " › ".join([origin.source_path, *origin.heading_path])
            if origin.kind == "file"
            else f"session {origin.session_id} · event {origin.event_id}"
        )
        console.print(f"[bold][{citation.n}][/bold] [blue]{safe(where)}[/blue]", highlight=False)
        console.print(f"    [dim]“{safe(citation.quote)}”[/dim]", highlight=False)
    line = f"mode {result.mode} · answered by {result.answered_by}"
    line += " · grounded" if result.grounded else " · [yellow]not grounded[/yellow]"
    if result.llm:
        line += f" · {result.llm}"
    if result.invalid_citations:
        line += f" · [yellow]removed invented citations {result.invalid_citations}[/yellow]"
    console.print(line, highlight=False)
    for dropped in result.dropped:
        console.print(f"[yellow]dropped:[/yellow] {escape(dropped.text)} ({escape(dropped.reason)})", highlight=False)
    if result.gate is not None:
        gate = result.gate
        console.print(
            f"[dim]gate: cosine ≥ {gate.min_cosine:.4f} ({gate.cosine_source}) or term coverage ≥ "
            f"{gate.min_term_coverage:.2f} ({gate.coverage_source}){calibration_note(gate)}[/dim]",
            highlight=False,
        )
        for check in result.gate_checks:
            console.print(f"[dim]    {check.chunk_id[:12]} {escape(check.reason)}[/dim]", highlight=False)
    if result.note:
        console.print(f"[yellow]note:[/yellow] {safe(result.note)}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``ask`` to the main CLI."""
    app.command("ask")(ask)
