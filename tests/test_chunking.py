"""Tests for plait.chunking: exact spans, heading paths, and properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait.chunking import (
    ChunkSettings,
    TextChunk,
    chunk_markdown,
    chunk_text,
    split_by_size,
)
from plait.errors import ConfigError

SMALL = ChunkSettings(target=50, overlap=10, window=15)


def spans(chunks: list[TextChunk]) -> list[tuple[int, int]]:
    return [(chunk.start, chunk.end) for chunk in chunks]


def paths(chunks: list[TextChunk]) -> list[tuple[str, ...]]:
    return [chunk.heading_path for chunk in chunks]


# --- settings -------------------------------------------------------------------------


def test_default_settings() -> None:
    assert ChunkSettings() == ChunkSettings(target=1200, overlap=150, window=200)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"target": 0}, "0"),
        ({"target": -5}, "-5"),
        ({"overlap": -1}, "-1"),
        ({"target": 100, "overlap": 100}, "100"),
        ({"target": 100, "overlap": 250}, "250"),
        ({"window": -3}, "-3"),
        ({"target": 12.5}, "12.5"),
        ({"window": True}, "True"),
        ({"overlap": "10"}, "'10'"),
    ],
)
def test_bad_settings_raise_config_error(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        ChunkSettings(**kwargs)  # type: ignore[arg-type]
    assert named in str(excinfo.value)


def test_settings_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        ChunkSettings(50, 10, 15)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        SMALL.target = 10  # type: ignore[misc]


def test_zero_overlap_and_zero_window_are_allowed() -> None:
    assert split_by_size("x" * 25, ChunkSettings(target=10, overlap=0, window=0)) == [
        (0, 10),
        (10, 20),
        (20, 25),
    ]


# --- the size rule, hand-computed with target=50, overlap=10, window=15 -----------------
# Cut candidates for a chunk at ``pos`` lie in (pos+35, pos+65]; the ideal is pos+50.


def test_empty_and_whitespace_only_input() -> None:
    assert chunk_text("") == []
    assert chunk_markdown("") == []
    assert split_by_size("", SMALL) == []
    assert chunk_text(" \n\t\r\n \u3000") == []
    assert chunk_markdown("\n\n   \n") == []


def test_short_text_is_one_trimmed_chunk() -> None:
    text = "  \n hello world \n\n"
    assert chunk_text(text, SMALL) == [
        TextChunk(text="hello world", start=4, end=15, heading_path=())
    ]


def test_exactly_target_is_one_chunk() -> None:
    assert split_by_size("y" * 50, SMALL) == [(0, 50)]
    assert split_by_size("y" * 51, SMALL) == [(0, 50), (40, 51)]


def test_paragraph_break_is_preferred_over_a_nearer_word_break() -> None:
    # "\n\n" at 38-39; the space at 49 is nearer the ideal 50, but the break wins.
    text = "x" * 38 + "\n\n" + "word " * 20
    assert split_by_size(text, SMALL) == [(0, 38), (40, 89), (80, 129), (120, 139)]
    # After the paragraph cut the overlap region [28, 38) is one word: no overlap.
    # Later chunks cut at the space nearest the ideal (89 = 40+49, 129 = 80+49)
    # and restart at the first word start within 10 characters before the cut.
    chunks = chunk_text(text, SMALL)
    assert chunks[0].text == "x" * 38
    assert chunks[1].text == ("word " * 10).strip()
    assert chunks[2].text == ("word " * 10).strip()
    assert chunks[1].end - chunks[2].start == 9
    assert chunks[3].text == "word word word word"


def test_paragraph_break_with_crlf() -> None:
    text = "x" * 38 + "\r\n\r\n" + "word " * 20
    chunks = chunk_text(text, SMALL)
    assert spans(chunks) == [(0, 38), (42, 91), (82, 131), (122, 141)]
    assert all("\r" not in chunk.text[-1:] for chunk in chunks)


def test_paragraph_break_nearest_the_target_wins() -> None:
    # Breaks at 37 and 58: 58 is 8 away from 50, 37 is 13 away.
    text = "a" * 37 + "\n\n" + "b" * 19 + "\n\n" + "c" * 30
    assert text.index("\n\n", 40) == 58
    assert split_by_size(text, SMALL) == [(0, 58), (60, 90)]


def test_blank_line_with_spaces_is_a_paragraph_break() -> None:
    text = "a" * 40 + "\n  \t\n" + "b " * 30
    assert split_by_size(text, SMALL)[0] == (0, 40)


def test_word_break_nearest_the_target_forward() -> None:
    # Spaces at 45 (5 before the ideal 50) and 52 (2 after): 52 wins.
    text = "x" * 45 + " " + "y" * 6 + " " + "z" * 60
    assert split_by_size(text, SMALL) == [(0, 52), (46, 96), (86, 113)]
    # Second chunk: no whitespace in (81, 111], so it is cut mid-word at 96 and the
    # next one keeps the full overlap of 10.


def test_word_break_tie_goes_to_the_earlier_position() -> None:
    text = "x" * 47 + " " + "y" * 5 + " " + "z" * 20
    # spaces at 47 and 53, both 3 away from 50
    assert split_by_size(text, SMALL)[0] == (0, 47)


def test_mid_word_only_without_whitespace_in_the_window() -> None:
    assert split_by_size("x" * 120, SMALL) == [(0, 50), (40, 90), (80, 120)]
    # A space at 10 lies outside the window (35, 65]: still a hard cut at 50.
    assert split_by_size("x" * 10 + " " + "x" * 100, SMALL) == [(0, 50), (40, 90), (80, 111)]


def test_window_edges() -> None:
    # A space at 36 is inside (35, 65]; a space at 35 is not.
    inside = "x" * 36 + " " + "y" * 40
    outside = "x" * 35 + " " + "y" * 40
    assert split_by_size(inside, SMALL)[0] == (0, 36)
    assert split_by_size(outside, SMALL)[0] == (0, 50)
    # A space at 65 is inside; at 66 it is not.
    assert split_by_size("x" * 65 + " " + "y" * 10, SMALL)[0] == (0, 65)
    assert split_by_size("x" * 66 + " " + "y" * 10, SMALL)[0] == (0, 50)


def test_overlap_restarts_at_a_word_start() -> None:
    text = "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm"
    chunks = chunk_text(text, SMALL)
    # Word k starts at 5k. The ideal 50 starts "kkkk", the nearest space is 49 (after
    # "jjjj"); the next chunk restarts at "iiii" (40), the first word start in [39, 49).
    assert spans(chunks) == [(0, 49), (40, 64)]
    assert chunks[1].text.startswith("iiii")


def test_long_line_without_spaces() -> None:
    text = "é" * 100_000
    chunks = chunk_text(text)
    assert all(len(chunk.text) == 1200 for chunk in chunks[:-1])
    assert all(b.start == a.end - 150 for a, b in itertools.pairwise(chunks))
    assert chunks[-1].end == len(text)


# --- Markdown sections ------------------------------------------------------------------

ADR = """Intro text.

