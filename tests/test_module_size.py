"""No module of ``src/plait`` over 600 lines (issue 19): one concept per module."""

from __future__ import annotations

from pathlib import Path

import plait

LIMIT = 600


def test_no_module_over_600_lines() -> None:
    root = Path(plait.__file__).parent
    sizes = {str(p.relative_to(root)): len(p.read_text(encoding="utf-8").splitlines()) for p in root.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
    assert sizes["__init__.py"] > 0 and len(sizes) > 100  # the walk found the package
