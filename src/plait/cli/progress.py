"""The indexing commands' foreground: two progress bars, and what Ctrl-C leaves.

Indexing writes every chunk (searchable lexically) before it embeds any, so the first
bar counts sources written, then a line says the collection answers already, then the
second bar counts chunks embedded out of all chunks, with the rate and an ETA. Ctrl-C
stops after the batch in flight is lost or committed: the index stays searchable and
the message says how to resume. Bars only on a terminal, nothing extra with ``--json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from plait.cli.options import run_or_exit
from plait.terminal import safe
from plait.types import IndexReport

__all__ = ["IndexProgress", "coverage_text", "run_indexing"]

DocTick = Callable[[int, int, int | None], None]
VectorTick = Callable[[int, int], None]
Action = Callable[[DocTick | None, VectorTick | None], IndexReport]


def coverage_text(coverage: float) -> str:
    """``0.4237`` → ``"dense arm over 42% of chunks"`` (rounded down: never 100% early)."""
    return f"dense arm over {int(coverage * 100)}% of chunks"


class _Rate(ProgressColumn):
    """Chunks embedded per second in this run."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.1f} chunks/s")


def _document_columns(*, known: bool) -> list[ProgressColumn]:
    """The first bar's columns: with a known number of sources, N/M and an ETA."""
    if not known:
        return [
            TextColumn("[bold]indexing"),
            BarColumn(),
            TextColumn("{task.completed} sources · {task.fields[chunks]} chunks"),
            TimeElapsedColumn(),
        ]
    return [
        TextColumn("[bold]indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sources · {task.fields[chunks]} chunks · ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
    ]


class IndexProgress:
    """The bars of one indexing command (or, off a terminal, one line per phase)."""

    def __init__(self, console: Console, *, bars: bool, quiet: bool) -> None:
        self.console = console
        self.bars = bars
        self.quiet = quiet
        self._docs: Progress | None = None
        self._docs_task: TaskID | None = None
        self._vectors: Progress | None = None
        self._vectors_task: TaskID | None = None
        self.embedding_started = False

    def documents(self, docs: int, chunks: int, total: int | None) -> None:
        """A source done; with ``total`` known (a folder, a git tree) the bar shows N/M and an ETA."""
        if not self.bars:
            return
        if self._docs is None:
            self._docs = Progress(*_document_columns(known=total is not None), console=self.console, transient=True)
            self._docs.start()
            self._docs_task = self._docs.add_task("index", total=total, chunks=0)
        if self._docs_task is not None:
            self._docs.update(self._docs_task, completed=docs, total=total, chunks=chunks)

    def vectors(self, done: int, total: int) -> None:
        if not self.embedding_started:
            self.embedding_started = True
            self._stop_docs()
            if not self.quiet and done < total:
                self.console.print(
                    f"searchable now (lexical): {total} chunks written; embedding the "
                    f"{total - done} without a vector — Ctrl-C stops, the index stays searchable",
                    highlight=False,
                    soft_wrap=True,
                )
            if self.bars and done < total:
                self._vectors = Progress(
                    TextColumn("[bold]embedding"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn("chunks"),
                    _Rate(),
                    TextColumn("ETA"),
                    TimeRemainingColumn(),
                    TimeElapsedColumn(),
                    console=self.console,
                    transient=True,
                )
                self._vectors.start()
                self._vectors_task = self._vectors.add_task("embed", total=total, completed=done)
            return
        if self._vectors is not None and self._vectors_task is not None:
            self._vectors.update(self._vectors_task, completed=done, total=total)

    def _stop_docs(self) -> None:
        if self._docs is not None:
            self._docs.stop()
            self._docs = None

    def close(self) -> None:
        self._stop_docs()
        if self._vectors is not None:
            self._vectors.stop()
            self._vectors = None


def run_indexing(
    debug: bool,
    action: Action,
    *,
    console: Console,
    as_json: bool,
    coverage: Callable[[], float | None],
    resume: str,
) -> IndexReport:
    """Run an indexing action in the foreground; Ctrl-C exits 130 saying how to resume.

    ``coverage`` reads the collection's vector coverage afterwards (None if unknown);
    ``resume`` is the command that continues the work.
    """
    progress = IndexProgress(console, bars=not as_json and console.is_terminal, quiet=as_json)
    try:
        return run_or_exit(debug, lambda: action(progress.documents, progress.vectors))
    except KeyboardInterrupt:
        progress.close()
        share: Any = None
        try:
            share = coverage()
        except Exception:  # noqa: BLE001 - the message must still be printed
            share = None
        state = "lexical only" if not share else "lexical + " + coverage_text(share)
        console.print(
            f"[yellow]interrupted[/yellow]: the index stays searchable ({state}); what was "
            f"committed is kept. Resume with: {safe(resume)}  (or 'plait serve', which embeds the "
            "rest in the background)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    finally:
        progress.close()