# Decisão

Contexto.

## 1. Origem

Texto um.

## 2. Chunking

Texto dois.

```python
# comment
x = 1
```

### 2.1 Detalhe

Mais.

# Outro

Fim.
"""


def test_heading_paths_nested() -> None:
    chunks = chunk_markdown(ADR)
    assert paths(chunks) == [
        (),
        ("Decisão",),
        ("Decisão", "1. Origem"),
        ("Decisão", "2. Chunking"),
        ("Decisão", "2. Chunking", "2.1 Detalhe"),
        ("Outro",),
    ]
    assert [chunk.text for chunk in chunks] == [
        "Intro text.",
        "# Decisão\n\nContexto.",
        "## 1. Origem\n\nTexto um.",
        "## 2. Chunking\n\nTexto dois.\n\n```python\n# comment\nx = 1\n```",
        "### 2.1 Detalhe\n\nMais.",
        "# Outro\n\nFim.",
    ]
    assert list(chunks[3].heading_path) == ["Decisão", "2. Chunking"]
    assert all(ADR[chunk.start : chunk.end] == chunk.text for chunk in chunks)


def test_heading_paths_with_crlf() -> None:
    chunks = chunk_markdown(ADR.replace("\n", "\r\n"))
    assert paths(chunks)[3] == ("Decisão", "2. Chunking")
    assert chunks[1].text == "# Decisão\r\n\r\nContexto."


def test_fenced_code_comments_are_not_headings() -> None:
    text = "# Top\n\n~~~sh\n# not a heading\n```\n# still code\n~~~\n\n## Sub\n\nbody\n"
    chunks = chunk_markdown(text)
    assert paths(chunks) == [("Top",), ("Top", "Sub")]
    assert "# still code" in chunks[0].text


def test_fence_closes_only_with_same_char_at_least_as_long() -> None:
    text = "````\n```\n# code\n````\n# Real\nx\n"
    assert paths(chunk_markdown(text)) == [(), ("Real",)]


def test_unclosed_fence_runs_to_the_end() -> None:
    text = "# A\n```\n# code\n\n# more code\n"
    assert paths(chunk_markdown(text)) == [("A",)]


def test_backtick_fence_with_backtick_in_info_is_not_a_fence() -> None:
    text = "``` a`b\n# Real\nx\n"
    assert paths(chunk_markdown(text)) == [(), ("Real",)]


def test_what_is_not_a_heading() -> None:
    text = "#hashtag\n    # indented code\n####### seven\n\\# escaped\ntext\n"
    chunks = chunk_markdown(text)
    assert paths(chunks) == [()]
    assert chunks[0].text == text.strip()


def test_heading_forms() -> None:
    text = "   ## Indented ##\nbody\n#\tTabbed\n# C# ##\n# Closing #   \n#\n"
    chunks = chunk_markdown(text)
    assert paths(chunks) == [
        ("Indented",),
        ("Tabbed",),
        ("C#",),
        ("Closing",),
        ("",),
    ]
    assert chunks[0].text == "## Indented ##\nbody"
    assert chunks[0].start == 3


def test_heading_level_closes_deeper_and_equal_levels() -> None:
    text = "# A\n### C\n## B\n###### F\n# Z\n"
    assert paths(chunk_markdown(text)) == [("A",), ("A", "C"), ("A", "B"), ("A", "B", "F"), ("Z",)]


def test_deeply_nested_headings() -> None:
    text = "".join(f"{'#' * level} H{level}\n\nbody {level}\n\n" for level in range(1, 7))
    chunks = chunk_markdown(text)
    assert chunks[-1].heading_path == ("H1", "H2", "H3", "H4", "H5", "H6")
    assert len(chunks) == 6


def test_heading_without_body_is_a_chunk_and_empty_preamble_is_not() -> None:
    text = "\n\n# Only\n\n\n## Also only\n   \n"
    chunks = chunk_markdown(text)
    assert [(chunk.text, chunk.heading_path) for chunk in chunks] == [
        ("# Only", ("Only",)),
        ("## Also only", ("Only", "Also only")),
    ]


def test_setext_headings_are_headings() -> None:
    # Issue 20: CommonMark setext headings (=== is level 1, --- level 2) start sections.
    chunks = chunk_markdown("Title\n=====\n\ntext\n\nSub\n---\n\nmore\n")
    assert [(chunk.text, chunk.heading_path) for chunk in chunks] == [
        ("Title\n=====\n\ntext", ("Title",)),
        ("Sub\n---\n\nmore", ("Title", "Sub")),
    ]


def test_large_section_is_split_and_keeps_its_path() -> None:
    body = "\n\n".join(f"Parágrafo {i} " + "palavra " * 20 for i in range(10))
    text = f"# Decisão\n\n## 2. Chunking\n\n{body}\n\n## 3. Next\n\nshort\n"
    chunks = chunk_markdown(text, ChunkSettings(target=200, overlap=30, window=60))
    middle = [chunk for chunk in chunks if chunk.heading_path == ("Decisão", "2. Chunking")]
    assert len(middle) > 3
    assert middle[0].text.startswith("## 2. Chunking")
    assert chunks[-1].heading_path == ("Decisão", "3. Next")
    assert all(len(chunk.text) <= 260 for chunk in chunks)


def test_unicode_and_bom() -> None:
    text = "\ufeff# Título 😀\n\nשלום עולם\u200b مرحبا\n\n## e\u0301\u200d\n\nfim\n"
    chunks = chunk_markdown(text)
    assert paths(chunks) == [("Título 😀",), ("Título 😀", "e\u0301\u200d")]
    assert chunks[0].text.startswith("\ufeff# Título")


def test_plain_text_has_no_heading_path() -> None:
    chunks = chunk_text(ADR, SMALL)
    assert chunks and all(chunk.heading_path == () for chunk in chunks)
    assert spans(chunks) == split_by_size(ADR, SMALL)


@pytest.mark.slow
def test_five_megabytes_chunk_completely() -> None:
    """Large and hostile inputs chunk without error (speed is measured in benchmarks/)."""
    paragraph = "Lorem ipsum dolor sit amet, decisão naïve 😀 שלום. " * 8
    blocks = []
    for i in range(14_000):
        blocks.append(f"{'#' * (i % 6 + 1)} Heading {i}" if i % 10 == 0 else paragraph)
    text = "\n\n".join(blocks)
    assert len(text) > 5_000_000
    for make in (chunk_markdown, chunk_text):
        chunks = make(text)
        assert len(chunks) > 4000
    for hostile in ("x" * 5_000_000, "a\n" * 2_500_000, "a\n\n" * 1_700_000):
        chunks = chunk_markdown(hostile)
        assert chunks and chunks[-1].end == len(hostile.rstrip())


# --- properties -------------------------------------------------------------------------

PIECES = [
    "a", "b", "word", "Decisão", "naïve", "😀", "👩\u200d💻", "שלום", "مرحبا", "e\u0301",
    "\u200b", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\u00a0", "\u3000",
    "# ", "## ", "###### ", "#", "```", "~~~", "\n# H\n", "\n## Sub\n", "\n```\n",
]  # fmt: skip

texts = st.one_of(
    st.text(max_size=400),
    st.lists(st.sampled_from(PIECES), max_size=150).map("".join),
    st.lists(st.sampled_from(["x" * 30, " ", "\n\n", "yy"]), max_size=60).map("".join),
)


@st.composite
def chunk_settings(draw: st.DrawFn) -> ChunkSettings:
    target = draw(st.integers(min_value=1, max_value=80))
    overlap = draw(st.integers(min_value=0, max_value=target - 1))
    window = draw(st.integers(min_value=0, max_value=60))
    return ChunkSettings(target=target, overlap=overlap, window=window)


def check_invariants(text: str, chunks: list[TextChunk], config: ChunkSettings) -> None:
    covered = bytearray(len(text))
    for chunk in chunks:
        assert 0 <= chunk.start < chunk.end <= len(text)
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text.strip()
        assert not chunk.text[0].isspace() and not chunk.text[-1].isspace()
        assert len(chunk.text) <= config.target + config.window
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    for index, char in enumerate(text):
        assert covered[index] or char.isspace(), f"{char!r} at {index} not covered"
    for before, after in itertools.pairwise(chunks):
        assert after.start > before.start
        assert before.end - after.start <= config.overlap


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(text=texts, config=chunk_settings())
def test_chunk_text_properties(text: str, config: ChunkSettings) -> None:
    chunks = chunk_text(text, config)
    check_invariants(text, chunks, config)
    assert all(chunk.heading_path == () for chunk in chunks)
    assert spans(chunks) == split_by_size(text, config)
    assert chunk_text(text, config) == chunks


@PROPERTY
@given(text=texts, config=chunk_settings())
def test_chunk_markdown_properties(text: str, config: ChunkSettings) -> None:
    chunks = chunk_markdown(text, config)
    check_invariants(text, chunks, config)
    assert chunk_markdown(text, config) == chunks
    if not any(marker in text for marker in "#=-`~"):  # no heading, no code fence
        assert chunks == chunk_text(text, config)
    for chunk in chunks:
        assert all("\n" not in title for title in chunk.heading_path)
        assert all(title == title.strip() for title in chunk.heading_path)


def reference_split(text: str, config: ChunkSettings) -> list[tuple[int, int]]:
    """The size rule written out by brute force, straight from the module docstring."""
    visible = [i for i, char in enumerate(text) if not char.isspace()]
    if not visible:
        return []
    pos, limit = visible[0], visible[-1] + 1

    def paragraph_break(i: int) -> bool:
        if text[i] != "\n":
            return False
        j = i + 1
        while j < limit and text[j] != "\n" and text[j].isspace():
            j += 1
        return j < limit and text[j] == "\n"

    result = []
    while limit - pos > config.target:
        ideal = pos + config.target
        low = max(ideal - config.window + 1, pos + 1)
        high = min(ideal + config.window, limit - 1)
        candidates = sorted(range(low, high + 1), key=lambda c: (abs(c - ideal), c))
        breaks = [c for c in candidates if paragraph_break(c)]
        spaces = [c for c in candidates if text[c].isspace()]
        cut, clean = (breaks or spaces or [ideal])[0], bool(breaks or spaces)
        result.append((pos, pos + len(text[pos:cut].rstrip())))
        low = max(cut - config.overlap, pos + 1)
        region = range(low, cut) if config.overlap else range(0)
        starts = [q for q in region if not text[q].isspace() and text[q - 1].isspace()]
        if starts:
            pos = starts[0]
        elif region and not clean and not text[low].isspace():
            pos = low
        else:
            pos = next(q for q in range(cut, limit) if not text[q].isspace())
    result.append((pos, limit))
    return result


@PROPERTY
@given(text=texts, config=chunk_settings())
def test_split_by_size_matches_brute_force_reference(text: str, config: ChunkSettings) -> None:
    assert split_by_size(text, config) == reference_split(text, config)


@PROPERTY
@given(text=texts)
def test_default_settings_properties(text: str) -> None:
    check_invariants(text, chunk_markdown(text), ChunkSettings())


# --- tables: cut at a row end, the header travels with the chunk -------------------------

_TABLE = "| k | v |\n|---|---|\n" + "".join(f"| r{i} | word word |\n" for i in range(1, 9))
_HEADER = "| k | v |\n|---|---|"


def test_a_long_table_is_cut_at_row_ends_and_each_later_chunk_knows_its_header() -> None:
    # rows are 19 characters from offset 20 (row i starts at 20 + 19·(i − 1)). The first
    # ideal cut, 60, falls inside row 3 (58–76): the whitespace rule alone cut at 59,
    # between its "|" and "r3"; the nearest row end is 57 (3 back, against 76).
    chunks = chunk_markdown(_TABLE, ChunkSettings(target=60, overlap=0, window=20))
    assert [(c.start, c.end) for c in chunks] == [(0, 57), (58, 114), (115, 171)]
    assert [c.text.splitlines()[0] for c in chunks] == ["| k | v |", "| r3 | word word |", "| r6 | word word |"]
    assert [c.table for c in chunks] == [None, _HEADER, _HEADER]


def test_the_overlap_after_a_row_end_is_whole_rows() -> None:
    # overlap 20: the next chunk starts at the first row starting in [cut − 20, cut)
    chunks = chunk_markdown(_TABLE, ChunkSettings(target=60, overlap=20, window=20))
    assert [(c.start, c.end) for c in chunks] == [(0, 57), (39, 95), (77, 133), (115, 171)]
    assert all(c.text.startswith("| ") and c.text.endswith(" |") for c in chunks)


def test_a_row_longer_than_the_window_is_still_cut_at_whitespace_and_has_no_header() -> None:
    text = "| k | v |\n|---|---|\n| r1 | " + " ".join(["word"] * 40) + " |\n"
    chunks = chunk_markdown(text, ChunkSettings(target=60, overlap=0, window=10))
    assert len(chunks) > 1
    assert all(c.table is None for c in chunks)  # no later chunk starts at a row start
    assert all(len(c.text) <= 70 for c in chunks)


def test_text_after_a_table_is_cut_as_before() -> None:
    prose = " ".join(["word"] * 30)
    text = _TABLE + "\n" + prose
    settings = ChunkSettings(target=60, overlap=0, window=20)
    after = [c for c in chunk_markdown(text, settings) if c.start >= len(_TABLE)]
    assert [(c.start - len(_TABLE) - 1, c.end - len(_TABLE) - 1) for c in after] == split_by_size(prose, settings)
    assert all(c.table is None for c in after)
