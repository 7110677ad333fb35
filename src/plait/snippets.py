"""Readable hits: a plain-text snippet around a chunk's best passage, with highlights.

The snippet is cut from the chunk's visible text (for Markdown,
:func:`plait.markdown.plain_text`: no ``#``, backticks, tags or link targets), with runs of
whitespace collapsed to one space. A word of it is *matched* when its analysis shares a
term with the query's, in either lexical field: the exact field (``ERR-4012``,
``create_service_dns_name``) or the stems field (``rotating`` matches ``rotate``); query
stopwords match nothing. The best passage is the window of at most ``width`` characters
matching the most distinct query words (ties: the earliest); without a match the
snippet is the text's start. The window is widened to whole words, and ``…`` marks a cut
at either end.

``highlights`` are ``[start, end)`` character offsets of the matched words in the snippet.
The hit's ``content`` stays the raw chunk.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, count

from plait.analysis import analyse, explain_query
from plait.byte_cache import byte_lru_cache
from plait.fields import is_markdown_path
from plait.markdown import plain_text
from plait.types import Hit, SearchResult

__all__ = ["DEFAULT_WIDTH", "query_terms", "snippet", "with_snippets"]

DEFAULT_WIDTH = 240
_WORD = re.compile(r"\w+(?:[-.]\w+)*")


def query_terms(query: str) -> list[frozenset[str]]:
    """Each distinct query word's exact token and stems, stopwords left out."""
    words: dict[frozenset[str], None] = {}
    for token in explain_query(query):
        if token.stopword:
            continue
        terms = set(token.stems)
        if token.exact is not None:
            terms.add(token.exact)
        if terms:
            words[frozenset(terms)] = None
    return list(words)


#: The vocabulary's words hold at most this many characters in all (with their terms
#: and table entries, a few times that in bytes).
VOCABULARY_CHARS = 4 << 20


class _Vocabulary:
    """The words met in hits so far: each word's terms in both lexical fields, and each
    term's words, so a query's matched words are look-ups, not a loop over the hits'
    words (words repeat across hits and queries: each is analysed once).

    At most ``limit`` words and ``max_chars`` characters of words (long hyphenated or
    dotted "words" of minified or generated text take kilobytes each, with their
    terms): past either the tables start afresh (a new generation). A split
    text (:class:`_Words`) records the generation its words were all learnt in, so a
    text met again is not looked at again. A search reads the tables it started with; a
    word's term entries are written before the word itself, and a text's words before
    its generation, so what another thread has listed is always complete.
    """

    def __init__(self, limit: int, *, max_chars: int = VOCABULARY_CHARS) -> None:
        self.limit = limit
        self.max_chars = max_chars
        self._tables: tuple[dict[str, frozenset[str]], dict[str, set[str]], int] = ({}, {}, next(_GENERATIONS))
        self._chars = 0  # the current tables' words' total length

    def learn(self, texts: Sequence[_Words]) -> tuple[dict[str, frozenset[str]], dict[str, set[str]]]:
        """The tables (word → terms, term → words), every word of ``texts`` in them."""
        terms, words_of, generation = self._tables
        todo = [t for t in texts if t.known[0] != generation]
        if todo:
            new = {word for t in todo for word in t.where if word not in terms}
            chars = sum(map(len, new))
            if len(terms) + len(new) > self.limit or self._chars + chars > self.max_chars:
                terms, words_of, generation = self._tables = ({}, {}, next(_GENERATIONS))
                todo = list(texts)
                new = {word for t in texts for word in t.where}
                chars, self._chars = sum(map(len, new)), 0
            self._chars += chars
            for word in new:
                fields = analyse(word)
                mine = frozenset(fields.exact).union(fields.stems)
                for term in mine:
                    words_of.setdefault(term, set()).add(word)
                terms[word] = mine
            for t in todo:
                t.known[0] = generation
        return terms, words_of


