"""Tests for plait.analysis: the exact and stems fields of the lexical arm."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait.analysis import (
    ENGLISH_STOPWORDS,
    MAX_TOKEN_LEN,
    PORTUGUESE_STOPWORDS,
    STOPWORDS,
    Analysed,
    TokenExplanation,
    analyse,
    analyse_query,
    detect_language,
    explain_query,
    fold,
    is_identifier,
    stopword_language,
    tokenize,
)

# --------------------------------------------------------------------------- identifiers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ERR-4012.", ["err-4012"]),
        ("SKU-88213-B", ["sku-88213-b"]),
        ("v3.11.2", ["v3.11.2"]),
        ("PIX-2024-88317", ["pix-2024-88317"]),
        ("resolve_tenant_db", ["resolve_tenant_db"]),
        ("resolveTenantDB", ["resolvetenantdb"]),
    ],
)
def test_identifiers_are_one_exact_token(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected
    assert analyse(text).exact == expected


def test_identifiers_in_a_sentence() -> None:
    text = "Erro ERR-4012. no SKU-88213-B (v3.11.2), ver PIX-2024-88317; chame resolve_tenant_db ou resolveTenantDB!"
    assert tokenize(text) == [
        "erro", "err-4012", "no", "sku-88213-b", "v3.11.2", "ver",
        "pix-2024-88317", "chame", "resolve_tenant_db", "ou", "resolvetenantdb",
    ]  # fmt: skip


def test_identifiers_with_digits_are_kept_whole_and_unstemmed_in_stems() -> None:
    assert analyse("ERR-4012.").stems == ["err-4012"]
    assert analyse("SKU-88213-B").stems == ["sku-88213-b"]
    assert analyse("v3.11.2").stems == ["v3.11.2"]
    assert analyse("PIX-2024-88317").stems == ["pix-2024-88317"]


def test_all_letter_identifiers_add_their_parts_to_stems() -> None:
    assert analyse("resolve_tenant_db").stems == ["resolve_tenant_db", "resolv", "tenant", "db"]
    assert analyse("resolveTenantDB").stems == ["resolvetenantdb", "resolv", "tenant", "db"]
    assert analyse("kebab-case-words").stems == ["kebab-case-words", "kebab", "case", "word"]
    assert analyse("XMLHttpRequest").stems == ["xmlhttprequest", "xml", "http", "request"]


def test_identifier_parts_drop_stopwords() -> None:
    assert analyse("the_end").stems == ["the_end", "end"]
    assert analyse("getTheValue").stems == ["getthevalue", "get", "valu"]


def test_edge_underscores_and_punctuation() -> None:
    assert tokenize("__init__ foo.bar. -x- _y_ e.g. don't") == [
        "init", "foo.bar", "x", "y", "e.g", "don", "t",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ERR-4012.", True),
        ("SKU-88213-B", True),
        ("v3.11.2", True),
        ("resolve_tenant_db", True),
        ("resolveTenantDB", True),
        ("(resolve_tenant_db)", True),
        ("iPhone", True),
        ("x2", True),
        ("running", False),
        ("Hello,", False),
        ("end.", False),
        ("HTTP", False),
        ("Não", False),
        ("", False),
        ("...", False),
    ],
)
def test_is_identifier(raw: str, expected: bool) -> None:
    assert is_identifier(raw) is expected


# --------------------------------------------------------------------------- folding


def test_fold() -> None:
    assert fold("não") == "nao"
    assert fold("ação") == "acao"
    assert fold("Não-Ação! ÉCOLE Straße") == "nao-acao! ecole strasse"


def test_accents_fold_in_both_fields() -> None:
    assert tokenize("não") == ["nao"]
    assert tokenize("ação") == ["acao"]
    assert tokenize("Ação-Rápida") == ["acao-rapida"]
    assert analyse_query("não").exact == analyse_query("nao").exact == ["nao"]
    assert analyse("ação").stems == analyse("acao").stems
    # A decomposed accent (e + U+0301) folds like the precomposed one.
    assert tokenize("cafe\u0301 café") == ["cafe", "cafe"]


def test_compatibility_forms_are_normalised() -> None:
    assert tokenize("ＥＲＲ－４０１２ ﬁle") == ["err-4012", "file"]


# --------------------------------------------------------------------------- stems


def test_english_stems() -> None:
    assert analyse("running").stems == ["run"]
    assert analyse("The runners are running quickly").stems == ["runner", "run", "quick"]
    assert analyse("The payment was not processed because the server was down").stems == [
        "payment", "process", "server",
    ]  # fmt: skip


def test_portuguese_stems() -> None:
    text = "O pagamento não foi processado porque o servidor estava fora do ar"
    assert detect_language(text) == "portuguese"
    assert analyse(text).stems == ["pagament", "process", "servidor", "ar"]
    assert analyse("Os servidores estão rodando").stems == ["servidor", "rod"]


def test_portuguese_cao_coes_conflate_with_and_without_accents() -> None:
    doc = "as configurações do servidor não estão corretas"
    assert detect_language(doc) == "portuguese"
    assert analyse(doc).stems == ["configur", "servidor", "corret"]
    for query in ("configuração", "configuracao", "configuracoes", "configurações"):
        assert "configur" in analyse_query(query).stems


def test_stopwords_removed_from_stems_but_kept_in_exact() -> None:
    result = analyse("the server is down")
    assert result.exact == ["the", "server", "is", "down"]
    assert result.stems == ["server"]
    result = analyse("o servidor não está no ar")
    assert result.exact == ["o", "servidor", "nao", "esta", "no", "ar"]
    assert result.stems == ["servidor", "ar"]


def test_document_keeps_duplicates_for_term_frequency() -> None:
    assert analyse("error error ERR-1 ERR-1") == Analysed(
        exact=["error", "error", "err-1", "err-1"], stems=["error", "error", "err-1", "err-1"]
    )


def test_stopword_lists() -> None:
    assert 150 <= len(ENGLISH_STOPWORDS) <= 250
    assert 150 <= len(PORTUGUESE_STOPWORDS) <= 300
    assert STOPWORDS == ENGLISH_STOPWORDS | PORTUGUESE_STOPWORDS
    assert {"the", "and", "is"} <= ENGLISH_STOPWORDS
    assert {"nao", "voce", "esta", "tambem", "de"} <= PORTUGUESE_STOPWORDS
    # Written accent-folded: they are matched after folding.
    assert all(fold(w) == w for w in STOPWORDS)


# --------------------------------------------------------------------------- language


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("the server is down and the payment failed", "english"),
        ("o servidor caiu e o pagamento falhou", "portuguese"),
        ("você não tem acesso a esta conta", "portuguese"),
        ("", "english"),
        ("ERR-4012 v3.11.2", "english"),
        ("a o do", "english"),  # words on both lists count for neither: a tie
        ("the de", "english"),  # one each: tie
    ],
)
def test_detect_language(text: str, language: str) -> None:
    assert detect_language(text) == language


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("what is the role of the protein", "en"),  # what, is, the, of, the: 5 English
        ("qual é o papel da proteína", "pt"),  # qual, é, o, da: Portuguese only
        ("BRCA1 p53 ERR-4012", None),  # no stopword: undetermined, not English
        ("", None),
        ("a o do", None),  # on both lists: no vote
        ("the de", None),  # one each: a tie
        ("the de of", "en"),
    ],
)
def test_stopword_language_says_when_it_cannot_tell(text: str, language: str | None) -> None:
    assert stopword_language(text) == language


# --------------------------------------------------------------------------- queries


def test_query_stems_in_both_languages() -> None:
    assert analyse_query("running").stems == ["run", "running"]
    assert analyse_query("pagamentos").stems == ["pagamento", "pagament"]
    assert analyse_query("configuracao").stems == ["configuracao", "configur"]
    # Same stem in both: emitted once.
    assert analyse_query("servidores").stems == ["servidor"]


def test_query_dedupes_in_order() -> None:
    result = analyse_query("running run runs ERR-4012 err-4012 running")
    assert result.exact == ["running", "run", "runs", "err-4012"]
    assert result.stems == ["run", "running", "runs", "err-4012"]


def test_query_identifiers() -> None:
    result = analyse_query("why does resolve_tenant_db fail with ERR-4012?")
    assert result.exact == ["why", "does", "resolve_tenant_db", "fail", "with", "err-4012"]
    assert result.stems == ["resolve_tenant_db", "resolv", "tenant", "db", "fail", "err-4012"]


def test_explain_query() -> None:
    assert explain_query("the ERR-4012 não resolveTenantDB running") == [
        TokenExplanation(raw="the", exact="the", stems=(), identifier=False, stopword=True),
        TokenExplanation(
            raw="ERR-4012", exact="err-4012", stems=("err-4012",), identifier=True, stopword=False
        ),
        TokenExplanation(raw="não", exact="nao", stems=(), identifier=False, stopword=True),
        TokenExplanation(
            raw="resolveTenantDB",
            exact="resolvetenantdb",
            stems=("resolvetenantdb", "resolv", "tenant", "db"),
            identifier=True,
            stopword=False,
        ),
        TokenExplanation(
            raw="running", exact="running", stems=("run", "running"), identifier=False, stopword=False
        ),
    ]


def test_explain_query_reports_dropped_tokens() -> None:
    long = "a" * (MAX_TOKEN_LEN + 1)
    (explanation,) = explain_query(long)
    assert explanation == TokenExplanation(
        raw=long, exact=None, stems=(), identifier=False, stopword=False
    )


# --------------------------------------------------------------------------- limits and hostile input


def test_token_length_limit() -> None:
    assert MAX_TOKEN_LEN == 64
    ok, too_long = "x" * 64, "x" * 65
    assert tokenize(f"{ok} {too_long} end") == [ok, "end"]
    assert analyse(f"{too_long} end").stems == ["end"]
    assert analyse(f"ERR-{'9' * 70}").exact == []
    assert analyse("abc_" * 20).stems == []  # a long identifier drops its parts too


def test_invisible_characters_are_removed() -> None:
    assert tokenize("ERR\u200b-4012") == ["err-4012"]
    assert tokenize("\u202eabc\u202c \u200fdef\u200e \ufeffghi") == ["abc", "def", "ghi"]
    assert tokenize("soft\u00adhyphen") == ["softhyphen"]


def test_hostile_characters_split_tokens() -> None:
    assert tokenize("foo\x00bar") == ["foo", "bar"]
    assert tokenize("deploy 🚀 done🎉") == ["deploy", "done"]
    assert tokenize("x\ud800y") == ["x", "y"]  # a lone surrogate
    assert analyse("") == Analysed(exact=[], stems=[])
    assert analyse_query("   \n\t ") == Analysed(exact=[], stems=[])


def test_long_lines() -> None:
    line = "x" * 100_000
    assert analyse(f"{line}\nok {line}") == Analysed(exact=["ok"], stems=["ok"])
    assert analyse("a_" * 50_000 + " ok").exact == ["ok"]


@pytest.mark.slow
def test_five_megabytes_analyse_completely() -> None:
    rng = random.Random(7)
    vocabulary = ["the", "payment", "failed", "because", "resolve_tenant_db", "returned", "ERR-4012", "while", "v3.11.2", "was", "deployed;", "o", "pagamento", "não", "foi", "processado", "pelas", "configurações", "do", "servidor", "SKU-88213-B", "resolveTenantDB", "running", "quickly"]
    parts: list[str] = []
    size = 0
    while size < 5_000_000:
        if rng.random() < 0.9:
            word = rng.choice(vocabulary)
        else:  # unique ids, like a log
            word = f"req-{rng.getrandbits(48):012x}"
        parts.append(word)
        size += len(word) + 1
    text = " ".join(parts)
    result = analyse(text)
    assert len(result.exact) == len(parts)


_SPECIALS = [
    "\x00", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e",
    "\u2066", "\u2069", "\ufeff", "\u00ad", "\u0301", "\u0303", "\ud800", "\udfff",
    "🚀", "👩‍💻", "\ufdfa", "½", "ß", "İ", "ŉ", "ǰ", "-", "_", ".", " ", "\n", "\t",
    "ERR-4012", "resolveTenantDB", "não", "ﬁ", "Ａ", "\u3164", "ᾼ",
]  # fmt: skip

_hostile_text = st.lists(
    st.one_of(st.sampled_from(_SPECIALS), st.characters(), st.text(max_size=8)),
    max_size=80,
).map("".join)


def _check_tokens(tokens: list[str]) -> None:
    for token in tokens:
        assert token
        assert not any(c.isspace() for c in token)
        assert len(token) <= MAX_TOKEN_LEN


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile_text)
def test_analysis_never_raises(text: str) -> None:
    for result in (analyse(text), analyse_query(text)):
        _check_tokens(result.exact)
        _check_tokens(result.stems)
    assert tokenize(text) == analyse(text).exact
    assert detect_language(text) in ("english", "portuguese")
    for explanation in explain_query(text):
        assert explanation.exact is None or explanation.exact in tokenize(text)
        _check_tokens(list(explanation.stems))
    is_identifier(text)
    fold(text)
