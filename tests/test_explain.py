"""``Plait.explain``: each diagnosis case built on purpose, with exact per-arm ranks.

Dense ranks are placed with FakeEmbedder overrides (the query and each document get
chosen vectors), so every rank and score below is computed by hand.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ValidationError
from plait.llm import OllamaLLM
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.testing.wire import WireServer
from plait.types import to_json

DIM = 8


def unit(*pairs: tuple[int, float]) -> list[float]:
    v = np.zeros(DIM)
    for i, x in pairs:
        v[i] = x
    return list(v / np.linalg.norm(v))


def angle(degrees: float) -> list[float]:
    """A unit vector at ``degrees`` from the query axis e0 (cosine = cos(degrees))."""
    r = math.radians(degrees)
    return unit((0, math.cos(r)), (1, math.sin(r)))


def engine_with(tmp_path: Path, docs: dict[str, str], overrides: dict[str, list[float]], **kw: object) -> Plait:
    fake = FakeEmbedder(dimension=DIM, overrides=overrides)
    engine = Plait(str(tmp_path / "plait.db"), embedder=fake, **kw)  # type: ignore[arg-type]
    engine.index_documents(documents(docs))
    return engine


# -- the article's case 1: dense 44-ish, lexical 1, returned → fusion worked ---------------


def test_fusion_worked_lexical_rescues_an_identifier(tmp_path: Path) -> None:
    query = "ERR-4012"
    fillers = {f"f-{i:02d}": f"checkout filler note number {chr(97 + i)}" for i in range(10)}
    docs = {"target": "ERR-4012 rejects the cart", **fillers}
    overrides = {query: angle(0), "ERR-4012 rejects the cart": angle(90)}
    overrides |= {text: angle(10 + i) for i, text in enumerate(fillers.values())}  # cos 0.98 … 0.77
    with engine_with(tmp_path, docs, overrides) as engine:
        result = engine.explain(query, doc="target", k=3, fusion="rrf")
        hits = engine.search(query, k=3, fusion="rrf").hits
    assert (result.lexical.rank, result.dense.rank, result.fusion.rank) == (1, 11, 1)
    assert result.fusion.score == pytest.approx(1 / 61 + 1 / 71)
    assert result.fusion.score_normalised == pytest.approx((1 / 61 + 1 / 71) / (2 / 61), abs=1e-6)
    assert result.dense.score == pytest.approx(0.0, abs=1e-6)
    assert result.diagnosis.code == "fusion-worked" and result.diagnosis.stage == "fusion"
    assert "lexical 1, dense 11, fused 1" in result.diagnosis.message
    # explain agrees with search
    assert hits[0].metadata["docId"] == "target" and hits[0].ranks.fused == 1 and hits[0].ranks.dense == 11
    (term,) = result.lexical.terms
    assert term.raw == "ERR-4012" and term.exact == "err-4012" and term.matched_exact and term.reason is None


# -- case 2: dense 1, lexical absent → tokenisation / the indexed field ---------------------


def test_lexical_miss_names_the_split_identifier(tmp_path: Path) -> None:
    query = "ERR-4012 cart"
    docs = {"target": "ERR 4012 rejects the basket", "other": "inventory is stale for a cart"}
    overrides = {query: angle(0), docs["target"]: angle(5), docs["other"]: angle(60)}
    with engine_with(tmp_path, docs, overrides) as engine:
        result = engine.explain(query, doc="target", k=2, fusion="rrf")
    assert (result.lexical.rank, result.dense.rank) == (None, 1)
    assert result.lexical.candidates == 1  # only "other" matches ("cart")
    # other: lexical 1 + dense 2 = 1/61 + 1/62; target: dense 1 only = 1/61
    assert result.fusion.returned is True and result.fusion.rank == 2
    assert result.fusion.score == pytest.approx(1 / 61)
    assert result.diagnosis.code == "lexical-miss" and result.diagnosis.stage == "lexical"
    err, cart = result.lexical.terms
    assert err.reason == "identifier 'err-4012' is split apart in the chunk: it holds 'err', '4012' but never 'err-4012' whole"
    assert cart.reason == "'cart' does not occur in the chunk (heading path and content)"
    assert "split apart" in result.diagnosis.message


def test_lexical_miss_past_the_over_fetch_says_so(tmp_path: Path) -> None:
    """On a real repository: "the lexical arm did not find it (lexical 147, dense 26, fused 36)"
    beside "lexical rank 147 of 168 matching (over-fetch 50)": it found it, past its top 50,
    which is all fusion sees of it. The diagnosis says so."""
    query = "refund"
    docs = {"a": "refund refund refund", "b": "refund refund pad", "target": "refund pad pad pad"}
    # lexical: a, b, target (fewer "refund" each); dense: target 1st
    overrides = {query: angle(0), docs["target"]: angle(1), docs["a"]: angle(30), docs["b"]: angle(40)}
    with engine_with(tmp_path, docs, overrides) as engine:
        result = engine.explain(query, doc="target", k=1, overfetch=2)
    assert (result.lexical.rank, result.dense.rank) == (3, 1)
    assert result.diagnosis.code == "lexical-miss"
    # fusion sees a and b lexically (a 1, b 0 after min-max) and target, a densely (1, 0):
    # a (1 − w)·1 over target w·1 at the default base w = 0.4
    assert result.diagnosis.message == (
        "the lexical arm did not find it in its top 2 (lexical 3, dense 1, fused 2; not returned): "
        "it lost places in fusion — check the tokenisation and the indexed field"
    )


def test_term_reasons_stem_and_whole_identifier(tmp_path: Path) -> None:
    docs = {"target": "The runner uses resolve_tenant_db and SKU-88213-B daily."}
    with engine_with(tmp_path, docs, {}) as engine:
        result = engine.explain("running 88213 the", doc="target", k=1)
    running, number, the = result.chunks[0].terms
    assert running.matched_stems == [] and running.reason is not None
    assert running.reason.startswith("a stem changed it: the query's 'running' stems to run")
    assert "'runner' to 'runner'" in running.reason
    assert number.reason == "the chunk has '88213' only inside the identifier 'sku-88213-b', which is indexed whole"
    assert the.stopword and the.reason == "the chunk has it, but 'the' is a stopword: not searched (BM25 would not count it)"


# -- case 3: good in both arms, pushed out by rerank ------------------------------------------


def _reverse(messages: list[dict]) -> str:
    labels = [int(n) for n in re.findall(r"^\[(\d+)\] ", messages[-1]["content"], re.MULTILINE)]
    return json.dumps(labels[::-1])


def test_rerank_demoted(tmp_path: Path) -> None:
    with WireServer(chat=_reverse) as srv:
        fake = FakeEmbedder(dimension=64)
        with Plait(str(tmp_path / "p.db"), embedder=fake, llm=OllamaLLM(base_url=srv.url)) as engine:
            engine.index_documents(documents(ARTICLE_DOCS))
            plain = engine.explain("ERR-4012 checkout session token", doc="kb-101", k=2)
            result = engine.explain("ERR-4012 checkout session token", doc="kb-101", k=2, rerank="llm", k_overfetch=5)
    assert plain.fusion.rank == 1 and plain.fusion.returned and plain.diagnosis.code in ("found", "fusion-worked")
    assert result.rerank is not None and result.rerank.reranked
    assert (result.rerank.rank_before, result.rerank.rank_after) == (1, 5)  # the LLM reversed 5 candidates
    assert result.fusion.returned is False
    assert result.diagnosis.code == "rerank-demoted" and result.diagnosis.stage == "rerank"
    # the rerank line names the chunk it is about, and the chunk says why it was cut
    (journey,) = result.chunks
    assert result.rerank.chunk_id == journey.chunk_id and journey.dropped_by == "rerank"


# -- case 4: absent from both arms → ingestion ----------------------------------------------


def test_never_indexed(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.explain("ERR-4012", doc="kb-999")
    assert result.ingestion.indexed is False and result.ingestion.skipped is False
    assert result.chunks == [] and result.lexical.rank is None and result.dense.rank is None
    assert result.diagnosis.code == "not-indexed" and result.diagnosis.stage == "ingestion"
    assert "the index holds no document 'kb-999'" in result.diagnosis.message


def test_a_deleted_file_is_not_said_never_to_have_been_indexed(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "keep.md").write_text("# Keep\n\nERR-4012 stays.\n", encoding="utf-8")
    (root / "gone.md").write_text("# Gone\n\nERR-4012 goes.\n", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index(root)
        assert engine.explain("ERR-4012", path="gone.md").ingestion.indexed is True
        (root / "gone.md").unlink()
        assert engine.reindex().deleted_sources == ["gone.md"]
        result = engine.explain("ERR-4012", path="gone.md")
    assert result.diagnosis.code == "not-indexed" and result.ingestion.skipped is False
    # it was indexed until the reindex: "it was never indexed" was false
    assert result.ingestion.message == (
        f"no recorded root yields path 'gone.md' and the index holds no chunk of it (recorded roots: folder:{root})"
    )


def test_an_unknown_id_is_said_to_be_missing_from_the_index(tmp_path: Path) -> None:
    """A chunk or document id read 'no recorded root yields chunk 'zzz' and the index holds
    no chunk of it': roots yield paths, not ids."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "keep.md").write_text("# Keep\n\nERR-4012 stays.\n", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index(root)
        by_chunk = engine.explain("ERR-4012", chunk="zzz")
        by_doc = engine.explain("ERR-4012", doc="nope")
    assert by_chunk.diagnosis.code == by_doc.diagnosis.code == "not-indexed"
    assert by_chunk.ingestion.message == f"the index holds no chunk 'zzz' (recorded roots: folder:{root})"
    assert by_doc.ingestion.message == f"the index holds no document 'nope' (recorded roots: folder:{root})"