_GENERATIONS = count()
_VOCABULARY = _Vocabulary(1 << 16)
Match = tuple[int, int, frozenset[int]]
#: ``_WORD`` as a splitter: ``split(text)`` is [gap, word, gap, word, …, gap], the words
#: exactly those ``_WORD.finditer`` finds (same scan, left to right, no empty match).
_SPLIT = re.compile(f"({_WORD.pattern})")
#: Hits' texts kept split (:func:`_hit_words`): about 30 kB each for a 1.5 kB chunk
#: (tracemalloc, SciFact abstracts of 1.3-1.7 kB, raw key included: 29.7 kB, which
#: :func:`_split_bytes` counts within 2%; 51 kB for 3.2 kB of distinct 12-character
#: identifiers, 12.6 kB for 1.4 kB of a six-word vocabulary).
TEXT_CACHE_SIZE = 4096
#: ... and at most this many bytes in all (:func:`_split_bytes`), so 4,096 typical
#: chunks (122 MB) stay within it: 4,096 chunks of a megabyte no longer hold gigabytes.
TEXT_CACHE_BYTES = 128 << 20


@dataclass(frozen=True, slots=True)
class _Words:
    """A text and its ``_WORD`` words in order: word ``i`` spans
    ``[bounds[2i], bounds[2i + 1])``; ``where`` lists each distinct word's indices
    (never changed once built). ``known`` holds the vocabulary generation its words were
    learnt in (-1: none yet)."""

    text: str
    words: tuple[str, ...]
    bounds: array[int]
    where: dict[str, list[int]]
    known: list[int]


def _words_of(text: str) -> _Words:
    """``text`` split once into its words and the gaps between them (one regular-expression
    pass, no match objects); the offsets are the pieces' running lengths. A word that
    repeats in the text is one object (the first occurrence's, ``where``'s key). Words
    are not interned: the interpreter's intern table never shrinks, and for texts of
    identifiers or hashes nothing else would share them (review 6 #4)."""
    parts = _SPLIT.split(text)
    ends = list(accumulate(map(len, parts)))
    where: dict[str, list[int]] = {}
    canonical: list[str] = []
    for i, word in enumerate(parts[1::2]):
        at = where.get(word)
        if at is None:
            where[word] = [i]
            canonical.append(word)
        else:
            at.append(i)
            canonical.append(canonical[at[0]])
    return _Words(text, tuple(canonical), array("l", ends[:-1]), where, [-1])


def _split_bytes(args: tuple[str, bool, str | None], split: _Words) -> int:
    """About the bytes a cached split text holds: the key's raw content, the visible
    text, the words' tuple, the offsets, each distinct word (its own object: not
    interned) and its positions (a list, its int objects)."""
    return (
        sys.getsizeof(args[0]) + sys.getsizeof(split.text) + sys.getsizeof(split.words)
        + split.bounds.itemsize * len(split.bounds)
        + sys.getsizeof(split.where) + sum(map(sys.getsizeof, split.where.values()))
        + sum(map(sys.getsizeof, split.where))
        + 28 * max(0, len(split.words) - 257)  # positions past 256 are int objects of their own
    )


@byte_lru_cache(maxsize=TEXT_CACHE_SIZE, max_bytes=TEXT_CACHE_BYTES, size=_split_bytes)
def _hit_words(content: str, markdown: bool, fence: str | None) -> _Words:
    """A hit's visible text, whitespace collapsed, split (:func:`_words_of`); kept for the
    next search that returns the same chunk text (a chunk's text never changes under
    its content, and a Markdown chunk costs a CommonMark parse)."""
    return _words_of(_flat(plain_text(content, fence=fence) if markdown else content))


def _match_words(texts: Sequence[_Words], words: list[frozenset[str]]) -> list[list[Match]]:
    """Each split text's matched words: their spans and which query words they match.

    A word is matched when one of its terms (``_Vocabulary``) is a query term: the query
    terms' words are looked up, each text keeps those it holds (``where``), and the spans
    are read off the split, the same words in the same places as ``_WORD.finditer``
    finds.
    """
    if not words:
        return [[] for _ in texts]
    terms, words_of = _VOCABULARY.learn(texts)
    found: set[str] = set()
    for term in frozenset().union(*words):
        found.update(words_of.get(term, ()))
    if not found:
        return [[] for _ in texts]
    matched: dict[str, frozenset[int]] = {}
    out: list[list[Match]] = []
    for t in texts:
        where = t.where
        mine = where.keys() & found  # in C, over the smaller of the two
        if not mine:
            out.append([])
            continue
        for word in mine:
            if word not in matched:
                its = terms[word]
                matched[word] = frozenset(i for i, query_word in enumerate(words) if query_word & its)
        at = sorted(chain.from_iterable(map(where.__getitem__, mine)))
        bounds, split = t.bounds, t.words
        out.append([(bounds[2 * i], bounds[2 * i + 1], matched[split[i]]) for i in at])
    return out


