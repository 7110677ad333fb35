"""Normalised and adaptive fusion (minmax, dbsf, adaptive) and the label-free calibration."""

from __future__ import annotations

import builtins
import io
import json
import os
import pathlib
from pathlib import Path
from typing import Any

import pytest

from plait.calibration import pseudo_query, weight_from_mrr
from plait.embeddings import FakeEmbedder, embedder_languages
from plait.errors import ConfigError
from plait.fusion import FUSERS, for_query, linear, max_fused_score, resolve_fusion
from plait.fusion_adaptive import (
    adaptive_weight,
    confidence,
    dbsf_normalise,
    language_coverage,
    minmax_normalise,
)
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.types import FusionMethod, FusionSettings, to_json

LEX = [("a", 4.0), ("b", 3.0), ("c", 2.0)]
DENSE = [("c", 0.9), ("a", 0.7), ("d", 0.5)]


def test_minmax_hand_computed() -> None:
    # lexical: a 1, b 0.5, c 0 · dense: c 1, a 0.5, d 0
    assert minmax_normalise(LEX) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert minmax_normalise(DENSE) == pytest.approx({"c": 1.0, "a": 0.5, "d": 0.0})
    fused = linear(LEX, DENSE, dense_weight=0.5)
    assert [(f.chunk_id, round(f.score, 6)) for f in fused] == [("a", 0.75), ("c", 0.5), ("b", 0.25), ("d", 0.0)]
    # dense weight 0.25: a = .75·1 + .25·.5, b = .75·.5, c = .25·1
    fused = linear(LEX, DENSE, dense_weight=0.25)
    assert [(f.chunk_id, round(f.score, 6)) for f in fused] == [("a", 0.875), ("b", 0.375), ("c", 0.25), ("d", 0.0)]
    assert (fused[3].lexical_rank, fused[3].dense_rank, fused[3].lexical_score) == (None, 3, None)
    assert minmax_normalise([("x", 2.0), ("y", 2.0)]) == {"x": 1.0, "y": 1.0}
    assert minmax_normalise([]) == {}


def test_dbsf_hand_computed() -> None:
    # lexical 3, 1: mean 2, σ 1 → (s − (2 − 3)) / 6
    assert dbsf_normalise([("a", 3.0), ("b", 1.0)]) == pytest.approx({"a": 4 / 6, "b": 2 / 6})
    # dense .8 .4 0: mean .4, σ = sqrt(.32/3) = .326599; low = .4 − .979796
    norm = dbsf_normalise([("c", 0.8), ("a", 0.4), ("d", 0.0)])
    assert norm == pytest.approx({"c": 0.704124, "a": 0.5, "d": 0.295876}, abs=1e-6)
    fused = linear([("a", 3.0), ("b", 1.0)], [("c", 0.8), ("a", 0.4), ("d", 0.0)], dense_weight=0.5, norm="dbsf")
    assert [(f.chunk_id, round(f.score, 4)) for f in fused] == [
        ("a", 0.5833), ("c", 0.3521), ("b", 0.1667), ("d", 0.1479)
    ]
    # an outlier is clipped to 1
    clipped = dbsf_normalise([("x", 100.0)] + [(f"y{i}", 1.0) for i in range(20)])
    assert clipped["x"] == 1.0


def test_confidence_and_empty_arms() -> None:
    assert confidence([("a", 10.0), ("b", 6.0), ("c", 5.0), ("d", 2.0)]) == 0.5  # 4 / 8
    assert confidence([("a", 1.0)]) == 0.0
    assert confidence([("a", 1.0), ("b", 1.0)]) == 0.0
    assert adaptive_weight(LEX, []).dense_weight == 0.0


