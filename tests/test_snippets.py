"""Readable hits and safe terminal output (issue 20)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from plait import snippets
from plait.analysis import analyse
from plait.cli import app
from plait.service import Plait
from plait.snippets import _WORD, _flat, _matches, _matches_all, _Vocabulary, query_terms, snippet
from plait.terminal import highlighted, safe

runner = CliRunner()


def test_snippet_is_the_best_passage_with_highlights_in_both_fields() -> None:
    text = "Rotate the keys. " + "filler words here " * 30 + "When ERR-4012 appears, rotating keys fixes it. " + "tail " * 40
    shown, highlights = snippet(text, "how to rotate keys for ERR-4012", width=120)
    assert shown.startswith("…filler words here") and shown.endswith("tail…")
    # exact field: ERR-4012; stems field: rotating ~ rotate, keys ~ keys; "how to for" are stopwords
    assert [shown[a:b] for a, b in highlights] == ["ERR-4012", "rotating", "keys"]
    assert len(shown) <= 120 + 2


def test_snippet_without_a_match_is_the_start() -> None:
    assert snippet("one two\n\nthree", "zebra") == ("one two three", [])


def _matches_word_by_word(text: str, words: list[frozenset[str]]) -> list[tuple[int, int, frozenset[int]]]:
    """The definition: every word analysed on its own, kept when it shares a term."""
    found = []
    for match in _WORD.finditer(text):
        fields = analyse(match.group())
        mine = set(fields.exact) | set(fields.stems)
        hit = frozenset(i for i, terms in enumerate(words) if terms & mine)
        if hit:
            found.append((match.start(), match.end(), hit))
    return found


_VOCABULARY = ["rotate", "rotating", "Rotated", "keys", "key", "ERR-4012", "err_4012", "the", "of", "chaves",
               "rotação", "não", "v1.2.3", "a.b", "dns-name", "x", "café", "CAFE", "tenant", "tenants"]
_PIECES = st.sampled_from(_VOCABULARY) | st.text(alphabet="ab-._ é1\n", max_size=6) | st.text(max_size=4)
_SEPARATORS = st.sampled_from([" ", "-", ".", "-.", ".-", "_", "", "\n", ", "])
_TEXTS = st.lists(st.tuples(_PIECES, _SEPARATORS), max_size=40).map(lambda parts: "".join(p + s for p, s in parts))


@settings(max_examples=1000, deadline=None)
@given(text=_TEXTS, query=_TEXTS)
def test_matches_are_the_word_by_word_analysis(text: str, query: str) -> None:
    """The cached, pre-filtered matcher finds exactly the words the per-word definition does."""
    words = query_terms(query)
    assert _matches(text, words) == _matches_word_by_word(text, words)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXTS, max_size=5), query=_TEXTS)
def test_matches_of_several_texts_are_each_texts_own(texts: list[str], query: str) -> None:
    """Matching a search's hits together (one vocabulary look-up for all their words)
    finds in each text exactly what the definition finds in it alone."""
    words = query_terms(query)
    assert _matches_all(texts, words) == [_matches_word_by_word(text, words) for text in texts]


def test_a_full_vocabulary_starts_afresh_and_still_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its limit the word table starts again: the words of this search are learnt
    anew, none is lost (``rotating`` still matches ``rotate``)."""
    monkeypatch.setattr(snippets, "_VOCABULARY", _Vocabulary(4))
    words = query_terms("rotate the tenant keys")
    for text in ("rotating keys of one tenant", "tenants rotate; a b c d e f keys", "nothing here at all"):
        assert _matches(text, words) == _matches_word_by_word(text, words)
    assert set(snippets._VOCABULARY._tables[0]) == {"nothing", "here", "at", "all"}  # the last text's words


_SPACES = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(_SPACES + "ab-é\u200b"), max_size=30))
def test_flat_collapses_exactly_the_whitespace_of_the_pattern(text: str) -> None:
    """``_flat`` (``str.split``) collapses what ``re.sub(r"\\s+", " ", …)`` did, every Unicode
    space included (U+001C-U+001F, U+0085, U+00A0, U+2028…), and nothing else (U+200B)."""
    assert _flat(text) == re.sub(r"\s+", " ", text).strip()


