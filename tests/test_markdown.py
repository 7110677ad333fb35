"""Markdown read as CommonMark (issue 20): headings, titles, visible text, chunk ids."""

from __future__ import annotations

import html
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from plait.analysis import analyse, tokenize
from plait.chunking import ChunkSettings, chunk_markdown
from plait.fields import lexical_text, path_words
from plait.ingest import build_chunks, chunk_id
from plait.markdown import document_title, headings, plain_text, prose_blocks, tables
from plait.sources.base import SourceDocument, SourcePart
from plait.sources.folder import title_of
from plait.types import FileOrigin


def paths(text: str) -> list[tuple[str, ...]]:
    return [chunk.heading_path for chunk in chunk_markdown(text)]


def file_doc(path: str, text: str, scope: str = "docs") -> SourceDocument:
    origin = FileOrigin(source_path=path, title=title_of(text, path.rpartition("/")[2]))
    return SourceDocument(
        source_id=path,
        scope=scope,
        parts=(SourcePart(text=text, origin=origin, markdown=True),),
        metadata={"path": path},
    )


# --- headings ------------------------------------------------------------------------------


def test_setext_and_atx_headings_nest() -> None:
    text = "Guide\n=====\n\nintro\n\nSetup\n-----\n\nsteps\n\n### Deep\n\nx\n\n# Next\n\ny\n"
    assert paths(text) == [("Guide",), ("Guide", "Setup"), ("Guide", "Setup", "Deep"), ("Next",)]


def test_no_heading_inside_code_fences_html_blocks_or_lists() -> None:
    text = (
        "# Top\n\n```sh\n# not a heading\n```\n\n~~~\nAlso\n===\n~~~\n\n"
        "<div>\n# inside html\n</div>\n\n- # in a list item\n\n> # quoted\n"
    )
    assert paths(text) == [("Top",)]


def test_setext_underline_does_not_show_in_the_visible_text() -> None:
    assert plain_text("Title\n=====\n\nbody\n") == "Title\nbody"


def test_escaped_heading_title_is_resolved_and_the_chunk_id_keeps_the_source() -> None:
    text = "# Module: aws::node\\_group\n\nUses `create\\_service\\_dns\\_name`.\n"
    [chunk] = build_chunks(file_doc("modules/node.md", text), ChunkSettings())
    assert chunk.origin.heading_path == ["Module: aws::node_group"]
    # The id is built from the source title, as before plait read CommonMark.
    assert chunk.id == chunk_id("modules/node.md", "", ["Module: aws::node\\_group"], 0)
    assert chunk.content == text.strip()  # content stays raw


def test_atx_only_document_keeps_the_ids_it_had() -> None:
    text = "# Guide\n\nintro\n\n## Setup *now* #\n\nsteps\n"
    chunks = build_chunks(file_doc("g.md", text), ChunkSettings())
    assert [c.id for c in chunks] == [
        chunk_id("g.md", "", ["Guide"], 0),
        chunk_id("g.md", "", ["Guide", "Setup *now*"], 0),
    ]
    assert [c.origin.heading_path for c in chunks] == [["Guide"], ["Guide", "Setup now"]]


def test_bare_setext_parent_heading_gets_no_chunk_of_its_own() -> None:
    text = "Guide\n=====\n\nSetup\n-----\n\nsteps\n"
    chunks = build_chunks(file_doc("g.md", text), ChunkSettings())
    assert [(c.content, c.origin.heading_path) for c in chunks] == [
        ("Setup\n-----\n\nsteps", ["Guide", "Setup"])
    ]


def test_a_chunk_starting_inside_a_fence_is_read_as_code() -> None:
    code = "\n".join(f"echo step{i} <b>" for i in range(30))
    text = f"# Run\n\n```sh\n{code}\n```\n\nThen a\\_b.\n"
    chunks = build_chunks(file_doc("run.md", text), ChunkSettings(target=200, overlap=0, window=50))
    last = chunks[-1]
    assert last.metadata["fence"] == "```" and last.content.endswith("```\n\nThen a\\_b.")
    lexical = analyse(lexical_text(last)).exact
    # Inside the block "<b>" is text (shown), after it the escape is resolved.
    assert "b" in lexical and "a_b" in lexical
    assert all("fence" not in c.metadata for c in chunks[:1])


