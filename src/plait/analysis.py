"""Text analysis for the lexical (BM25) arm.

Every text is analysed into two token fields, and BM25 scores both:

``exact``
    Every token, accent-folded and case-folded, *not* stemmed, stopwords kept
    (BM25's IDF already discounts them). Identifiers stay whole: ``ERR-4012``,
    ``SKU-88213-B``, ``v3.11.2``, ``resolve_tenant_db`` and ``resolveTenantDB``
    are one token each (``err-4012``, ``sku-88213-b``, ``v3.11.2``,
    ``resolve_tenant_db``, ``resolvetenantdb``).

``stems``
    The prose field: plain words (letters only) minus English and Portuguese
    stopwords, Snowball-stemmed, so ``running`` matches ``run``. Identifiers
    appear here too, whole and *unstemmed*; identifiers made only of letters
    (``resolve_tenant_db``, ``resolveTenantDB``) also contribute their parts
    (``resolv``, ``tenant``, ``db``), stopword-filtered and stemmed.
    Identifiers with digits are never split.

Why two fields: stemming is good for prose and harmful to identifiers. A
stemmer (or a tokenizer splitting on punctuation) turns ``ERR-4012`` into
``err`` + ``4012`` and ``v3.11.2`` into three numbers that match every other
version string, so an exact lookup of an error code drowns. The exact field
keeps codes whole; the stemmed field serves prose.

Pipeline: zero-width and bidi control characters are removed; non-ASCII text
is NFKC-normalised; the text is cut into segments; each segment is
accent-folded (NFKD, combining marks dropped), camelCase is detected while the
case is still there, then tokens are case-folded. Tokens longer than
:data:`MAX_TOKEN_LEN` are dropped from both fields.

Documents are stemmed in one language, detected per text by counting English
and Portuguese stopwords (ties and none: English). Queries are too short to
detect reliably, so a query word contributes its stem in both languages.

Portuguese: Snowball expects accents, and the folded ``-cao``/``-coes``
endings (``configuracao``, ``configuracoes``) do not stem like ``-ção``/
``-ções``. Before Portuguese stemming those two endings are restored to their
accented form and the stem is folded again, so ``configuração``,
``configuracoes`` and ``configuracao`` all give ``configur``.

Analysis is per segment and memoised, so repeated words cost a cache lookup;
the module is safe to call from several threads.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import chain, pairwise
from operator import attrgetter
from typing import NamedTuple

import Stemmer

__all__ = [
    "ENGLISH",
    "ENGLISH_STOPWORDS",
    "MAX_TOKEN_LEN",
    "PORTUGUESE",
    "PORTUGUESE_STOPWORDS",
    "STOPWORDS",
    "Analysed",
    "TokenExplanation",
    "analyse",
    "analyse_query",
    "detect_language",
    "explain_query",
    "fold",
    "is_identifier",
    "stopword_language",
    "tokenize",
]

#: Tokens longer than this (in characters, after folding) are dropped from both
#: fields: they are base64 blobs, hashes of hashes or minified code, never
#: something a person types into a query, and they bloat the index.
MAX_TOKEN_LEN = 64

ENGLISH = "english"
PORTUGUESE = "portuguese"

#: English stopwords (NLTK's list without the apostrophe forms, which the
#: tokenizer splits anyway, plus a few modals and adverbs), accent-folded.
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    ["i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "what", "which", "who", "whom", "whose", "this", "that", "these", "those", "am", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "a", "an", "the", "and", "but", "if", "or", "because", "as", "until", "while", "of", "at", "by", "for", "with", "about", "against", "between", "into", "through", "during", "before", "after", "above", "below", "to", "from", "up", "down", "in", "out", "on", "off", "over", "under", "again", "further", "then", "once", "here", "there", "when", "where", "why", "how", "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not", "only", "own", "same", "so", "than", "too", "very", "s", "t", "can", "will", "just", "don", "should", "now", "d", "ll", "m", "o", "re", "ve", "y", "ain", "aren", "couldn", "didn", "doesn", "hadn", "hasn", "haven", "isn", "ma", "mightn", "mustn", "needn", "shan", "shouldn", "wasn", "weren", "won", "wouldn", "would", "could", "shall", "may", "might", "must", "also", "us", "upon", "within", "without", "yet"]
)

#: Portuguese stopwords (NLTK's list plus common contractions and
#: determiners), written accent-folded because they are matched after folding.
PORTUGUESE_STOPWORDS: frozenset[str] = frozenset(
    ["a", "ao", "aos", "aquela", "aquelas", "aquele", "aqueles", "aquilo", "as", "ate", "com", "como", "da", "das", "de", "dela", "delas", "dele", "deles", "depois", "do", "dos", "e", "ela", "elas", "ele", "eles", "em", "entre", "era", "eram", "eramos", "essa", "essas", "esse", "esses", "esta", "estamos", "estao", "estar", "estas", "estava", "estavam", "estavamos", "este", "esteja", "estejam", "estejamos", "estes", "esteve", "estive", "estivemos", "estiver", "estivera", "estiveram", "estiveramos", "estiverem", "estivermos", "estivesse", "estivessem", "estivessemos", "estou", "eu", "foi", "fomos", "for", "fora", "foram", "foramos", "forem", "formos", "fosse", "fossem", "fossemos", "fui", "ha", "haja", "hajam", "hajamos", "hao", "havemos", "haver", "hei", "houve", "houvemos", "houver", "houvera", "houveram", "houveramos", "houverao", "houverei", "houverem", "houveremos", "houveria", "houveriam", "houveriamos", "houvermos", "houvesse", "houvessem", "houvessemos", "isso", "isto", "ja", "lhe", "lhes", "mais", "mas", "me", "mesmo", "meu", "meus", "minha", "minhas", "muito", "na", "nao", "nas", "nem", "no", "nos", "nossa", "nossas", "nosso", "nossos", "num", "numa", "o", "os", "ou", "para", "pela", "pelas", "pelo", "pelos", "por", "qual", "quando", "que", "quem", "sao", "se", "seja", "sejam", "sejamos", "sem", "ser", "sera", "serao", "serei", "seremos", "seria", "seriam", "seriamos", "seu", "seus", "so", "somos", "sou", "sua", "suas", "tambem", "te", "tem", "temos", "tenha", "tenham", "tenhamos", "tenho", "tera", "terao", "terei", "teremos", "teria", "teriam", "teriamos", "teu", "teus", "teve", "tinha", "tinham", "tinhamos", "tive", "tivemos", "tiver", "tivera", "tiveram", "tiveramos", "tiverem", "tivermos", "tivesse", "tivessem", "tivessemos", "tu", "tua", "tuas", "um", "uma", "voce", "voces", "vos", "aqui", "ali", "onde", "porque", "pois", "cada", "outro", "outra", "outros", "outras", "tudo", "todos", "todas", "algum", "alguma", "alguns", "algumas", "nenhum", "nenhuma", "sobre", "apos", "desde", "ainda", "entao", "assim", "quanto", "muita", "muitos", "muitas", "pouco", "tanto", "tal", "tais", "cujo", "cuja", "dessa", "desse", "desta", "deste", "disso", "disto", "nessa", "nesse", "nesta", "neste", "nisso", "nisto", "daquele", "daquela", "naquele", "naquela", "pra", "pro"]
)

#: Union of both lists: removed from the stems field of every text.
STOPWORDS: frozenset[str] = ENGLISH_STOPWORDS | PORTUGUESE_STOPWORDS

_LANGUAGES = (ENGLISH, PORTUGUESE)

# Zero-width, soft hyphen, bidi controls (LRM/RLM/ALM, embeddings, overrides,
# isolates), word joiner and invisible operators, variation selectors, BOM.
# Removed (not replaced by a space): "ERR\u200b-4012" is still ERR-4012.
_INVISIBLE_RE = re.compile(
    "[\u00ad\u034f\u061c\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\ufe00-\ufe0f\ufeff]"
)
# A segment: word characters joined by single '-' or '.'; '_' is a word
# character here. Segments are what explain_query reports as "raw".
_ASCII_SEGMENT_RE = re.compile(r"\w+(?:[-.]\w+)*")
# A token, run on folded text: letters/digits joined by single '-', '_', '.'.
_TOKEN_RE = re.compile(r"[^\W_]+(?:[-_.][^\W_]+)*")
_SEPARATOR_RE = re.compile(r"[-_.]")
_ASCII_CAMEL_RE = re.compile(r"[a-z][A-Z]")
_EDGE_RE = re.compile(r"^[\W_]+|[\W_]+$")

# Segments up to this long are memoised; longer ones are analysed uncached so
# a pathological input cannot pin megabytes in the cache.
_CACHEABLE_SEGMENT_LEN = 256

# PyStemmer's own cache slows down misses ~3x; segments are memoised here instead.
_STEMMERS = {lang: Stemmer.Stemmer(lang, 0) for lang in _LANGUAGES}
# PyStemmer objects keep internal state and must not be used concurrently.
_STEM_LOCK = threading.Lock()


@dataclass(frozen=True)
class Analysed:
    """The two lexical fields of one text, in text order."""

    exact: list[str]
    stems: list[str]


@dataclass(frozen=True)
class TokenExplanation:
    """What one query token became, for explaining why a term did not match."""

    raw: str
    """The token as it appeared in the query (NFKC-normalised)."""
    exact: str | None
    """The exact-field token, or None if dropped (longer than MAX_TOKEN_LEN)."""
    stems: tuple[str, ...]
    """What it contributes to the stems field (empty for a stopword)."""
    identifier: bool
    stopword: bool


class _Token(NamedTuple):
    raw: str
    exact: str | None
    identifier: bool
    stopword: bool
    vote: int  # +1 English stopword, -1 Portuguese stopword, 0 both/neither
    stems_en: tuple[str, ...]
    stems_pt: tuple[str, ...]
    stems_query: tuple[str, ...]


# --------------------------------------------------------------------------- folding


@cache
def _combining_marks() -> tuple[int, ...]:
    """Every code point with a non-zero combining class (built on first use, ~50 ms)."""
    return tuple(cp for cp in range(0x110000) if unicodedata.combining(chr(cp)))


@cache
def _marks_table() -> dict[int, None]:
    """``str.translate`` table deleting every combining mark."""
    return dict.fromkeys(_combining_marks())


@cache
def _unicode_segment_re() -> re.Pattern[str]:
    """The segment regex for non-ASCII text: word characters plus combining marks."""
    ranges: list[str] = []
    marks = _combining_marks()
    start = prev = marks[0]
    for cp in (*marks[1:], -1):
        if cp != prev + 1:
            ranges.append(chr(start) if start == prev else f"{chr(start)}-{chr(prev)}")
            start = cp
        prev = cp
    word = "[\\w" + "".join(ranges) + "]"
    return re.compile(f"{word}+(?:[-.]{word}+)*")


def _deaccent(text: str) -> str:
    """NFKD and drop combining marks, keeping case (needed for camelCase)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKD", text).translate(_marks_table())


