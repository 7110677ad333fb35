"""benchmarks/fusion_table.py's own arithmetic: the issue-21 verdict, the document
collapse of its doc-level candidate, the run names ``--merge`` matches on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "fusion_table.py"


def _table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plait_bench_fusion_table", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(name: str, bm25: float, vector: float, rrf: float, default: float) -> dict[str, Any]:
    def row(v: float) -> dict[str, Any]:
        return {"slices": {"all": {"ndcg@10": v}}}

    better = "bm25" if bm25 >= vector else "vector"
    return {"run": name, "betterArm": better,
            "modes": {"bm25": row(bm25), "vector": row(vector), "rrf": row(rrf), "default": row(default)}}


def test_verdict_applies_both_conditions_per_run() -> None:
    table = _table()
    runs = [
        _run("a", 0.70, 0.60, 0.69, 0.6951),  # 0.0049 below the arm: within 0.005; above rrf
        _run("b", 0.30, 0.60, 0.50, 0.60),  # equal to the dense arm, above rrf
        _run("c", 0.80, 0.80, 0.83, 0.82),  # above the arm, 0.01 below rrf
    ]
    v = table.verdict(runs, "default")
    assert v["armEverywhere"] is True
    assert v["rrfEverywhere"] is False
    assert v["failing"] == ["c"]
    assert v["meanNdcg"] == round((0.6951 + 0.60 + 0.82) / 3, 4)
    v = table.verdict([_run("d", 0.70, 0.60, 0.60, 0.6949)], "default")  # 0.0051 below the arm
    assert v["armEverywhere"] is False and v["failing"] == ["d"]


def test_collapse_keeps_each_document_at_its_best_chunk() -> None:
    table = _table()
    doc_of = {"c1": "d1", "c2": "d2", "c3": "d1", "c4": "d3"}
    ranked = [("c1", 3.0), ("c3", 2.5), ("c2", 2.0), ("cx", 1.5), ("c4", 1.0)]
    assert table._collapse(ranked, doc_of) == [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)]
    assert table._median([3.0, 1.0, 2.0]) == 2.0
    assert table._median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert table._median([]) == 0.0


def test_run_names_are_canonical() -> None:
    table = _table()
    assert table._canonical("scifact:e5") == "scifact/test:e5"
    assert table._canonical("cosqa-dev:minilm") == "cosqa-dev/dev:minilm"
    assert table._canonical("scifact/train") == "scifact/train:e5"
    assert table._canonical("realrepo/manage-get-gov:minilm") == "realrepo/manage-get-gov:minilm"


def test_rank_mix_weights_ranks_with_the_default_weight() -> None:
    from types import SimpleNamespace

    from plait.evaluation.runner import Arms
    from plait.types import FusionSettings

    table = _table()
    lex = [("a", 3.0), ("b", 2.0), ("d", 0.0)]
    den = [("c", 0.9), ("b", 0.8), ("a", 0.1)]
    arms = Arms(lexical={"q": lex}, dense={"q": den}, dense_reason=None, doc_of={c: c.upper() for c in "abcd"}, limit=100)
    data = SimpleNamespace(arms=arms, saved=FusionSettings.model_validate({"method": "minmax", "denseWeight": 0.5}))
    # ranks, w = 0.5: a 0.5/61 + 0.5/63 = 0.016133 > b 2 · 0.5/62 = 0.016129 > c 0.5/61 > d 0.5/63
    assert table._rank_mix(data, "q", 0.0) == (["A", "B", "C", "D"], 0.5)
    # min–max alone (b 0.771, a 0.5, c 0.5, d 0; ties by id), and half of each:
    # b 0.385 + 0.5 · 0.9997, a 0.25 + 0.5, c 0.25 + 0.5 · 0.508, d 0.5 · 0.492
    assert table._rank_mix(data, "q", 1.0) == (["B", "A", "C", "D"], 0.5)
    assert table._rank_mix(data, "q", 0.5) == (["B", "A", "C", "D"], 0.5)
