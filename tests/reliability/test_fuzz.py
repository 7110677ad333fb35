"""Property-based fuzzing (hypothesis) of the analyser, the chunker, query handling and
the session reader: any input gives a well-formed answer or a ``ValidationError``,
never another exception.

``PLAIT_FUZZ_EXAMPLES`` sets the examples per property (default 200; the
benchmark-style run in ``benchmarks/reliability.py`` uses 10,000).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait.analysis import analyse, analyse_query
from plait.chunking import ChunkSettings, chunk_markdown, chunk_text
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ValidationError
from plait.service import Plait
from plait.sources.sessions import SessionSource
from plait.testing.corpus import ARTICLE_DOCS, documents

EXAMPLES = int(os.environ.get("PLAIT_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 1000,  # CI: reproducible; the long run explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text that leans on what breaks tokenisers and chunkers: markup, identifiers,
# combining marks, zero-width and bidi controls, surrogate-free odd code points.
SPICE = st.sampled_from(
    [
        "#", "## ", "\n", "\n\n", " ", "-", "_", ".", "ERR-4012", "v3.11.2", "resolveTenantDB",
        "\u200b", "\u200f", "\u202e", "\ufeff", "e\u0301", "ß", "İ", "ﬁ", "\x00", "\t", "\r\n",
        "```", "*", '"', "(", ")", ":", "NEAR", "AND", "OR", "' OR 1=1 --", "é" * 3, "😀",
    ]
)
TEXT = st.lists(st.one_of(st.text(max_size=40), SPICE), max_size=60).map("".join)


@FUZZ
@given(TEXT)
def test_analyser_fields_are_clean_tokens(text: str) -> None:
    doc = analyse(text)
    query = analyse_query(text)
    for token in [*doc.exact, *doc.stems, *query.exact, *query.stems]:
        assert isinstance(token, str) and token and not re.search(r"\s", token)
    assert len(query.exact) == len(set(query.exact))
    assert len(query.stems) == len(set(query.stems))
    # A query finds the document made of the same text: same exact tokens.
    assert set(query.exact) == set(doc.exact)


CHUNK_SETTINGS = st.builds(
    lambda target, overlap_share, window: ChunkSettings(
        target=target, overlap=min(target - 1, int(target * overlap_share)), window=window
    ),
    st.integers(1, 300),
    st.floats(0, 0.9),
    st.integers(0, 100),
)


def _check_chunks(text: str, chunks: list, limit: int) -> None:
    covered = [False] * len(text)
    last_start = -1
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.start > last_start  # in input order, always progressing
        assert len(chunk.text) <= limit
        last_start = chunk.start
        for i in range(chunk.start, chunk.end):
            covered[i] = True
    lost = [i for i, c in enumerate(text) if not c.isspace() and not covered[i]]
    assert lost == []  # nothing but whitespace falls between chunks


@FUZZ
@given(TEXT, CHUNK_SETTINGS)
def test_chunker_slices_cover_the_text_within_the_size_limit(text: str, cut: ChunkSettings) -> None:
    limit = cut.target + cut.window
    _check_chunks(text, chunk_text(text, cut), limit)
    markdown = chunk_markdown(text, cut)
    _check_chunks(text, markdown, limit)
    for chunk in markdown:
        assert all(isinstance(h, str) and h == h.strip() for h in chunk.heading_path)


@pytest.fixture(scope="module")
def engine() -> Iterator[Plait]:
    with tempfile.TemporaryDirectory() as tmp, Plait(str(Path(tmp) / "p.db"), embedder=FakeEmbedder(dimension=16)) as e:
        e.index_documents(documents(ARTICLE_DOCS))
        yield e


@FUZZ
@given(query=TEXT, k=st.integers(-2, 60), weight=st.one_of(st.none(), st.floats(allow_nan=True)))
def test_any_query_gives_results_or_a_validation_error(
    engine: Plait, query: str, k: int, weight: float | None
) -> None:
    try:
        result = engine.search(query, k=k, lexical_weight=weight)
    except ValidationError as exc:
        assert str(exc)
        return
    assert k >= 1 and len(result.hits) <= k
    assert [h.ranks.fused for h in result.hits] == list(range(1, len(result.hits) + 1))
    scores = [h.score for h in result.hits]
    if result.fusion.identifier_reason is None:  # the identifier precedence reorders the first 10 by design
        assert scores == sorted(scores, reverse=True)
    else:  # it permutes the first 10 only: the rest keep fused order, below every one of them
        window, tail = scores[:10], scores[10:]
        assert tail == sorted(tail, reverse=True) and (not tail or max(tail) <= min(window))
    assert len({h.chunk_id for h in result.hits}) == len(result.hits)


EVENT = st.fixed_dictionaries(
    {
        "id": st.one_of(st.text(max_size=4), st.integers(), st.none()),
        "sessionId": st.one_of(st.sampled_from(["s1", "s2", ""]), st.text(max_size=3)),
        "type": st.one_of(st.sampled_from(["chat.message", "agent.response", "tool.call", ""]), st.text(max_size=5)),
    },
    optional={
        "payload": st.one_of(
            st.fixed_dictionaries({"text": st.one_of(TEXT, st.integers(), st.none())}),
            st.text(max_size=5),
            st.lists(st.integers(), max_size=2),
        ),
        "title": st.one_of(st.text(max_size=10), st.integers()),
        "createdAt": st.one_of(st.text(max_size=10), st.floats()),
    },
)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
LINE = st.one_of(
    EVENT.map(lambda e: json.dumps(e).encode()),
    EVENT.map(lambda e: json.dumps(e, ensure_ascii=False).encode()),
    JSON_VALUE.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.integers(1, 5000).map(lambda n: b"[" * n),  # nesting past the JSON decoder's recursion limit
    st.sampled_from([b"", b"   ", b"{", b'{"id": "x"', b"\xff\xfe", b'{"id":"a","sessionId":"s1","type":"chat.message","payload":{"text":"hi"}}']),
)


@FUZZ
@given(st.lists(LINE, max_size=25))
def test_session_reader_accounts_for_every_line(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        log.write_bytes(b"\n".join(lines))
        scan = SessionSource(path=log).scan()
        docs = list(scan)
    non_blank = sum(1 for raw in lines if raw.strip())
    parts = sum(len(d.parts) for d in docs)
    by_type = sum(scan.skipped_by_type.values())
    bad_lines = [s for s in scan.skipped if re.fullmatch(r"log\.jsonl:\d+", s.path)]
    assert parts + by_type + len(bad_lines) == non_blank
    assert all(s.reason for s in scan.skipped)
    for doc in docs:
        assert doc.parts and all(p.text.strip() for p in doc.parts)