# --- titles --------------------------------------------------------------------------------


def test_front_matter_title_wins_over_the_first_h1() -> None:
    text = '---\ntitle: "Networking outline"\nstatus: accepted\n---\n# 3. Other\n\nbody\n'
    assert document_title(text) == "Networking outline"
    # The front matter is not read as a setext heading ("status: accepted" over ---).
    assert paths(text)[-1] == ("3. Other",)


def test_first_h1_is_the_title_and_h2_is_not() -> None:
    assert document_title("intro\n\n## Sub\n\n3\\. Net\n===\n") == "3. Net"
    assert document_title("## Only a sub\n") is None
    assert title_of("## Only a sub\n", "0033-ip-ranges.md") == "0033-ip-ranges.md"


# --- visible text --------------------------------------------------------------------------


def test_escaped_identifier_is_one_token() -> None:
    # terraform-docs writes a variable as [create\_service\_dns\_name](#input\_create...).
    text = (
        "| [create\\_service\\_dns\\_name](#input\\_create\\_service\\_dns\\_name) | bool |\n"
        "|---|---|\n\nSet create\\_service\\_dns\\_name = true.\n"
    )
    assert plain_text(text) == "create_service_dns_name | bool\nSet create_service_dns_name = true."
    [chunk] = build_chunks(file_doc("v.md", text), ChunkSettings())
    exact = analyse(lexical_text(chunk)).exact
    assert exact.count("create_service_dns_name") == 2
    assert "service" not in exact


def test_html_tags_and_link_targets_leave_the_text_link_text_stays() -> None:
    text = (
        'Read the [compatible](https://example.com/guide "Guide") notes <br> and '
        '![diagram of pools](img/pools.png).\n\n<a name="inputs"></a>\n\n<details>\n'
        "<summary>More</summary>\n\nHidden &amp; shown\n</details>\n"
    )
    visible = plain_text(text)
    assert visible == "Read the compatible notes  and diagram of pools.\nMore\nHidden & shown"
    assert "example" not in tokenize(visible) and "inputs" not in tokenize(visible)


def test_tables_are_rows_of_cell_text() -> None:
    text = "| Name | Default |\n|------|---------|\n| pool\\_size | **10** |\n| a | [b](http://x) |\n"
    assert plain_text(text) == "Name | Default\npool_size | 10\na | b"


def test_code_blocks_and_spans_are_verbatim() -> None:
    # CommonMark: no escapes inside code; a backslash written there is text.
    assert plain_text("```py\nx = a\\_b  # <b>\n```\n") == "x = a\\_b  # <b>"
    assert plain_text("Use `a\\_b` here") == "Use a\\_b here"


# --- path words ----------------------------------------------------------------------------


def test_path_words_keep_numbers_and_drop_leading_zeros() -> None:
    assert path_words("docs/architecture/decisions/0033-ip-ranges.md") == [
        "docs", "architecture", "decisions", "0033", "33", "ip", "ranges",
    ]  # fmt: skip
    assert path_words("README.md") == ["README"]
    assert path_words("v1.2/000-x.txt") == ["v1", "2", "000", "x"]


# --- properties ----------------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "create\\_service", "`code_span`", "*em*", "**strong**",
         "[link text](http://e.x/a)", "&amp;", "<b>bold</b>", "delta\\!", "x"]  # fmt: skip


