"""Extractive answers quote sentences, never navigation, chunk-edge pieces or repeats
(:mod:`plait.ask_extract`, :func:`plait.ask._quote_candidates`).

Found on real repositories: teaching-vacancies' "What does SRID 4326 mean for how
locations are stored?" was answered "Meaning of SRID 4326 [1] How we store locations [1]
…", two table-of-contents links, and the quote of [1] was the raw
"[Meaning of SRID 4326](#meaning-of-srid-4326)"; on manage-get-gov one sentence was
quoted whole from one chunk and again cut ("…make sure "Staff") from the chunk that ends
inside it; and a passage holding no sentence was named "holds no sentence to quote [1]"
while its citation quoted one of its lead-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plait.ask import _quote_candidates
from plait.ask_extract import candidates, choose, navigation
from plait.chunking import ChunkSettings
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin, Hit, Match, Ranks


def _hit(n: int, content: str, heading: list[str], **metadata: Any) -> Hit:
    return Hit(
        chunk_id=f"c{n}",
        content=content,
        score=1.0 / n,
        vector_score=None,
        lexical_score=1.0,
        match=Match.LEXICAL,
        scope="docs",
        ranks=Ranks(lexical=n),
        origin=FileOrigin(source_path="geo.md", heading_path=heading),
        metadata=metadata,
    )


_TOC = (
    "## Index\n"
    "- [Introduction](#introduction)\n"
    "- [How we store locations](#how-we-store-locations)\n"
    "  - [Meaning of SRID 4326](#meaning-of-srid-4326)\n"
    "- [Why not just Geometry](#why-not-just-geometry) · [Performance](#performance)\n"
)
_BODY = (
    "## How we store locations\n\n"
    "Locations are stored as `geometry` with [SRID 4326](https://epsg.io/4326), "
    "so they are latitude and longitude.\n"
)
SRID = "What does SRID 4326 mean for how locations are stored?"


def test_table_of_contents_links_are_not_sentences() -> None:
    sources = [_hit(1, _TOC, ["Geo", "Index"]), _hit(2, _BODY, ["Geo", "How we store locations"])]
    # before: "Meaning of SRID 4326" (srid, 4326: 2 of the 5 words) and "How we store
    # locations" (store, locat: 2) of source 1 were chosen first
    assert [(c.n, c.text) for c in candidates(SRID, sources)] == [
        (2, "Locations are stored as geometry with SRID 4326, so they are latitude and longitude.")
    ]
    (chosen,) = choose(SRID, sources, max_sentences=3)
    assert (chosen.n, chosen.lexical) == (2, 0.8)  # srid, 4326, store, locat of {srid, 4326, mean, locat, store}
    # the list items that are only a link (or two, "·" between them) are navigation;
    # a sentence holding a link is not
    assert navigation(_TOC) == {
        "Introduction",
        "How we store locations",
        "Meaning of SRID 4326",
        "Why not just Geometry · Performance",
    }
    assert navigation(_BODY) == set()


def test_a_quote_writes_a_link_as_its_text_and_never_quotes_navigation() -> None:
    # before: "[Meaning of SRID 4326](#meaning-of-srid-4326)" and the other links, as written
    assert _quote_candidates(_TOC) == []
    assert _quote_candidates(_BODY) == [
        "Locations are stored as `geometry` with SRID 4326, so they are latitude and longitude."
    ]
    badge = "[![Build](https://ci.example/badge.svg)](https://ci.example) See ![the map](m.png) and `[a](b)`."
    assert _quote_candidates(badge) == ["Build See the map and `[a](b)`."]


_STEP = '5. If the user needs the admin pages, make sure "Staff Status" is checked in the permissions.'
STAFF = "How do I give a user Staff Status for the admin pages?"


def test_a_sentence_quoted_once_is_not_quoted_again_cut() -> None:
    # no chunk offsets: nothing is known cut; the piece that is a prefix of the whole
    # sentence is the same sentence and is not repeated
    cut = '4. Open the user.\n5. If the user needs the admin pages, make sure "Staff'
    sources = [_hit(1, _STEP, ["Roles"]), _hit(2, cut, ["Roles"])]
    chosen = choose(STAFF, sources, max_sentences=3)
    # {give, user, staff, status, admin, page}: the step holds 5, the cut piece 4 (over
    # half the best: chosen before), "Open the user." 1 (under half)
    assert [(c.n, c.text, c.lexical) for c in chosen] == [
        (1, 'If the user needs the admin pages, make sure "Staff Status" is checked in the permissions.', 5 / 6)
    ]


def test_a_sentence_cut_at_a_chunk_edge_is_not_a_candidate() -> None:
    # chunk 1 was cut inside a paragraph: 1200 characters (the chunker's target), no
    # paragraph break after character 1000, its last sentence ends mid-word; chunk 2
    # continues the section (offset 1050, no heading), from the overlap: its first
    # sentence starts mid-sentence
    steps = "".join(f"{i}. Open the panel named p{i:02d} and read every line of its label.\n" for i in range(1, 19))
    first = "# Roles\n\n" + steps + '19. If the user needs the admin pages, make sure "Staff'
    assert len(first) == 1189  # 9 + 18 steps of 63 characters + 46
    second = 'the admin pages, make sure "Staff Status" is checked.\n20. Click Save to apply the admin change.'
    sources = [
        _hit(1, first, ["Roles"], charStart=0, charEnd=1189),
        _hit(2, second, ["Roles"], charStart=1050, charEnd=1050 + len(second)),
    ]
    found = [(c.n, c.text) for c in candidates(STAFF, sources) if "admin" in c.text]
    # before: also (1, '…make sure "Staff') and (2, 'the admin pages, make sure "Staff Status" is checked.')
    assert found == [(2, "Click Save to apply the admin change.")]
    # without offsets chunk 2 is not known to continue a section: its first piece is a
    # candidate; chunk 1's end is still known cut (by its length and its window)
    bare = [_hit(1, first, ["Roles"]), _hit(2, second, ["Roles"])]
    assert [c.n for c in candidates(STAFF, bare) if "Staff" in c.text] == [2]


def test_a_sentence_cut_at_the_end_of_a_chunk_of_a_small_target_is_not_quoted(tmp_path: Path) -> None:
    # a collection indexed with a 200-character target: the chunker cut the rotation
    # sentence after "is rotated" (chunk 0-202, no paragraph break after character 160),
    # and the next chunk starts inside it (offset 162, "key of the production…"). The
    # cut rule measured the chunk against the default 1200-character target, so the piece
    # "The etcd encryption key of the production cluster is rotated" was quoted
    text = (
        "# Key rotation\n\n"
        "Keys are kept in the vault of the cluster. The vault is sealed at night and opened by two admins. "
        "Backups go to cold storage. "
        "The etcd encryption key of the production cluster is rotated by the operator on duty every ninety days "
        "with the rotate command of the admin tool. Old keys are kept for a year.\n\n"
        "# Summary\n\nThe etcd encryption key is rotated every ninety days.\n"
    )
    doc = SourceDocument(
        source_id="keys.md",
        scope="docs",
        parts=(SourcePart(text=text, origin=FileOrigin(source_path="keys.md"), markdown=True),),
    )
    small = ChunkSettings(target=200, overlap=40, window=40)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=32), chunk_settings=small, llm="none") as engine:
        engine.index_documents([doc], collection="k")
        assert engine.store.get_settings("k")["chunking"] == {"target": 200, "overlap": 40, "window": 40}
    # asked by an engine with the default chunk sizes (the CLI's): the collection's count
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=32), llm="none") as engine:
        result = engine.ask("How often is the etcd encryption key rotated?", collection="k", min_term_coverage=0.1)
    cut = "The etcd encryption key of the production cluster is rotated"
    assert any(h.content.endswith(cut) and len(h.content) == 202 for h in result.sources)
    # {often, etcd, encrypt, key, rotat}: the summary and the cut piece hold 4 (0.8, plus
    # at most 0.1 of cosine), the two "keys" sentences 1 (at most 0.3, under half the best)
    assert result.answer == "The etcd encryption key is rotated every ninety days. [1]"
    assert [c.quote for c in result.citations] == ["The etcd encryption key is rotated every ninety days."]


def test_a_passage_named_for_holding_no_sentence_is_not_quoted(tmp_path: Path) -> None:
    # a heading, two lead-ins and code: no sentence to quote, so the answer names the
    # passage and its citation quotes its heading (before: the lead-in
    # "it may help to resync your laptop with time.nist.gov:")
    text = (
        "# Development\n\n## Login Time Bug\n\n"
        "If you see errors about a token issued in the future like this:\n\n"
        "```\nERROR [djangooidc.oidc:243] Issued in the future\n```\n\n"
        "it may help to resync your laptop with time.nist.gov:\n\n"
        "```\nsudo sntp -sS time.nist.gov\n```\n"
    )
    doc = SourceDocument(
        source_id="dev.md",
        scope="docs",
        parts=(SourcePart(text=text, origin=FileOrigin(source_path="dev.md", title="Dev"), markdown=True),),
    )
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=32), llm="none") as engine:
        engine.index_documents([doc])
        result = engine.ask("What fixes djangooidc.oidc:243 Issued in the future?", min_term_coverage=0.1)
    assert result.mode == "extractive"
    assert result.answer == "The closest passage (“Development › Login Time Bug”) holds no sentence to quote [1]"
    (citation,) = result.citations
    assert citation.quote == "Login Time Bug"


def test_a_passage_under_no_heading_named_for_holding_no_sentence_quotes_its_own_text(tmp_path: Path) -> None:
    # no heading to quote it by (a Markdown file without headings, a plain-text part):
    # the citation quoted "" (the heading path's last title, or nothing). It quotes the
    # line of the passage's visible text sharing most words with the question, a lead-in
    # and the code line under it being two lines
    markdown = (
        "If you see errors about a token issued in the future like this:\n\n"
        "```\nERROR [djangooidc.oidc:243] Issued in the future\n```\n"
    )
    text = "How often is the etcd key rotated?\n\nQuarterly, automatically.\n"
    docs = [
        SourceDocument(
            source_id=name,
            scope="docs",
            parts=(SourcePart(text=body, origin=FileOrigin(source_path=name), markdown=name.endswith(".md")),),
        )
        for name, body in (("dev.md", markdown), ("etcd.txt", text))
    ]
    asked = {
        "dev": ("What fixes djangooidc.oidc:243 Issued in the future?", "ERROR [djangooidc.oidc:243] Issued in the future"),
        "etcd": ("How often is the etcd encryption key rotated?", "How often is the etcd key rotated?"),
    }
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=32), llm="none") as engine:
        for doc, (name, (question, quote)) in zip(docs, asked.items(), strict=True):
            engine.index_documents([doc], collection=name)
            result = engine.ask(question, collection=name, min_term_coverage=0.1)
            assert result.mode == "extractive"
            # a lead-in, a restated question, code and a two-word label: no sentence
            assert result.answer == "The closest passage holds no sentence to quote [1]"
            (citation,) = result.citations
            assert (citation.origin, citation.quote) == (doc.parts[0].origin, quote)


def test_a_chunk_that_starts_inside_a_code_block_is_read_as_its_rest(tmp_path: Path) -> None:
    """A chunk cut inside a long fenced block starts with code and holds the block's closing
    run. Ask read it alone, as indexing and snippets do not (``metadata.fence``): the closing
    run opened a fence, so the code lines before it were prose and the sentence after it
    code. Here the passage holding the answer passed the gate with every word of the
    question and the answer was "holds no sentence to quote"."""
    code = "".join(f"kubectl scale --replicas={i} deployment worker-{i} -n production\n" for i in range(60))
    text = (
        "# Ops runbook\n\n## Scaling the workers\n\n"
        "Scale the worker deployment when the queue grows.\n\n"
        f"```\n{code}```\n\n"
        "Scale it back when the queue is drained, or the bill grows quickly.\n"
    )
    doc = SourceDocument(
        source_id="ops.md",
        scope="docs",
        parts=(SourcePart(text=text, origin=FileOrigin(source_path="ops.md", title="Ops"), markdown=True),),
    )
    question = "When do we scale back after the queue is drained?"
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=32), llm="none") as engine:
        engine.index_documents([doc])
        last = engine.search(question, k=8, mode="lexical").hits
        result = engine.ask(question, min_term_coverage=0.1, mode="lexical")
    tail = next(h for h in last if h.content.rstrip().endswith("bill grows quickly."))
    assert tail.metadata["fence"] == "```" and tail.content.startswith("scale --replicas=49 deployment")
    # its code lines are not candidates; its sentence is (scale, back, queue, drain: 4 of 4)
    assert [(c.text, c.lexical) for c in candidates(question, [tail])] == [
        ("Scale it back when the queue is drained, or the bill grows quickly.", 1.0)
    ]
    assert result.mode == "extractive"
    assert result.answer.startswith("Scale it back when the queue is drained, or the bill grows quickly. [1]")
    assert result.citations[0].quote == "Scale it back when the queue is drained, or the bill grows quickly."


def test_navigation_is_parsed_once_per_content() -> None:
    """Regression (adf1974): inserting plain_blocks moved navigation's cache onto it, so an
    answer parsed each source's Markdown again for the quotes of those it cites, though
    navigation says it is cached by content."""
    navigation.cache_clear()
    assert navigation(_TOC) == navigation(_TOC)
    info = navigation.cache_info()
    assert (info.misses, info.hits) == (1, 1)
