"""The ``plait`` command line: a thin adapter over :class:`plait.service.Plait`.

One module per command group (:mod:`plait.cli.index`, :mod:`~plait.cli.collections`,
:mod:`~plait.cli.search`, :mod:`~plait.cli.explain`, :mod:`~plait.cli.serve`,
:mod:`~plait.cli.eval`, :mod:`~plait.cli.ask`, :mod:`~plait.cli.refinery`), each adding its
commands with ``register(app)``; the options they share are in :mod:`plait.cli.options`.

Every command takes ``--store``, ``--collection`` and ``--embedder`` (``plait backup``, the
whole store as it is, refuses the last two when given); every command that
prints results takes ``--json`` and then prints exactly the camelCase model the HTTP
API returns. Exit code 0 on success, 1 on a user error with a one-line message (no
traceback unless ``--debug``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from plait.cli import ask, explain, index, refinery, search, serve, transfer
from plait.cli import collections as collections_group
from plait.cli import eval as eval_group
from plait.cli import usage as usage_group
from plait.cli.logs import configure_logging, level_for
from plait.cli.options import fail, fit_consoles
from plait.errors import ConfigError

__all__ = ["app", "main"]

app = typer.Typer(
    name="plait",
    help="Hybrid retrieval for RAG: BM25 + dense vectors, fused before the cut, with citations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _logging(
    verbose: Annotated[
        int, typer.Option("--verbose", "-v", count=True, help="Show the log: -v info, -vv debug (stderr).")
    ] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Log errors only.")] = False,
) -> None:
    """Hybrid retrieval for RAG: BM25 + dense vectors, fused before the cut, with citations."""
    fit_consoles()
    try:
        configure_logging(level_for(verbose, quiet))
    except ConfigError as exc:
        fail(str(exc))


for _group in (index, collections_group, search, explain, serve, eval_group, ask, refinery, transfer, usage_group):
    _group.register(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