@st.composite
def markdown_documents(draw: st.DrawFn) -> str:
    def words(low: int = 1, high: int = 8) -> str:
        return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=low, max_size=high)))

    blocks: list[str] = []
    for kind in draw(st.lists(st.sampled_from(["atx", "setext", "para", "fence", "table", "list"]), max_size=12)):
        if kind == "atx":
            blocks.append("#" * draw(st.integers(1, 6)) + " " + words(1, 4))
        elif kind == "setext":
            blocks.append(words(1, 4) + "\n" + draw(st.sampled_from(["===", "---", "=====", "-----"])))
        elif kind == "para":
            blocks.append("\n".join(words() for _ in range(draw(st.integers(1, 3)))))
        elif kind == "fence":
            body = draw(st.lists(st.sampled_from(["# comment", "run it", "Title", "==="]), max_size=4))
            blocks.append("```\n" + "\n".join(body) + "\n```")
        elif kind == "table":
            blocks.append(f"| {words(1, 2)} | {words(1, 2)} |\n|---|---|\n| {words(1, 2)} | {words(1, 2)} |")
        else:
            blocks.append("\n".join(f"- {words(1, 3)}" for _ in range(draw(st.integers(1, 3)))))
    return "\n\n".join(blocks) + "\n"


_HEADING_HTML = re.compile(r"^<h([1-6])>(.*?)</h\1>$", re.MULTILINE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(text=markdown_documents(), target=st.integers(40, 300))
def test_heading_paths_match_the_parsers_tree(text: str, target: int) -> None:
    """The oracle is markdown-it's own HTML: its top-level <h1>–<h6>, nested by level."""
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    expected: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    for level, inner in _HEADING_HTML.findall(rendered):
        while stack and stack[-1][0] >= int(level):
            stack.pop()
        stack.append((int(level), " ".join(html.unescape(_TAG.sub("", inner)).split())))
        expected.append(tuple(title for _, title in stack))
    got = [h.title for h in headings(text)]
    assert got == [path[-1] for path in expected]
    chunks = chunk_markdown(text, ChunkSettings(target=target, overlap=20, window=30))
    section_paths = list(dict.fromkeys(chunk.heading_path for chunk in chunks if chunk.heading_path))
    assert section_paths == list(dict.fromkeys(expected))


@PROPERTY
@given(text=markdown_documents(), target=st.integers(40, 300))
def test_every_visible_word_is_covered_in_order(text: str, target: int) -> None:
    """Each token of the document's visible text appears, in order, in the visible text
    of the chunks (read one after the other, overlaps allowed)."""
    visible = tokenize(plain_text(text))
    chunks = chunk_markdown(text, ChunkSettings(target=target, overlap=20, window=30))
    stream = [tok for chunk in chunks for tok in tokenize(plain_text(chunk.text, fence=chunk.fence))]
    position = 0
    for token in visible:
        while position < len(stream) and stream[position] != token:
            position += 1
        assert position < len(stream), f"{token!r} not covered"
        position += 1


def test_nesting_past_the_parsers_limit_keeps_the_text() -> None:
    # markdown-it drops what lies deeper than its nesting limit; plait indexes it as written.
    text = "- " * 10_000 + "ID-NEST-10000 innermost\n"
    assert "ID-NEST-10000" in plain_text(text)
    assert plain_text("- " * 30 + "deep item\n") == "deep item"


def test_tables_gives_each_top_level_table_with_a_body() -> None:
    text = "Intro\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n| only | header |\n|---|---|\n\n- | x | y |\n  |---|---|\n  | 3 | 4 |\n"
    assert tables(text) == [(2, 4, 5)]  # a header-only table has no body; one in a list item is not top level
    assert tables("no pipes at all") == []


def test_prose_blocks_reads_a_fragment_as_the_rest_of_its_table() -> None:
    fragment = "| `EPP_POOL_BORROW_TIMEOUT` | 10 | Seconds a request waits. |\n| `SIZE` | 1 | Max connections. |"
    header = "| Setting | Default | What it does |\n|---|---|---|"
    assert [(b.kind, b.text) for b in prose_blocks(fragment, table=header)] == [
        ("row", "Setting: EPP_POOL_BORROW_TIMEOUT; Default: 10; What it does: Seconds a request waits."),
        ("row", "Setting: SIZE; Default: 1; What it does: Max connections."),
    ]
    # without it, the rows are one paragraph with their pipes (what ask quoted before)
    assert [b.kind for b in prose_blocks(fragment)] == ["text"]
