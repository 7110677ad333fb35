"""File names, folders and titles as lexical evidence (issue 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.service import Plait

ADRS = {
    "0031-email-sending.md": "# 31. Email sending\n\nDate: 2024-01-02\n\n## Status\n\nAccepted\n\n"
    "## Decision\n\nWe send email through the provider's API, never over SMTP.\n",
    "0032-feature-flags.md": "# 32. Feature flags\n\n## Status\n\nAccepted\n\n## Decision\n\n"
    "Flags live in the database and are read per request.\n",
    # The number lives only in the file name: the title says "3.".
    "0033-ip-ranges.md": "# 3. Networking Outline\n\n## Status\n\nAccepted\n\n## Decision\n\n"
    "Each environment gets its own address block, allocated from one plan.\n",
}
# A guide that mentions ADR numbers in passing, many times, must not beat the ADR itself.
GUIDE = "# Reading decisions\n\n" + "See ADR 31 and ADR 32 for the history of the registrar. " * 3 + "\n"


@pytest.fixture
def engine(tmp_path: Path) -> Plait:
    root = tmp_path / "repo"
    decisions = root / "docs" / "architecture" / "decisions"
    decisions.mkdir(parents=True)
    for name, text in ADRS.items():
        (decisions / name).write_text(text, encoding="utf-8")
    (root / "docs" / "guide.md").write_text(GUIDE, encoding="utf-8")
    engine = Plait(str(tmp_path / "plait.db"), embedder="none")
    engine.index(root)
    return engine


@pytest.mark.parametrize("query", ["what does ADR 0033 decide", "ADR 33", "adr 0033 decision"])
def test_adr_number_in_the_file_name_finds_the_file(engine: Plait, query: str) -> None:
    hits = engine.search(query, k=3).hits
    assert hits[0].origin.source_path == "docs/architecture/decisions/0033-ip-ranges.md"


def test_path_words_do_not_swamp_the_content(engine: Plait) -> None:
    # "decisions" is in every ADR's path, once per chunk; the guide has it in its title
    # and its text: the guide, which is about reading decisions, comes first.
    hits = engine.search("reading decisions", k=3).hits
    assert hits[0].origin.source_path == "docs/guide.md"


def test_title_reaches_the_lexical_arm(engine: Plait) -> None:
    # "Networking" is only in the H1 title of 0033; its Decision chunk finds it too.
    hits = engine.search("networking decision address block", k=3).hits
    assert hits[0].origin.source_path == "docs/architecture/decisions/0033-ip-ranges.md"
    assert hits[0].origin.heading_path == ["3. Networking Outline", "Decision"]
