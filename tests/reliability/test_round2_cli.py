"""Issue 23 D15: read-only commands never create a store; a mistyped --store is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.errors import NotFoundError
from plait.service import Plait

COMMANDS = [
    ["search", "ERR-4012"],
    ["explain", "ERR-4012", "--doc", "kb-101"],
    ["ask", "What is ERR-4012?"],
    ["coverage"],
    ["collections"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_read_only_commands_never_create_a_store(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo" / "plait.db"
    done = CliRunner().invoke(app, [*command, "--store", str(missing), "--embedder", "fake"], env={"COLUMNS": "300"})
    assert done.exit_code == 1, done.output
    assert done.output.strip() == (
        f"error: store {missing} does not exist (check --store or PLAIT_STORE; `plait index` creates one)"
    )
    assert not missing.exists() and not missing.parent.exists()


def test_the_library_can_refuse_to_create_and_still_creates_by_default(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    with pytest.raises(NotFoundError, match="does not exist"):
        Plait(str(missing), embedder="fake", create_store=False)
    assert not missing.exists()
    with Plait(str(missing), embedder="fake") as engine:  # indexing creates it, as before
        assert engine.collections() == []
    assert missing.exists()
    with Plait(str(missing), embedder="fake", create_store=False) as engine:
        assert engine.collections() == []
