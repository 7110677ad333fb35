"""Every CLI command follows the interface rules (issue 19): --store, --collection and
--embedder on each, --json on each that prints results; the package keeps the
``plait = "plait.cli:main"`` entry point and ``python -m plait.cli`` working."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from plait.cli import app, main

ROOT = Path(__file__).resolve().parents[1]
#: Long-running servers print a banner, not results: the only commands without --json.
SERVERS = {"serve", "mcp"}


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(``"refinery run"``, click command) for every leaf command, sub-apps included."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def _options(command: Any) -> dict[str, Any]:
    return {opt: param for param in command.params for opt in getattr(param, "opts", [])}


def test_every_command_takes_store_collection_embedder_and_json() -> None:
    commands = dict(_commands(typer.main.get_command(app)))
    # the walk reaches the top-level commands and the sub-apps' ones
    assert {"index", "search", "explain", "ask", "serve", "collections", "eval", "refinery run", "faq edit",
            "keys create"} <= commands.keys()
    assert len(commands) >= 26
    for name, command in commands.items():
        options = _options(command)
        for required in ("--store", "--collection", "--embedder", "--debug"):
            assert required in options, f"plait {name} lacks {required}"
        if name in SERVERS:
            assert "--json" not in options
            continue
        assert "--json" in options, f"plait {name} prints results but has no --json"
        assert options["--json"].is_flag, f"plait {name}: --json takes no value"


def test_entry_point_and_module_run() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts == {"plait": "plait.cli:main"}
    assert callable(main)
    done = subprocess.run(
        [sys.executable, "-m", "plait.cli", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    for name in ("index", "search", "explain", "ask", "serve", "refinery", "faq", "keys", "eval"):
        assert name in done.stdout


def test_piped_output_is_not_cut_to_80_columns(tmp_path: Path) -> None:
    """``plait coverage | cat`` printed "prese…", "index…" (rich's 80 columns for a
    pipe); a pipe now gets 160, and ``COLUMNS`` still decides when set."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    db = str(tmp_path / "p.db")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}

    def run(*args: str, columns: str | None = None) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "plait.cli", *args, "--store", db, "--embedder", "fake"],
            capture_output=True, text=True, timeout=120, check=False,
            env=env if columns is None else {**env, "COLUMNS": columns},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("index", str(docs))
    wide = run("coverage")
    assert "present" in wide and "indexed" in wide and "last indexed" in wide and "…" not in wide
    assert "…" in run("coverage", columns="60")


def test_each_command_fits_its_consoles_to_its_own_columns(tmp_path: Path) -> None:
    """The consoles are made once, at import: ``COLUMNS`` given to a later command in the
    same process (a test's runner, a program embedding the CLI) was ignored, and the
    width depended on which import came first (80 under pytest-xdist, 160 serially)."""
    from typer.testing import CliRunner

    from plait.cli import options

    command = ["collections", "--store", str(tmp_path / "none.db"), "--embedder", "fake"]
    runner = CliRunner()
    done = runner.invoke(app, command, env={"COLUMNS": "123"})
    assert done.exit_code == 1 and "does not exist" in done.output  # the callback ran all the same
    assert (options.console.width, options.err.width) == (123, 123)
    done = runner.invoke(app, command, env={"COLUMNS": None})
    assert done.exit_code == 1
    assert (options.console.width, options.err.width) == (options.PIPE_WIDTH, options.PIPE_WIDTH) == (160, 160)


#: The CLI flag of each HTTP search-request field whose flag is not the field's name in kebab case.
_FLAG_OF = {"k": "-k", "scopes": "--scope", "metadata": "--meta", "language_prior": "--language-prior"}


def test_search_and_explain_take_every_field_of_the_http_search_request() -> None:
    """Regression (helper walk-through, stop 44): the CLI had no --rrf-k or --threshold, and
    explain no --meta or --group-by, so a search made over HTTP could not be made, or
    explained, on the command line. qaFirst is search's alone (explain refuses it)."""
    from plait.retrieval.request import SearchRequest

    commands = dict(_commands(typer.main.get_command(app)))
    for name in ("search", "explain"):
        options = _options(commands[name])
        for field in SearchRequest.model_fields:
            if field == "query" or (name == "explain" and field == "qa_first"):
                continue
            flag = _FLAG_OF.get(field, "--" + field.replace("_", "-"))
            assert flag in options, f"plait {name} lacks {flag} (the request's {field})"