def test_adaptive_weight_hand_computed() -> None:
    # arms agree (a is both top hits); conf lexical (10−6)/(10−2) = .5, dense (.9−.85)/(.9−.7) = .25
    d = adaptive_weight([("a", 10.0), ("b", 6.0), ("c", 2.0)], [("a", 0.9), ("b", 0.85), ("c", 0.7)])
    assert (d.agree, d.lexical_confidence, d.dense_confidence, d.dense_weight) == (True, 0.5, 0.25, 0.275)
    assert "lexical 0.500, dense 0.250 → dense weight 0.275" in d.reason
    # no top hit in the other's top 5 and the embedder does not declare the query's
    # language: lexical-leaning 0.3 (or the base if lower)
    far = [("z", 0.9), ("y", 0.85)]
    assert adaptive_weight([("a", 10.0), ("b", 6.0)], far, covers_query=False).dense_weight == 0.3
    assert adaptive_weight([("a", 10.0), ("b", 6.0)], far, base=0.2, covers_query=False).dense_weight == 0.2
    assert "arms disagree" in adaptive_weight([("a", 10.0)], far).reason
    # undetermined language: the confidence rule, 0.4 + 0.5 · ((.9−.85)/(.9−.85) − (10−6)/(10−6)) = 0.4
    assert adaptive_weight([("a", 10.0), ("b", 6.0)], far).dense_weight == 0.4
    # agreement at rank 5 counts, rank 6 does not
    lex = [(c, 10.0 - i) for i, c in enumerate("abcdef")]
    assert adaptive_weight(lex, [("e", 0.9), ("z", 0.5)]).agree is True
    assert adaptive_weight(lex, [("f", 0.9), ("z", 0.5)]).agree is False
    # clamped to 0.9: flat lexical list (conf 0), decisive dense (conf 1)
    assert adaptive_weight([("a", 1.0), ("b", 1.0)], [("a", 0.9), ("b", 0.1)], base=0.6).dense_weight == 0.9
    assert adaptive_weight([], DENSE).dense_weight == 1.0


def test_max_fused_score_for_linear_modes() -> None:
    s = FusionSettings(method=FusionMethod.MINMAX, dense_weight=0.3)
    assert max_fused_score(s) == pytest.approx(1.0)
    assert max_fused_score(s, dense=False) == pytest.approx(0.7)
    used = s.model_copy(update={"dense_weight_used": 0.2})
    assert max_fused_score(used, dense=False) == pytest.approx(0.8)


def test_resolve_fusion_leaves_rrf_alone_and_fixes_linear_weights() -> None:
    rrf = FusionSettings(method=FusionMethod.RRF)
    assert resolve_fusion(rrf, LEX, DENSE) is rrf
    fixed = resolve_fusion(FusionSettings(method=FusionMethod.MINMAX, dense_weight=0.3), LEX, DENSE)
    assert fixed.dense_weight_used == 0.3 and "fixed dense weight 0.3" in (fixed.fusion_reason or "")
    lexical_only = resolve_fusion(FusionSettings(method=FusionMethod.DBSF), LEX, [])
    assert lexical_only.dense_weight_used == 0.0 and "dense arm returned nothing" in (lexical_only.fusion_reason or "")
    adaptive = resolve_fusion(FusionSettings(method=FusionMethod.ADAPTIVE), LEX, DENSE)
    assert adaptive.dense_weight_used == adaptive_weight(LEX, DENSE).dense_weight
    assert adaptive.fusion_reason == adaptive_weight(LEX, DENSE).reason
    # the fuser uses the resolved weight
    fused = FUSERS[FusionMethod.ADAPTIVE](adaptive, LEX, DENSE)
    assert [f.chunk_id for f in fused] == [
        f.chunk_id for f in linear(LEX, DENSE, dense_weight=adaptive.dense_weight_used or 0.0)
    ]


# language prior ----------------------------------------------------------------------
# The arms disagree: neither top hit is in the other's top 5.
FAR_LEX = [("a", 10.0), ("b", 8.0), ("c", 6.0), ("d", 4.0), ("e", 2.0)]
FAR_DENSE = [("z", 0.9), ("y", 0.6), ("x", 0.5), ("w", 0.45), ("v", 0.4)]


def test_language_coverage() -> None:
    en = frozenset({"en"})
    assert language_coverage("en", en) is True
    assert language_coverage("pt", en) is False
    assert language_coverage(None, en) is None  # undetermined query
    assert language_coverage("en", None) is None  # embedder declares nothing