def test_skipped_at_ingestion_with_the_reason(tmp_path: Path, engine: Plait) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ok.md").write_text("# OK\n\nERR-4012 is documented here.\n", encoding="utf-8")
    (folder / "blob.md").write_bytes(b"ERR-4012\x00\x01binary")
    (folder / "notes.pdf").write_bytes(b"%PDF ERR-4012")
    report = engine.index(folder)
    assert [s.path for s in report.skipped] == ["blob.md"]
    blob = engine.explain("ERR-4012", path="blob.md")
    assert blob.ingestion.skipped is True
    assert blob.diagnosis.code == "skipped" and blob.diagnosis.stage == "ingestion"
    assert "blob.md was skipped when indexing folder:" in blob.diagnosis.message
    assert blob.diagnosis.message.endswith("binary file (NUL byte in the first 8 KiB)")
    pdf = engine.explain("ERR-4012", path=str(folder / "notes.pdf"))  # an absolute path works too
    assert pdf.target == {"kind": "path", "value": "notes.pdf"}
    assert pdf.diagnosis.code == "skipped"
    assert "its name matches none of the root's globs (*.md *.markdown *.txt *.rst)" in pdf.diagnosis.message
    ok = engine.explain("ERR-4012", path="ok.md")
    assert ok.ingestion.indexed and ok.fusion.returned and ok.lexical.rank == 1