def test_search_hits_carry_plain_snippets_and_raw_content(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    raw = "# Pools\n\n## `EPP_POOL_SIZE`\n\nSet <b>EPP\\_POOL\\_SIZE</b> as in the [guide](https://e.x/g).\n"
    (root / "pools.md").write_text(raw, encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index(root)
        [hit] = engine.search("EPP_POOL_SIZE guide", k=1).hits
    assert hit.content == raw.split("\n\n", 1)[1].strip()  # raw ("# Pools" alone is a bare parent)
    assert hit.snippet == "EPP_POOL_SIZE Set EPP_POOL_SIZE as in the guide."
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["EPP_POOL_SIZE", "EPP_POOL_SIZE", "guide"]


def test_a_hit_text_is_split_once_and_follows_its_content(tmp_path: Path) -> None:
    """The second search returning a chunk reuses its split text (a Markdown chunk's
    CommonMark parse included), with the same snippet; a reindexed chunk whose content
    changed under the same id gets its new text's snippet, never the cached one."""
    root = tmp_path / "docs"
    root.mkdir()
    page = root / "keys.md"
    page.write_text("# Keys\n\nRotate the `API` keys every **90** days.\n", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index(root)
        [first] = engine.search("rotate keys", k=1).hits
        before = snippets._hit_words.cache_info()
        [again] = engine.search("rotate keys", k=1).hits
        after = snippets._hit_words.cache_info()
        page.write_text("# Keys\n\nRotate the `API` keys every **30** days.\n", encoding="utf-8")
        engine.index(root)
        [changed] = engine.search("rotate keys", k=1).hits
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)
    assert (again.snippet, again.highlights) == (first.snippet, first.highlights)
    assert first.snippet == "Keys Rotate the API keys every 90 days."  # the heading is in the chunk
    assert changed.chunk_id == first.chunk_id and changed.snippet == "Keys Rotate the API keys every 30 days."
    assert [changed.snippet[a:b] for a, b in changed.highlights] == ["Keys", "Rotate", "keys"]


def test_safe_escapes_markup_and_replaces_control_characters() -> None:
    assert safe("[/bold].md") == "\\[/bold].md"
    assert safe("a\x1b[31mred\x07") == "a\ufffd[31mred\ufffd"  # "[31m" is no rich tag
    assert highlighted("[x] key", [[4, 7]]) == "\\[x] [bold]key[/bold]"


def test_cli_prints_corpus_text_as_written(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    body = "# Notes\n\nThe pool is developed to be [compatible](https://e.x/c) with zebras.\n"
    (root / "[").mkdir()  # the relative path "[/bold].md" closes a tag rich never opened
    for name in ("[/bold].md", "[red]x.md", "esc\x1b[2Jname.md"):
        (root / name).write_text(body, encoding="utf-8")
    store = str(tmp_path / "p.db")
    index = runner.invoke(app, ["index", str(root), "--store", store, "--embedder", "none"])
    assert index.exit_code == 0, index.output
    result = runner.invoke(app, ["search", "compatible zebras [bold]", "--store", store, "--embedder", "none"])
    assert result.exit_code == 0, result.output
    assert "[/bold].md" in result.output and "[red]x.md" in result.output
    assert "\x1b" not in result.output and "esc\ufffd[2Jname.md" in result.output
    assert "developed to be compatible with zebras" in result.output
    assert "“compatible zebras [bold]”" in result.output
    data = json.loads(runner.invoke(app, ["search", "zebras", "--store", store, "--embedder", "none", "--json"]).stdout)
    assert data["hits"][0]["snippet"].endswith("compatible with zebras.")
    assert data["hits"][0]["highlights"]


def test_explain_text_lists_each_content_term_once_names_the_chunk_and_a_missing_path(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "keys.md").write_text("# Keys\n\nRotate the keys when ERR-4012 shows.\n", encoding="utf-8")
    store = str(tmp_path / "p.db")
    assert runner.invoke(app, ["index", str(root), "--store", store, "--embedder", "none"]).exit_code == 0
    with Plait(store, embedder="none") as engine:
        chunk_id = engine.search("keys", k=1).hits[0].chunk_id
    out = runner.invoke(app, ["explain", "the keys of the keys ERR-4012", "--path", "keys.md", "--store", store, "--embedder", "none"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert f"    terms evaluated against chunk {chunk_id}" in lines
    assert sum(line.strip() == "✓ keys" for line in lines) == 1  # "keys" asked twice, one row
    assert sum(line.strip() == "✓ ERR-4012" for line in lines) == 1
    assert "    stopwords, not counted: the, of" in lines
    missing = runner.invoke(app, ["explain", "keys", "--path", "nope.md", "--store", store, "--embedder", "none"])
    assert missing.exit_code == 0, missing.output
    flat = " ".join(missing.output.split())
    assert "not returned (no such source)" in flat and "None" not in flat


def _best_start_by_definition(matches: list[tuple[int, int, frozenset[int]]], width: int) -> int:
    """The definition: for every match, the query words of the matches whose end is
    within ``width`` of its start (stopping at the first that is not); the most, earliest."""
    best = (-1, 0)
    for i, (first, _, _) in enumerate(matches):
        covered: set[int] = set()
        for _s, e, hit in matches[i:]:
            if e - first > width:
                break
            covered |= hit
        if len(covered) > best[0]:
            best = (len(covered), first)
    return best[1]


@settings(max_examples=1000, deadline=None)
@given(
    pieces=st.lists(
        st.tuples(st.integers(0, 30), st.integers(1, 40), st.frozensets(st.integers(0, 4), min_size=1)), max_size=25
    ),
    width=st.integers(1, 120),
)
def test_best_window_is_the_definitions(pieces: list[tuple[int, int, frozenset[int]]], width: int) -> None:
    """The one-pass window (``_best_start``) picks the start the quadratic definition
    picks, on non-overlapping matches in text order (words longer than the window too)."""
    matches, at = [], 0
    for gap, length, hit in pieces:
        matches.append((at + gap, at + gap + length, hit))
        at += gap + length + 1
    assert snippets._best_start(matches, width) == _best_start_by_definition(matches, width)


def test_a_text_met_again_is_not_relearnt(monkeypatch: pytest.MonkeyPatch) -> None:
    """A split text records the vocabulary generation it was learnt in: met again in the
    same generation its words are not looked at; after the tables start afresh it is
    learnt again (its matches stay the definition's)."""
    monkeypatch.setattr(snippets, "_VOCABULARY", _Vocabulary(8))
    words = query_terms("rotate tenant keys")
    text = snippets._words_of("rotating keys of one tenant")
    assert snippets._match_words([text], words) == [_matches_word_by_word(text.text, words)]
    first = text.known[0]
    snippets._VOCABULARY._tables[0].clear()  # were it relearnt, the words would be back
    snippets._VOCABULARY._tables[1].clear()
    assert snippets._match_words([text], words) == [[]]
    assert text.known[0] == first
    other = snippets._words_of("a b c d e f g h i")  # 9 new words: past the limit of 8
    snippets._match_words([other, text], words)
    assert text.known[0] != first
    assert snippets._match_words([text], words) == [_matches_word_by_word(text.text, words)]