def test_disagreeing_arms_keep_the_confidence_rule_when_the_language_is_covered() -> None:
    # confidences: lexical (10 − 8) / (10 − 2) = 0.25; dense (0.9 − 0.6) / (0.9 − 0.4) = 0.6
    # covered: 0.4 + 0.5 · (0.6 − 0.25) = 0.575
    covered = adaptive_weight(FAR_LEX, FAR_DENSE, covers_query=True, query_language="en")
    assert (covered.dense_weight, covered.agree) == (0.575, False)
    assert (covered.lexical_confidence, covered.dense_confidence) == (0.25, 0.6)
    assert "arms disagree at the top, but the embedder declares the query's language (en)" in covered.reason
    # not covered: min(base 0.4, 0.3)
    foreign = adaptive_weight(FAR_LEX, FAR_DENSE, covers_query=False, query_language="pt")
    assert foreign.dense_weight == 0.3
    assert "the embedder does not declare the query's language (pt)" in foreign.reason
    # undetermined language (issue 21: CoSQA's short queries): not held against the
    # dense arm, the confidence rule as when covered: 0.575
    unknown = adaptive_weight(FAR_LEX, FAR_DENSE)
    assert unknown.dense_weight == 0.575
    assert "the query's language is undetermined (not held against either arm)" in unknown.reason
    # arms that agree are unaffected by the language
    agreeing = [("a", 0.9), ("y", 0.6), ("x", 0.5)]
    assert (
        adaptive_weight(FAR_LEX, agreeing, covers_query=False).dense_weight
        == adaptive_weight(FAR_LEX, agreeing, covers_query=True).dense_weight
    )


def test_for_query_and_resolve_fusion_echo_the_language_and_honour_the_switch() -> None:
    en = frozenset({"en"})
    settings = for_query(FusionSettings(), "which of the drugs lowers blood pressure", en)
    assert (settings.query_language, settings.embedder_covers_query) == ("en", True)
    assert resolve_fusion(settings, FAR_LEX, FAR_DENSE).dense_weight_used == 0.575
    portuguese = for_query(FusionSettings(), "qual dos remédios baixa a pressão", en)
    assert (portuguese.query_language, portuguese.embedder_covers_query) == ("pt", False)
    assert resolve_fusion(portuguese, FAR_LEX, FAR_DENSE).dense_weight_used == 0.3
    codes = for_query(FusionSettings(), "BRCA1 TP53", en)
    assert (codes.query_language, codes.embedder_covers_query) == (None, None)
    assert resolve_fusion(codes, FAR_LEX, FAR_DENSE).dense_weight_used == 0.3
    off = resolve_fusion(settings.model_copy(update={"language_prior": False}), FAR_LEX, FAR_DENSE)
    assert off.dense_weight_used == 0.3
    assert (off.fusion_reason or "").endswith("(language prior off)")


def test_undetermined_natural_queries_are_not_held_against_the_dense_arm() -> None:
    # issue 21: "python read dot file" (a CoSQA query) has no stopword, so its language is undetermined;
    # the arms disagree, but that is no longer a reason to lean lexical: 0.4 + 0.5·(0.6 − 0.25)
    en = frozenset({"en"})
    natural = for_query(FusionSettings(), "python read dot file", en)
    assert (natural.query_language, natural.embedder_covers_query, natural.query_has_identifier) == (None, None, False)
    resolved = resolve_fusion(natural, FAR_LEX, FAR_DENSE)
    assert resolved.dense_weight_used == 0.575
    assert "undetermined (not held against either arm)" in (resolved.fusion_reason or "")
    # an embedder that declares no languages still leans lexical on disagreement
    silent = for_query(FusionSettings(), "which of the drugs lowers blood pressure", None)
    assert resolve_fusion(silent, FAR_LEX, FAR_DENSE).dense_weight_used == 0.3


def test_the_collection_estimate_replaces_the_base_and_says_so() -> None:
    from plait.arm_estimate import base_from_ratio, saved_estimate
    from plait.collection_settings import parse_settings
    from plait.retrieval.plan import saved_fusion

    # ratio 0.5/0.9 = 0.556 < 0.75: the floor 0.45; 0.817/0.95 = 0.86: 0.45 + 4·0.11 = 0.89; capped 0.9
    assert (base_from_ratio(0.9, 0.5), base_from_ratio(0.95, 0.817), base_from_ratio(0.95, 0.95)) == (0.45, 0.89, 0.9)
    raw = {"armEstimate": {"base": 0.89, "reason": "collection estimate: test"}}
    saved = parse_settings(raw)
    assert saved_estimate(saved) == (0.89, "collection estimate: test")
    # a saved denseWeight (plait calibrate) wins over the estimate
    assert saved_estimate(parse_settings({**raw, "fusion": {"denseWeight": 0.3}})) is None
    settings = for_query(saved_fusion(saved), "which of the drugs lowers blood pressure", frozenset({"en"}))
    assert settings.estimated_base == 0.89
    # agreeing arms, base 0.89: 0.89 + 0.5 · (0.25 − 0.5) = 0.765
    lex = [("a", 10.0), ("b", 6.0), ("c", 2.0)]
    dense = [("a", 0.9), ("b", 0.85), ("c", 0.7)]
    resolved = resolve_fusion(settings, lex, dense)
    assert resolved.dense_weight_used == 0.765
    assert (resolved.fusion_reason or "").startswith("collection estimate: test; arms agree at the top")
    assert "base 0.89" in (resolved.fusion_reason or "")