def _matches_all(texts: list[str], words: list[frozenset[str]]) -> list[list[Match]]:
    """Each text's matched words (see :func:`_match_words`)."""
    return _match_words([_words_of(text) for text in texts], words)


def _matches(text: str, words: list[frozenset[str]]) -> list[Match]:
    """The matched words of one text (see :func:`_match_words`)."""
    return _match_words([_words_of(text)], words)[0]


def _flat(text: str) -> str:
    """Runs of whitespace as one space, none at either end (``str.split``'s whitespace
    is the ``\\s`` of a ``str`` pattern: both are Unicode's, ``str.isspace``)."""
    return " ".join(text.split())


def snippet(text: str, query: str, *, width: int = DEFAULT_WIDTH) -> tuple[str, list[list[int]]]:
    """(snippet, highlights) of a visible text for a query (see the module docstring)."""
    flat = _flat(text)
    return _window(flat, _matches(flat, query_terms(query)), width=width)


def _best_start(matches: list[Match], width: int) -> int:
    """The start of the first match of the window of at most ``width`` characters from a
    match's start that covers the most distinct query words (ties: the earliest).

    One pass: the windows' ends only move right as their starts do (matches are in text
    order and never overlap), so each match enters and leaves the window once; ``held``
    counts the window's matches of each query word.
    """
    held: dict[int, int] = {}
    end = 0  # the window is matches[i:end]
    best, best_start = -1, 0
    for i, (first, _, _) in enumerate(matches):
        end = max(end, i)
        while end < len(matches) and matches[end][1] - first <= width:
            for word in matches[end][2]:
                held[word] = held.get(word, 0) + 1
            end += 1
        if len(held) > best:
            best, best_start = len(held), first
        if end > i:  # match i leaves the window
            for word in matches[i][2]:
                if held[word] == 1:
                    del held[word]
                else:
                    held[word] -= 1
    return best_start


def _window(flat: str, matches: list[Match], *, width: int) -> tuple[str, list[list[int]]]:
    """The best passage of a whitespace-collapsed text and its highlights."""
    start = 0
    if matches:
        # Some context before the first match, up to a third of the window.
        start = max(0, _best_start(matches, width) - width // 3)
    end = min(len(flat), start + width)
    if start > 0:
        space = flat.rfind(" ", 0, start)
        start = space + 1 if space >= 0 else 0
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start else end
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(flat) else ""
    shown = prefix + flat[start:end] + suffix
    shift = len(prefix) - start
    highlights = [[s + shift, e + shift] for s, e, _ in matches if s >= start and e <= end]
    return shown, highlights


def _markdown_fence(hit: Hit) -> tuple[bool, str | None]:
    """Whether the hit's text is Markdown (by its path), and its fence when it has one."""
    path = hit.metadata.get("path")
    if isinstance(path, str) and is_markdown_path(path):
        fence = hit.metadata.get("fence")
        return True, fence if isinstance(fence, str) else None
    return False, None


def visible_text(hit: Hit) -> str:
    """The hit's visible text: Markdown rendered to plain text, other text as stored."""
    markdown, fence = _markdown_fence(hit)
    return plain_text(hit.content, fence=fence) if markdown else hit.content


def with_snippets(result: SearchResult) -> SearchResult:
    """The result with every hit's ``snippet`` and ``highlights`` filled in (the query
    analysed once, the hits' words matched together, each hit's split text cached)."""
    texts = [_hit_words(hit.content, *_markdown_fence(hit)) for hit in result.hits]
    found = _match_words(texts, query_terms(result.query))
    hits = []
    for hit, text, matches in zip(result.hits, texts, found, strict=True):
        shown, highlights = _window(text.text, matches, width=DEFAULT_WIDTH)
        hits.append(hit.model_copy(update={"snippet": shown, "highlights": highlights}))
    return result.model_copy(update={"hits": hits})