def fold(text: str) -> str:
    """Accent-fold (NFKD, combining marks dropped) and casefold ``text``.

    Every other character is kept: ``fold("Não-Ação!") == "nao-acao!"``.
    """
    folded = _deaccent(text).casefold()
    # casefold can reintroduce marks (rarely); fold those too.
    return folded if folded.isascii() else _deaccent(folded)


def _clean(text: str) -> str:
    """Remove invisible characters and NFKC-normalise non-ASCII text."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", _INVISIBLE_RE.sub("", text))


def _segments(text: str) -> list[str]:
    """Clean ``text`` and cut it into raw segments."""
    cleaned = _clean(text)
    if cleaned.isascii():
        return _ASCII_SEGMENT_RE.findall(cleaned)
    return _unicode_segment_re().findall(cleaned)


# --------------------------------------------------------------------------- identifiers


def _is_camel(word: str) -> bool:
    """True if a lowercase letter is directly followed by an uppercase one."""
    if word.isascii():
        return _ASCII_CAMEL_RE.search(word) is not None
    if word.islower() or word.isupper():
        return False
    return any(a.islower() and b.isupper() for a, b in pairwise(word))


def _camel_parts(word: str) -> list[str]:
    """Split at lower→Upper and at UPPER→Upper+lower: ``XMLHttpRequest`` → XML Http Request."""
    parts: list[str] = []
    start = 0
    n = len(word)
    for i in range(1, n):
        a, b = word[i - 1], word[i]
        if (a.islower() and b.isupper()) or (
            a.isupper() and b.isupper() and i + 1 < n and word[i + 1].islower()
        ):
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts


def is_identifier(raw_token: str) -> bool:
    """True if a raw (unfolded) token is an identifier rather than a prose word.

    An identifier has a digit, an internal ``-``, ``_`` or ``.``, or is
    camelCase (a lowercase letter followed by an uppercase one). Surrounding
    punctuation is ignored: ``ERR-4012.`` and ``(resolve_tenant_db)`` are
    identifiers, ``Hello,`` and ``end.`` are not.
    """
    token = _EDGE_RE.sub("", _deaccent(raw_token))
    if not token:
        return False
    if _SEPARATOR_RE.search(token) or _is_camel(token):
        return True
    return any(c.isalnum() and not c.isalpha() for c in token)


# --------------------------------------------------------------------------- stemming


def _pt_restore(word: str) -> str:
    """Restore the accents Snowball Portuguese needs on -ção / -ções."""
    if word.endswith("coes"):
        return word[:-4] + "ções"
    if word.endswith("cao"):
        return word[:-3] + "ção"
    return word


def _stem_pair(word: str) -> tuple[str, str]:
    """English and Portuguese stems of one folded word (folded, never empty)."""
    pt_input = _pt_restore(word)
    with _STEM_LOCK:
        en = _STEMMERS[ENGLISH].stemWord(word)
        pt = _STEMMERS[PORTUGUESE].stemWord(pt_input)
    if not pt.isascii():
        pt = fold(pt)
    return en or word, pt or word


def _stem_all(words: list[str]) -> tuple[list[str], list[str]]:
    """English and Portuguese stems of folded ``words`` (stems folded, never empty)."""
    if not words:
        return [], []
    pt_input = [_pt_restore(w) for w in words]
    with _STEM_LOCK:
        en = _STEMMERS[ENGLISH].stemWords(words)
        pt = _STEMMERS[PORTUGUESE].stemWords(pt_input)
    en = [s or w for s, w in zip(en, words, strict=True)]
    pt = [(s if s.isascii() else fold(s)) or w for s, w in zip(pt, words, strict=True)]
    return en, pt


def _dedup(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


# --------------------------------------------------------------------------- per segment


def _fold_token(token: str) -> str | None:
    """Casefold an accent-folded token; None if nothing token-like remains."""
    exact = token.casefold()
    if exact.isascii():
        return exact
    exact = _deaccent(exact)
    if _TOKEN_RE.fullmatch(exact):
        return exact
    joined = "_".join(_TOKEN_RE.findall(exact))  # ultra-rare: casefold made a non-word char
    return joined or None


def _identifier_words(sub: str, camel: bool) -> list[str]:
    """Folded, stopword-filtered parts of an all-letters identifier; [] if it has digits."""
    if not _SEPARATOR_RE.sub("", sub).isalpha():
        return []
    words: list[str] = []
    for piece in _SEPARATOR_RE.split(sub):
        for part in _camel_parts(piece) if camel else (piece,):
            folded = _fold_token(part)
            if folded and folded not in STOPWORDS:
                words.append(folded)
    return words


def _analyse_token(sub: str, raw: str) -> _Token | None:
    """Analyse one accent-folded, case-preserved token."""
    camel = _is_camel(sub)
    identifier = camel or not sub.isalpha()
    exact = _fold_token(sub)
    if exact is None:
        return None
    if len(exact) > MAX_TOKEN_LEN:
        return _Token(raw, None, identifier, False, 0, (), (), ())
    if not identifier:
        vote = (exact in ENGLISH_STOPWORDS) - (exact in PORTUGUESE_STOPWORDS)
        if exact in STOPWORDS:
            return _Token(raw, exact, False, True, vote, (), (), ())
        en, pt = _stem_pair(exact)
        query: tuple[str, ...] = (en,) if en == pt else (en, pt)
        return _Token(raw, exact, False, False, vote, (en,), (pt,), query)
    words = _identifier_words(sub, camel)
    if not words:
        whole = (exact,)
        return _Token(raw, exact, True, False, 0, whole, whole, whole)
    ens, pts = _stem_all(words)
    query = _dedup(chain((exact,), chain.from_iterable(zip(ens, pts, strict=True))))
    return _Token(raw, exact, True, False, 0, (exact, *ens), (exact, *pts), query)


def _build(segment: str) -> tuple[_Token, ...]:
    """Analyse one raw segment into its tokens (usually exactly one)."""
    if segment.isascii():
        subs = _TOKEN_RE.findall(segment)
        if len(subs) == 1:
            token = _analyse_token(subs[0], subs[0])
            return () if token is None else (token,)
        raws = subs
    else:
        subs = _TOKEN_RE.findall(_deaccent(segment))
        raws = [segment.strip("_")] if len(subs) == 1 else subs
    found = (_analyse_token(sub, raw) for sub, raw in zip(subs, raws, strict=True))
    return tuple(t for t in found if t is not None)


_build_cached = lru_cache(maxsize=1 << 16)(_build)


def _segment_tokens(segment: str) -> tuple[_Token, ...]:
    if len(segment) <= _CACHEABLE_SEGMENT_LEN:
        return _build_cached(segment)
    return _build(segment)


def _tokens(text: str) -> list[_Token]:
    """Every token of ``text`` in order, including dropped (too long) ones."""
    segments = _segments(text)
    # Each distinct segment is analysed (or fetched from the cache) once per text.
    table: dict[str, tuple[_Token, ...]] = dict.fromkeys(segments, ())
    for segment in table:
        table[segment] = _segment_tokens(segment)
    return list(chain.from_iterable(map(table.__getitem__, segments)))


# --------------------------------------------------------------------------- public API

_get_exact = attrgetter("exact")
_get_vote = attrgetter("vote")
_STEM_FIELD = {ENGLISH: attrgetter("stems_en"), PORTUGUESE: attrgetter("stems_pt")}
_get_query_stems = attrgetter("stems_query")


def _exact(tokens: list[_Token]) -> list[str]:
    return [e for e in map(_get_exact, tokens) if e is not None]


def _language(tokens: list[_Token]) -> str:
    return PORTUGUESE if sum(map(_get_vote, tokens)) < 0 else ENGLISH


def tokenize(text: str) -> list[str]:
    """The exact-field tokens of ``text``, in order, duplicates kept."""
    return _exact(_tokens(text))


def detect_language(text: str) -> str:
    """``"portuguese"`` if ``text`` has more Portuguese than English stopwords, else ``"english"``.

    Words on both lists (``a``, ``no``, ``do``…) count for neither.
    """
    return _language(_tokens(text))


def stopword_language(text: str) -> str | None:
    """``"en"`` or ``"pt"`` (ISO 639-1) when ``text``'s stopwords vote for one of them,
    None when they do not (no stopword, or as many of each).

    Unlike :func:`detect_language` it does not default to English, so a caller can
    tell "English" from "too short to say".

    >>> stopword_language("what is the role of p53"), stopword_language("qual é o papel do p53")
    ('en', 'pt')
    >>> stopword_language("BRCA1 p53 ERR-4012") is None
    True
    """
    votes = sum(map(_get_vote, _tokens(text)))
    if votes == 0:
        return None
    return "en" if votes > 0 else "pt"


def analyse(text: str) -> Analysed:
    """Analyse a document: both fields in text order, duplicates kept (for term frequency).

    The stems field is stemmed in the language detected for this text.
    """
    tokens = _tokens(text)
    stems = list(chain.from_iterable(map(_STEM_FIELD[_language(tokens)], tokens)))
    return Analysed(exact=_exact(tokens), stems=stems)


def analyse_query(text: str) -> Analysed:
    """Analyse a query: exact tokens deduplicated in order; each word stemmed in both
    languages (English first), deduplicated in order."""
    tokens = _tokens(text)
    exact = list(dict.fromkeys(_exact(tokens)))
    stems = list(dict.fromkeys(chain.from_iterable(map(_get_query_stems, tokens))))
    return Analysed(exact=exact, stems=stems)


def explain_query(text: str) -> list[TokenExplanation]:
    """One explanation per query token occurrence (not deduplicated), in order.

    Dropped tokens (too long) appear with ``exact=None``; stopwords with
    ``stopword=True`` and no stems.
    """
    return [
        TokenExplanation(
            raw=t.raw,
            exact=t.exact,
            stems=t.stems_query,
            identifier=t.identifier,
            stopword=t.stopword,
        )
        for t in _tokens(text)
    ]