def test_embedders_declare_their_languages(tmp_path: Path) -> None:
    from plait.embeddings import E5Embedder, MiniLMEmbedder
    from plait.embeddings.cache import CachedEmbedder

    assert embedder_languages(MiniLMEmbedder()) == frozenset({"en"})
    e5 = embedder_languages(E5Embedder())
    assert e5 is not None and {"en", "pt", "es", "zh"} <= e5 and len(e5) == 93
    assert embedder_languages(E5Embedder(variant="enpt")) == frozenset({"en", "pt"})
    assert embedder_languages(FakeEmbedder()) is None
    assert embedder_languages(object()) is None  # an embedder written elsewhere, no attribute
    cached = CachedEmbedder(MiniLMEmbedder(), path=tmp_path / "cache.sqlite")
    try:
        assert embedder_languages(cached) == frozenset({"en"})
    finally:
        cached.close()


def test_search_and_explain_echo_the_query_language(tmp_path: Path) -> None:
    from plait.search import lexical_terms

    english = FakeEmbedder()
    english.languages = frozenset({"en"})
    portuguese = {
        "pt-1": "Por que o pagamento foi recusado? Motivos comuns para o cartão ser recusado.",
        "pt-2": "Como trocar a senha da conta quando o token da sessão expirou.",
    }
    with Plait(str(tmp_path / "lang.db"), embedder=english) as engine:
        engine.index_documents(documents({**ARTICLE_DOCS, **portuguese}))
        result = engine.search("why was my card payment declined", k=3)
        data = to_json(result)["fusion"]
        assert (data["queryLanguage"], data["embedderCoversQuery"], data["languagePrior"]) == ("en", True, True)
        query = "por que o pagamento foi recusado"
        foreign = engine.search(query, k=3).fusion
        assert (foreign.query_language, foreign.embedder_covers_query) == ("pt", False)
        # the weight and reason are adaptive_weight's over the store's own arms, told "not covered"
        lex = engine.store.lexical_search("default", *lexical_terms(query), limit=foreign.overfetch)
        dense = engine.store.vector_search("default", english.embed_query(query), limit=foreign.overfetch)
        expected = adaptive_weight(lex, dense, covers_query=False, query_language="pt")
        assert (foreign.dense_weight_used, foreign.fusion_reason) == (expected.dense_weight, expected.reason)
        explained = engine.explain("why was my card payment declined", chunk=result.hits[0].chunk_id, k=3)
        settings = to_json(explained)["fusion"]["settings"]
        assert (settings["queryLanguage"], settings["embedderCoversQuery"]) == ("en", True)
        assert settings["fusionReason"] == result.fusion.fusion_reason
    with Plait(str(tmp_path / "plain.db"), embedder=FakeEmbedder()) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        plain = engine.search("why was my card payment declined", k=3).fusion
        assert (plain.query_language, plain.embedder_covers_query) == ("en", None)


