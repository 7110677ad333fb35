"""What every CLI command shares: the ``--store``, ``--collection``, ``--embedder``,
``--json``, ``--debug`` options, running an action with one-line errors, and printing
JSON, the consoles and opening the engine — defined once for the command modules of
:mod:`plait.cli`, which import this module and never the package itself (it imports
them: no cycle)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from plait.collection_names import given_name
from plait.config import Settings
from plait.errors import PlaitError
from plait.types import to_json

if TYPE_CHECKING:
    from plait.service import Plait

__all__ = [
    "CollectionOpt",
    "DebugOpt",
    "EmbedderOpt",
    "JsonOpt",
    "LlmOpt",
    "MaxPerSourceOpt",
    "ModeOpt",
    "StoreOpt",
    "collection_name",
    "console",
    "err",
    "fail",
    "fit_consoles",
    "make_console",
    "open_engine",
    "print_json",
    "run_or_exit",
]

T = TypeVar("T")
#: Columns for output that goes to a pipe or a file: rich's 80 cut table cells to
#: "prese…" and wrapped paths mid-line. ``COLUMNS`` still wins; a terminal uses its size.
PIPE_WIDTH = 160


_CONSOLES: list[Console] = []


def _width(stderr: bool) -> int:
    """``COLUMNS`` when set, else :data:`PIPE_WIDTH` for a pipe or file, else the terminal's."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = sys.stderr if stderr else sys.stdout
    try:
        piped = not stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        piped = True
    return PIPE_WIDTH if piped else shutil.get_terminal_size().columns


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr), its width that of :func:`fit_consoles`."""
    made = Console(stderr=stderr, width=_width(stderr))
    _CONSOLES.append(made)
    return made


def fit_consoles() -> None:
    """Fits every console to the streams and ``COLUMNS`` of this command: the consoles are
    made once, at import, and a process (a test's runner, an embedding program) may run
    several commands with other streams or another ``COLUMNS``."""
    for each in _CONSOLES:
        each.width = _width(each.stderr)


#: Where every command prints its results, and its errors.
console = make_console()
err = make_console(stderr=True)
_err = err


@contextmanager
def open_engine(
    store: str | None,
    embedder: str | None,
    *,
    llm: str | None = None,
    cross_encoder: str | None = None,
    create: bool = True,
    keys: Path | None = None,
    walk_max_age: float = 0.0,
) -> Iterator[Plait]:
    """The engine for a command; ``create=False`` (read-only commands) never creates a store."""
    from plait.service import Plait

    settings = Settings.resolve(store=store, embedder=embedder)
    try:
        engine = Plait(
            settings.store,
            embedder=settings.embedder,
            llm=llm,
            cross_encoder=cross_encoder,
            create_store=create,
            keys=keys,
            walk_max_age=walk_max_age,
        )
    except PlaitError as exc:  # e.g. the store server is unreachable: one line, exit 1
        fail(str(exc))
    try:
        yield engine
    except BaseException as exc:
        # a failed command removes a store it created and left empty (an Exit 0 is no failure)
        engine.close(failed=not (isinstance(exc, typer.Exit) and exc.exit_code == 0))
        raise
    engine.close()


def collection_name(name: str | None) -> str:
    """The collection a command works on: ``--collection``, else ``PLAIT_COLLECTION``, else
    ``default``; an explicit ``-c ""`` is an error, not the default."""
    try:
        return given_name(name, Settings.resolve().collection)
    except PlaitError as exc:
        fail(str(exc))

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
        help="e5-minilm | e5 | minilm | ollama | openai | none (default: the collection's recorded one, else e5-minilm).",
    ),
]
ModeOpt = Annotated[
    str, typer.Option("--mode", help="hybrid (both arms) | lexical (no embedding) | vector (no BM25).")
]
MaxPerSourceOpt = Annotated[
    int | None,
    typer.Option("--max-per-source", help="At most N chunks of one source file or session in the hits."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the API's JSON model.")]
#: ask and the refinery: the LLM that writes answers and cards.
LlmOpt = Annotated[
    str | None, typer.Option("--llm", help="ollama | openai | none (env PLAIT_LLM; none: no LLM).")
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks (and per-stage timings).")]


def fail(message: str) -> NoReturn:
    """A user error: ``message`` as one red line on stderr, exit code 1."""
    _err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1) from None


def port_or_exit(port: int) -> int:
    """``port`` when it is a TCP port (1..65535), else :func:`fail`."""
    if not 0 < port < 65536:
        fail(f"--port {port} is not in 1..65535")
    return port


def run_or_exit(debug: bool, action: Callable[[], T]) -> T:
    """Run ``action``; a :class:`PlaitError` becomes one red line and exit code 1
    (re-raised with ``--debug``)."""
    try:
        return action()
    except PlaitError as exc:
        if debug:
            raise
        fail(str(exc))


def print_json(model: BaseModel | list[Any] | dict[str, Any]) -> None:
    """Print a model as its camelCase JSON (the HTTP API's form), or plain JSON data."""
    data = to_json(model) if isinstance(model, BaseModel) else model
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