def test_absent_from_both_arms_indexed_without_vectors(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        result = engine.explain("bank rejected purchase", doc="kb-102")
    assert result.ingestion.indexed and result.ingestion.chunks_with_vector == 0
    assert result.dense.ran is False and result.lexical.rank is None
    assert result.diagnosis.code == "absent-both" and result.diagnosis.stage == "ingestion"


# -- beyond the over-fetch: exact ranks past the depth ------------------------------------------


def test_beyond_overfetch_reports_exact_ranks(tmp_path: Path) -> None:
    # Same length (6 tokens), "refund" repeated 6-i times: BM25 order = doc order.
    docs = {f"d{i}": " ".join(["refund"] * (6 - i) + ["pad"] * i) for i in range(6)}
    overrides = {"refund": angle(0)}
    # cosine order (smallest angle first): d5, d4, d3, d0, d1, d2
    for i, deg in zip(range(6), (40, 50, 60, 30, 20, 10), strict=True):
        overrides[docs[f"d{i}"]] = angle(deg)
    with engine_with(tmp_path, docs, overrides) as engine:
        result = engine.explain("refund", doc="d1", k=1, overfetch=3)
        deep = engine.explain("refund", doc="d2", k=1, overfetch=2)
    assert (result.lexical.rank, result.dense.rank) == (2, 5)
    assert result.lexical.within_overfetch and not result.dense.within_overfetch
    assert result.fusion.rank is not None and result.fusion.returned is False
    assert result.diagnosis.code == "dense-miss" and result.diagnosis.stage == "dense"
    assert (deep.lexical.rank, deep.dense.rank) == (3, 6)  # exact, though over-fetch is 2
    assert deep.lexical.candidates == 6 and deep.dense.candidates == 6
    assert deep.fusion.rank is None and deep.fusion.dropped_by == "overfetch"
    assert deep.diagnosis.code == "beyond-overfetch" and deep.diagnosis.stage == "fusion"


def test_filters_and_bad_targets(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.explain("ERR-4012", doc="kb-101", scopes=["adr"])
    assert result.diagnosis.code == "filtered" and result.fusion.dropped_by == "filters"
    with pytest.raises(ValidationError, match="exactly one"):
        engine.explain("ERR-4012", doc="kb-101", chunk="x")
    with pytest.raises(ValidationError, match="exactly one"):
        engine.explain("ERR-4012")
    chunk_id = engine.search("ERR-4012", k=1).hits[0].chunk_id
    by_chunk = engine.explain("ERR-4012", chunk=chunk_id)
    assert by_chunk.target == {"kind": "chunk", "value": chunk_id} and by_chunk.fusion.rank == 1


def test_cli_explain_json_is_the_api_model(tmp_path: Path) -> None:
    store = str(tmp_path / "plait.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        expected = to_json(engine.explain("ERR-4012", doc="kb-101", k=3))
    runner = CliRunner()
    out = runner.invoke(app, ["explain", "ERR-4012", "--doc", "kb-101", "-k", "3", "--store", store, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == expected
    text = runner.invoke(app, ["explain", "ERR-4012", "--doc", "kb-101", "--store", store])
    assert text.exit_code == 0 and "diagnosis" in text.stdout and "ERR-4012" in text.stdout
    bad = runner.invoke(app, ["explain", "ERR-4012", "--store", store])
    assert bad.exit_code == 1 and "exactly one" in bad.output


def test_http_explain_route(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from plait.api.http import create_app
    from plait.testing.asgi_server import UvicornThread

    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=64)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        expected = to_json(engine.explain("ERR-4012", doc="kb-101", k=3, lexical_weight="auto", fusion="rrf"))
        with UvicornThread(create_app(engine, auth=False)) as server:
            url = f"{server.url}/v1/collections/default/explain"
            ok = httpx.post(url, json={"query": "ERR-4012", "doc": "kb-101", "k": 3, "lexicalWeight": "auto", "fusion": "rrf"})
            bad = httpx.post(url, json={"query": "ERR-4012"})
    assert ok.status_code == 200 and ok.json() == expected
    assert ok.json()["fusion"]["settings"]["lexicalWeight"] == 0.7
    assert bad.status_code == 422 and "exactly one" in bad.json()["error"]


# -- a document of several chunks: each stage's line names its chunk when they differ ---------


def test_cli_text_names_each_stages_chunk_when_a_documents_stages_found_different_ones(tmp_path: Path) -> None:
    from plait.cli.explain import _print_explain
    from plait.cli.options import console
    from plait.sources.base import SourceDocument, SourcePart
    from plait.types import FileOrigin

    query = "ERR-4012 cart"
    lexical_part, dense_part = "ERR-4012 rejects the cart", "billing notes about refunds"
    origin = FileOrigin(source_path="kb.md", title="KB")
    doc = SourceDocument(
        source_id="kb.md", scope="docs", metadata={"docId": "kb"},
        parts=(SourcePart(text=lexical_part, origin=origin, key="a"), SourcePart(text=dense_part, origin=origin, key="b")),
    )
    fillers = {f"f-{i}": f"inventory filler note {chr(97 + i)}" for i in range(4)}
    overrides = {query: angle(0), lexical_part: angle(80), dense_part: angle(1)}
    overrides |= {text: angle(20 + i) for i, text in enumerate(fillers.values())}
    with engine_with(tmp_path, fillers, overrides) as engine:
        engine.index_documents([doc])
        result = engine.explain(query, doc="kb", k=3)
    assert result.lexical.chunk_id != result.dense.chunk_id  # the lexical hit is part a, the dense 1 part b
    assert (result.lexical.rank, result.dense.rank) == (1, 1)
    with console.capture() as captured:
        _print_explain(result)
    lines = {line.split()[0]: line for line in captured.get().splitlines() if line and not line[0].isspace()}
    assert f"cosine {result.dense.score:.4f} · chunk {result.dense.chunk_id}" in lines["dense"]
    assert f"chunk {result.fusion.chunk_id}" in captured.get().replace("\n", " ")
    # one chunk for every stage (the tests above): no chunk named on those lines
    same = result.model_copy(update={
        "dense": result.dense.model_copy(update={"chunk_id": result.lexical.chunk_id}),
        "fusion": result.fusion.model_copy(update={"chunk_id": result.lexical.chunk_id}),
    })
    with console.capture() as captured:
        _print_explain(same)
    assert "· chunk" not in captured.get()


def test_each_chunk_says_its_source_size_and_why_it_was_cut(tmp_path: Path) -> None:
    """Per chunk, what the page's chunk table shows: "chunk 2 of 3" and the stage that kept it
    off the page (the document's ``droppedBy`` rule for that chunk alone); and the chunk the
    lexical terms are held against when no chunk matched a word."""
    from plait.sources.base import SourceDocument, SourcePart
    from plait.types import FileOrigin

    query = "ERR-4012 cart"
    texts = {"a": "ERR-4012 rejects the cart", "b": "billing notes about refunds", "c": "unrelated words only"}
    origin = FileOrigin(source_path="kb.md", title="KB")
    doc = SourceDocument(
        source_id="kb.md", scope="docs", metadata={"docId": "kb"},
        parts=tuple(SourcePart(text=text, origin=origin, key=key) for key, text in texts.items()),
    )
    fillers = {f"f-{i}": f"inventory filler note {chr(97 + i)}" for i in range(4)}
    # dense: b (1°), the fillers (20°–23°), a (80°), c (85°); lexical: a alone
    overrides = {query: angle(0), texts["a"]: angle(80), texts["b"]: angle(1), texts["c"]: angle(85)}
    overrides |= {text: angle(20 + i) for i, text in enumerate(fillers.values())}
    overrides["quantum flux"] = angle(0)
    with engine_with(tmp_path, fillers, overrides) as engine:
        engine.index_documents([doc])
        # each arm read 6 deep: c (dense 7) is never fused. RRF: a 1/61 + 1/66, b 1/61,
        # f-0 1/62 …; one chunk per source: a and f-0 on the page of 2, b left out
        result = engine.explain(query, doc="kb", k=2, fusion="rrf", overfetch=6, max_per_source=1)
        unmatched = engine.explain("quantum flux", doc="kb", k=2, fusion="rrf")
    a, b, c = result.chunks
    assert [j.ordinal for j in result.chunks] == [0, 1, 2]
    assert [j.source_chunks for j in result.chunks] == [3, 3, 3]
    assert (a.lexical_rank, a.dense_rank, a.fused_rank) == (1, 6, 1)
    assert (b.lexical_rank, b.dense_rank, b.fused_rank) == (None, 1, 2)
    assert (c.lexical_rank, c.dense_rank, c.fused_rank) == (None, 7, None)
    assert (a.returned, a.dropped_by) == (True, None)
    assert (b.cut_by_max_per_source, b.dropped_by) == (True, "max-per-source")
    assert c.dropped_by == "overfetch"
    assert result.fusion.returned and result.fusion.dropped_by is None
    assert result.lexical.terms_chunk_id == result.lexical.chunk_id == a.chunk_id
    # no chunk holds a query word: the terms are held against the fused-best chunk, b
    assert unmatched.lexical.chunk_id is None
    assert unmatched.lexical.terms_chunk_id == unmatched.fusion.chunk_id == unmatched.chunks[1].chunk_id


# -- the advice names knobs the search's fusion takes, and the ask-gate line its chunk ---------


def test_top_k_advice_is_a_knob_the_collections_fusion_takes(tmp_path: Path) -> None:
    """The diagnosis said "tilt lexical_weight towards the arm that ranks it better" under the
    default adaptive fusion, which refuses lexicalWeight: following it failed."""
    query = "refund"
    docs = {"x": "refund refund refund pad", "target": "refund pad pad pad", "y": "unrelated words only"}
    # dense: y 1st, x 2nd, target 3rd; lexical: x 1st (three "refund"), target 2nd, y absent
    overrides = {query: angle(0), docs["y"]: angle(1), docs["x"]: angle(5), docs["target"]: angle(10)}
    with engine_with(tmp_path, docs, overrides) as engine:
        result = engine.explain(query, doc="target", k=2)
        # the advice, followed, is accepted (the old one is refused), as is RRF, which it named
        # before the CLI had --dense-weight
        followed = engine.search(query, k=2, fusion="rrf", lexical_weight=0.7)
        engine.search_request("default", {"query": query, "k": 2, "fusion": {"method": "adaptive", "denseWeight": 0.2}})
        with pytest.raises(ValidationError, match="lexicalWeight does not apply to fusion 'adaptive'"):
            engine.search(query, k=2, lexical_weight=0.7)
    # adaptive, min-max per arm: the target is the minimum of both arms, 0 + 0: fused 3rd
    assert (result.lexical.rank, result.dense.rank, result.fusion.rank) == (2, 3, 3)
    assert result.fusion.settings.method == "adaptive" and result.fusion.settings.estimated_base is None
    assert result.diagnosis.code == "top-k"
    assert result.diagnosis.message == (
        "both arms found it (lexical 2, dense 3, fused 3) but fusion ranked it past the cut at 2: raise k to 3, "
        "or lean fusion towards the lexical arm, which ranks it better: "
        'fusion {"method": "adaptive", "denseWeight": 0.2} (the base, now 0.4; CLI: --fusion adaptive --dense-weight 0.2)'
    )
    # RRF at lexical weight 0.7: x 0.7/61 + 0.3/62 = 0.01631, target 0.7/62 + 0.3/63 = 0.01605,
    # y (dense 1 only) 0.3/61 = 0.00492
    assert [h.metadata["docId"] for h in followed.hits] == ["x", "target"]


def test_top_k_past_the_cut_in_both_arms_names_the_k_and_no_lean(tmp_path: Path) -> None:
    """Each arm ranked the document past the cut (on a real repository: lexical 34, dense 14,
    fused 13, cut 8) and the diagnosis still said "lean fusion towards the dense arm, which
    ranks it better": followed, the document stayed out (fused 15) and the advice moved on to
    denseWeight 1. Leaning all the way to one arm gives that arm's own rank, past the cut as
    well; what brings it in is a k reaching its fused rank, which the advice now names."""
    query = "refund"
    docs = {"x": "refund refund refund pad", "target": "refund pad pad pad", "y": "unrelated words only"}
    # dense: y 1st, x 2nd, target 3rd; lexical: x 1st (three "refund"), target 2nd, y absent
    overrides = {query: angle(0), docs["y"]: angle(1), docs["x"]: angle(5), docs["target"]: angle(10)}
    with engine_with(tmp_path, docs, overrides) as engine:
        result = engine.explain(query, doc="target", k=1)
        followed = engine.explain(query, doc="target", k=3)
        paged = engine.explain(query, doc="target", k=1, offset=1)
    assert (result.lexical.rank, result.dense.rank, result.fusion.rank) == (2, 3, 3)
    assert result.diagnosis.code == "top-k"
    assert result.diagnosis.message == (
        "both arms found it (lexical 2, dense 3, fused 3) but ranked it past the cut at 1, and so did "
        "fusion: raise k to 3"
    )
    # followed: returned at its fused rank
    assert (followed.fusion.rank, followed.fusion.returned, followed.diagnosis.code) == (3, True, "found")
    # offset 1: the cut is at 2, where the lexical arm has it (the lean is offered), and the k
    # that reaches fused 3 counts from the offset
    assert paged.diagnosis.message.startswith(
        "both arms found it (lexical 2, dense 3, fused 3) but fusion ranked it past the cut at 2: raise k to 2, "
        "or lean fusion towards the lexical arm"
    )


def test_advice_per_fusion_method() -> None:
    from plait.explain_models import tilt_advice
    from plait.types import FusionSettings

    assert tilt_advice(FusionSettings(method="rrf", lexical_weight=0.9), "dense") == (
        "lexicalWeight 0.7 (now 0.9; CLI: --lexical-weight 0.7)"
    )
    assert tilt_advice(FusionSettings(method="rrf", lexical_weight=1.0), "lexical") is None  # nothing further
    rrf = "fusion rrf with lexicalWeight 0.7 (CLI: --fusion rrf --lexical-weight 0.7)"
    # weighted's weights have no CLI flag: RRF is the CLI's way
    assert tilt_advice(FusionSettings(method="weighted"), "lexical") == (
        f'fusion {{"method": "weighted", "vectorWeight": 0.4, "lexicalWeight": 0.6}} (now 0.6 / 0.4), or {rrf}'
    )
    # minmax, dbsf and adaptive: their own denseWeight, and its flag (--fusion rrf before: another method)
    assert tilt_advice(FusionSettings(method="dbsf", dense_weight=0.5), "lexical") == (
        'fusion {"method": "dbsf", "denseWeight": 0.3} (now 0.5; CLI: --fusion dbsf --dense-weight 0.3)'
    )
    assert tilt_advice(FusionSettings(method="minmax", dense_weight=0.5), "dense") == (
        'fusion {"method": "minmax", "denseWeight": 0.7} (now 0.5; CLI: --fusion minmax --dense-weight 0.7)'
    )
    # adaptive: the collection's estimate is the base a request's denseWeight replaces
    assert tilt_advice(FusionSettings(method="adaptive", estimated_base=0.9), "lexical") == (
        'fusion {"method": "adaptive", "denseWeight": 0.7} (the base, now 0.9; CLI: --fusion adaptive --dense-weight 0.7)'
    )
    assert tilt_advice(FusionSettings(method="minmax", dense_weight=0.0), "lexical") == rrf  # at its end


def test_fusion_demoted_advice_under_rrf_names_the_lexical_weight(tmp_path: Path) -> None:
    # the case of tests/test_pipeline_trace.py: lexical 12, dense 2, fused 11 of 11, RRF 0.9
    docs = {f"d{i:02d}": " ".join(["refund"] * (13 - i) + ["pad"] * i) for i in range(1, 12)}
    docs["target"] = " ".join(["refund"] + ["pad"] * 12)
    docs["x"] = "unrelated words only"
    overrides = {"refund": angle(0), docs["x"]: angle(0.5), docs["target"]: angle(1)}
    overrides |= {docs[f"d{i:02d}"]: angle(2 + i) for i in range(1, 12)}
    with engine_with(tmp_path, docs, overrides) as engine:
        result = engine.explain("refund", doc="target", k=11, fusion="rrf", lexical_weight=0.9)
    assert result.diagnosis.code == "fusion-demoted"
    assert result.diagnosis.message.endswith(
        "— if it should rank higher, lean fusion towards the dense arm: lexicalWeight 0.7 (now 0.9; "
        "CLI: --lexical-weight 0.7)"
    )


def test_ask_gate_line_names_the_chunk_its_verdict_is_about(tmp_path: Path) -> None:
    """The ask-gate line reported the document's first chunk ("not a lexical hit") under a
    lexical line that ranked another of its chunks: it now reports the explained chunk and
    names it."""
    from plait.cli.explain import _print_explain
    from plait.cli.options import console
    from plait.sources.base import SourceDocument, SourcePart
    from plait.types import FileOrigin

    query = "cart refused weekend promotion banner"  # the body holds 2 of its 5 words
    intro, body = "billing notes about refunds", "the cart was refused"
    origin = FileOrigin(source_path="kb.md", title="KB")
    doc = SourceDocument(
        source_id="kb.md", scope="docs", metadata={"docId": "kb"},
        parts=(SourcePart(text=intro, origin=origin, key="a"), SourcePart(text=body, origin=origin, key="b")),
    )
    overrides = {query: angle(0), intro: angle(60), body: angle(70)}  # cosines 0.5 and 0.342
    with engine_with(tmp_path, {"f": "inventory filler note"}, overrides | {"inventory filler note": angle(85)}) as engine:
        engine.index_documents([doc])
        result = engine.explain(query, doc="kb", k=3)
    first, second = result.chunks  # by ordinal: the intro (no query term), then the body
    assert (first.lexical_rank, second.lexical_rank) == (None, 1)
    assert result.fusion.chunk_id == result.lexical.chunk_id == second.chunk_id
    gate = result.ask_gate
    assert gate is not None and not any(check.passed for check in gate.checks)
    assert gate.checks[0].chunk_id == first.chunk_id and "not a lexical hit" in gate.checks[0].reason
    assert gate.verdict is not None and gate.verdict.chunk_id == second.chunk_id
    assert "not a lexical hit" not in gate.verdict.reason
    with console.capture() as captured:
        _print_explain(result)
    line = " ".join(captured.get().split("ask gate", 1)[1].split("diagnosis", 1)[0].split())
    assert f"· chunk {second.chunk_id}: {gate.verdict.reason}" in line