def test_language_prior_can_be_switched_off_per_request_and_on_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from plait.cli import app

    store = str(tmp_path / "prior.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        on = engine.search("why was my card payment declined", k=3).fusion
        off = engine.search("why was my card payment declined", k=3, language_prior=False).fusion
    assert (on.language_prior, off.language_prior) == (True, False)
    assert off.query_language == "en"  # still recorded, just not used
    runner = CliRunner()
    args = ["--store", store, "--embedder", "fake", "--json"]
    out = runner.invoke(app, ["search", "why was my card payment declined", "-k", "3", "--no-language-prior", *args])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["fusion"]["languagePrior"] is False
    out = runner.invoke(app, ["explain", "why was my card payment declined", "--doc", "kb-104", "--no-language-prior",
                              *args])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["fusion"]["settings"]["languagePrior"] is False


def test_search_echoes_weight_and_reason_and_is_deterministic(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    first = engine.search("bank rejected my purchase", k=5, fusion="adaptive")
    second = engine.search("bank rejected my purchase", k=5, fusion="adaptive")
    data = to_json(first)["fusion"]
    assert data["method"] == "adaptive"
    assert data["denseWeightUsed"] is not None and 0.0 <= data["denseWeightUsed"] <= 1.0
    assert data["fusionReason"]
    assert to_json(first)["hits"] == to_json(second)["hits"]
    w = first.fusion.dense_weight_used or 0.0
    for hit in first.hits:  # fused score is the weighted sum of the min-max normalised arms
        assert 0.0 <= hit.score <= 1.0 + 1e-9
        assert hit.score_normalised == pytest.approx(hit.score, abs=1e-6)  # best possible score is 1
    assert w == first.fusion.dense_weight_used
    rrf = engine.search("bank rejected my purchase", k=5, fusion="rrf").fusion
    assert (rrf.dense_weight_used, rrf.fusion_reason) == (None, None)


def test_explain_shows_the_weight_used(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.search("bank rejected my purchase", k=3, fusion="adaptive")
    target = result.hits[0].chunk_id
    explained = engine.explain("bank rejected my purchase", chunk=target, k=3, fusion="adaptive")
    settings = to_json(explained)["fusion"]["settings"]
    assert settings["denseWeightUsed"] == result.fusion.dense_weight_used
    assert settings["fusionReason"] == result.fusion.fusion_reason


# calibration -------------------------------------------------------------------------


def test_weight_from_mrr_hand_computed() -> None:
    assert weight_from_mrr(0.9, 0.9) == 0.5
    assert weight_from_mrr(0.9, 0.45) == 0.25  # 0.5 · 0.5
    assert weight_from_mrr(0.8, 0.1) == 0.1  # clamped
    assert weight_from_mrr(0.5, 0.9) == 0.5  # never above the even split
    assert weight_from_mrr(0.0, 0.3) == 0.5


def test_pseudo_query_is_a_masked_sentence_of_the_chunk() -> None:
    import random

    text = "Tiny. Chunking keeps the heading path of every section it cuts. End."
    full = pseudo_query(text, random.Random(3), keep=1.0)
    assert full == "Chunking keeps the heading path of every section it cuts."
    masked = pseudo_query(text, random.Random(3), keep=0.5) or ""
    assert set(masked.split()) <= set(full.split()) and len(masked.split()) < len(full.split())
    assert pseudo_query("two words", random.Random(0)) is None


def _beir_dir(root: Path) -> Path:
    root.mkdir()
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for doc_id, text in ARTICLE_DOCS.items():
            f.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tx\t1\n", encoding="utf-8")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "payment"}) + "\n", encoding="utf-8")
    return root


def test_calibration_never_reads_qrels_and_is_deterministic(
    tmp_path: Path, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _beir_dir(tmp_path / "beir")
    with Plait(str(tmp_path / "plait.db"), embedder=fake) as engine:
        engine.index(data / "corpus.jsonl", collection="c", scope="docs")
        opened: list[str] = []

        def guard(original: Any) -> Any:
            def wrapper(file: Any, *args: Any, **kwargs: Any) -> Any:
                name = os.fspath(file) if not isinstance(file, int) else ""
                opened.append(name)
                if "qrels" in name or "queries" in name:
                    raise PermissionError(f"calibration opened {name}")
                return original(file, *args, **kwargs)

            return wrapper

        monkeypatch.setattr(builtins, "open", guard(builtins.open))
        monkeypatch.setattr(io, "open", guard(io.open))
        monkeypatch.setattr(os, "open", guard(os.open))
        real_path_open = pathlib.Path.open
        monkeypatch.setattr(pathlib.Path, "open", lambda self, *a, **k: guard(lambda f, *x, **y: real_path_open(self, *x, **y))(self, *a, **k))
        first = engine.calibrate(collection="c", samples=20)
        second = engine.calibrate(collection="c", samples=20)
        monkeypatch.undo()
    assert not any("qrels" in name for name in opened)
    assert first == second
    assert 0 < first.samples <= 20
    assert 0.0 <= first.dense_mrr <= 1.0 and 0.0 <= first.lexical_mrr <= 1.0
    assert first.dense_weight == weight_from_mrr(first.lexical_mrr, first.dense_mrr)
    assert "pseudo-queries" in first.reason


def test_calibration_is_saved_and_used_by_search(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    cal = engine.calibrate(samples=10)
    settings = engine.store.get_settings("default")
    assert settings["fusion"]["denseWeight"] == cal.dense_weight
    assert settings["calibration"]["denseWeight"] == cal.dense_weight
    fusion = engine.search("bank rejected my purchase", k=3, fusion="minmax").fusion
    assert fusion.dense_weight == cal.dense_weight and fusion.dense_weight_used == cal.dense_weight


def test_calibration_needs_vectors(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        with pytest.raises(ConfigError, match="calibration needs"):
            engine.calibrate()


def test_cli_calibrate_json_is_the_api_model(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from plait.cli import app

    store = str(tmp_path / "cli.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        expected = to_json(engine.calibrate(samples=5, save=False))
    runner = CliRunner()
    dry = runner.invoke(app, ["calibrate", "--samples", "5", "--dry-run", "--store", store, "--embedder", "fake", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output) == expected
    with Plait(store, embedder="fake") as engine:
        assert "calibration" not in engine.store.get_settings("default")
    saved = runner.invoke(app, ["calibrate", "--samples", "5", "--store", store, "--embedder", "fake"])
    assert saved.exit_code == 0, saved.output
    assert f"dense weight {expected['denseWeight']:g}" in saved.output
    with Plait(store, embedder="fake") as engine:
        assert engine.store.get_settings("default")["fusion"]["denseWeight"] == expected["denseWeight"]


def test_calibrate_says_when_the_collections_method_takes_no_dense_weight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After tune --save chose rrf, calibrate printed 'saved as default's fusion
    denseWeight' while every search went on fusing with rrf and never read it."""
    from typer.testing import CliRunner

    from plait.cli import app
    from plait.collection_settings import write_settings

    monkeypatch.setenv("COLUMNS", "80")
    store = str(tmp_path / "cli.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        assert engine.calibrate(samples=5, save=False).not_used is None  # adaptive reads it
        write_settings(engine.store, "default", fusion={"method": "rrf", "rrfK": 30})
    runner = CliRunner()
    saved = runner.invoke(app, ["calibrate", "--samples", "5", "--store", store, "--embedder", "fake"])
    assert saved.exit_code == 0, saved.output
    note = (
        "not used: collection 'default' fuses with 'rrf' (its saved method), which takes no denseWeight: "
        "its searches use the weight only when they ask for adaptive, minmax or dbsf"
    )
    assert saved.output.splitlines()[1] == f"  {note}"
    dry = runner.invoke(app, ["calibrate", "--samples", "5", "--dry-run", "--store", store, "--embedder", "fake", "--json"])
    assert json.loads(dry.output)["notUsed"] == note.removeprefix("not used: ")
    with Plait(store, embedder="fake") as engine:
        assert "notUsed" not in engine.store.get_settings("default")["calibration"]
        result = engine.search("fusion", fusion=None)
        assert result.fusion.method == FusionMethod.RRF and result.fusion.dense_weight_used is None


def test_cli_explain_and_search_print_the_weight_and_why(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from plait.cli import app

    store = str(tmp_path / "cli.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        expected = engine.search("why was my payment declined", k=3).fusion
    assert expected.method == FusionMethod.ADAPTIVE and expected.dense_weight_used is not None
    runner = CliRunner()
    args = ["--store", store, "--embedder", "fake"]
    out = runner.invoke(app, ["explain", "why was my payment declined", "--doc", "kb-104", "-k", "3", *args])
    assert out.exit_code == 0, out.output
    assert f"adaptive: dense weight {expected.dense_weight_used:g}" in out.output
    # the fake embedder declares no languages
    assert "query language en, embedder languages unknown" in " ".join(out.output.split())
    found = runner.invoke(app, ["search", "why was my payment declined", "-k", "3", *args])
    assert found.exit_code == 0, found.output
    assert f"fusion adaptive (dense weight used {expected.dense_weight_used}" in found.output
    assert "query language en, embedder languages unknown" in " ".join(found.output.split())
