"""Does ``ask`` refuse what the corpus cannot answer and cite the right source otherwise?

    PYTHONPATH=src .venv/bin/python benchmarks/ask_answers.py --cache /tmp/ask-cache

Datasets (``--data``, default ``../shared/data``):

* ``realrepo/manage-get-gov`` and ``realrepo/teaching-vacancies``: each repository's docs
  indexed as a folder, as a user would; its 40 answerable questions (qrels; 20 naming an
  identifier, 20 in natural words), its 5 unanswerable ones, and the *other* repository's
  40 answerable questions as out-of-corpus questions;
* ``faquad-pt-dev`` / ``faquad-pt-test``: the FaQuAD corpus indexed once as a ``.jsonl``;
  its dev queries (all of them) / a seeded sample of ``--faquad`` test queries as
  answerable, and as many SciFact test queries (English biomedical claims; only the
  queries are read, SciFact's corpus is never embedded; dev and test samples disjoint) as
  out-of-corpus.

Every question is asked with the collection's gate as the index run calibrated it
(:mod:`plait.ask_gate`; a stored calibration of an older method version is measured
again by the first run), extractive (``llm none``), and again through a fake LLM (the
project's WireServer speaking the Ollama protocol) that answers with the first source's
first sentence cited, one sentence citing an invented source and one uncited sentence —
so the claim check must drop two sentences from every answer. Per dataset and mode a
confusion table: for each kind of question, how many were answered citing a relevant
document (``correct``), answered citing only irrelevant ones (``wrong``), or refused.

The gate's constants (``COVERAGE_QUANTILE``, unknown words counted twice) were chosen on
manage-get-gov and FaQuAD dev only; teaching-vacancies and FaQuAD test are held out.
``sweep`` shows, per dataset, what other choices would give (from the same search results,
judged offline by :func:`plait.ask_gate.verdict`: refused, and whether a relevant document
passes the gate). ``diagnosis`` is the AUC, for each retrieval signal of the top 5 hits,
of the answerable questions (natural-language ones on realrepo) against the unanswerable
and out-of-corpus ones: how well the signal alone would separate them (0.5: not at all);
``bestSentenceCosine`` is the embedder's own cosine with the best sentence of the top hits
(sentences as :func:`plait.ask_extract.candidates` reads them), not with whole chunks.

For every answerable question not answered with a correct citation (extractive), the
cause (``CAUSES``): ``retrieval`` (no relevant document among the hits the gate judged,
with the rank of the first relevant one in the top 20), ``gateRefused`` (one was, and
every hit was refused), ``gatePassedOthers`` (it failed the gate while an irrelevant hit
passed) or ``citation`` (it passed, the answer cited others).

``--sentence-judge minilm`` (an embedder, here the ``plait[minilm]`` extra's int8
all-MiniLM-L6-v2, which ships its weights) measures a sentence-level judge next to the
gate: a hit also passes when its best sentence reaches a cosine (``SENTENCE_THRESHOLDS``),
judged offline like the sweep. No registry package ships a cross-encoder or an NLI model,
so none is measured.

Passage vectors go through the embedding cache (``--cache``), so each corpus is embedded
once. Figures go to ``benchmarks/results/ask_answers.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.append(str(ROOT / "src"))

import numpy as np

from plait.ask import AskResult
from plait.ask_extract import candidates
from plait.ask_gate import (
    COVERAGE_QUANTILE,
    MIN_COVERAGE,
    OUTSIDE_QUANTILE,
    Gate,
    GateCalibration,
    question_identifiers,
    term_coverage,
    threshold,
    unknown_terms,
    verdict,
)
from plait.chunk_build import index_text
from plait.collection_settings import read_settings
from plait.embeddings import make_embedder
from plait.embeddings.base import Embedder
from plait.embeddings.cache import CachedEmbedder
from plait.llm import OllamaLLM
from plait.refinery.extract import content_stems
from plait.service import Plait
from plait.testing.wire import WireServer
from plait.types import FileOrigin, Hit

RESULTS = ROOT / "benchmarks" / "results"
REPOS = ("manage-get-gov", "teaching-vacancies")
DATASETS = (*REPOS, "faquad-pt-dev", "faquad-pt-test")
DEV = ("manage-get-gov", "faquad-pt-dev")
#: (coverage quantile, unknown words counted twice, coverage floor, cosine quantile, unknown
#: share) choices the sweep compares; a cosine quantile None turns the cosine path off; an
#: unknown share u closes the cosine path to a question whose content words the collection
#: never holds make up more than u of them (None: open to every question).
Choice = tuple[float, bool, float, float | None, float | None]
CHOICES: tuple[Choice, ...] = (
    (0.95, False, MIN_COVERAGE, OUTSIDE_QUANTILE, None), (0.8, False, MIN_COVERAGE, OUTSIDE_QUANTILE, None),
    (0.5, False, MIN_COVERAGE, OUTSIDE_QUANTILE, None), (0.95, True, MIN_COVERAGE, OUTSIDE_QUANTILE, None),
    (0.8, True, MIN_COVERAGE, OUTSIDE_QUANTILE, None), (0.5, True, MIN_COVERAGE, OUTSIDE_QUANTILE, None),
    (0.0, True, 0.45, OUTSIDE_QUANTILE, None), (0.0, True, 0.4, OUTSIDE_QUANTILE, None),
    (0.0, True, 0.35, OUTSIDE_QUANTILE, None),
    (0.5, True, MIN_COVERAGE, 1.0, None), (0.5, True, MIN_COVERAGE, None, None),
    (0.5, True, MIN_COVERAGE, 0.9, None), (0.5, True, MIN_COVERAGE, 0.8, None), (0.5, True, MIN_COVERAGE, 0.7, None),
    (0.5, True, MIN_COVERAGE, 0.5, None),
    (0.5, True, MIN_COVERAGE, OUTSIDE_QUANTILE, 0.0), (0.5, True, MIN_COVERAGE, OUTSIDE_QUANTILE, 0.2),
    (0.5, True, MIN_COVERAGE, OUTSIDE_QUANTILE, 0.34), (0.5, True, MIN_COVERAGE, OUTSIDE_QUANTILE, 0.5),
)
KIND_OF: dict[str, str] = {}  # realrepo question → identifier | natural | unanswerable
ID_OF: dict[str, str] = {}  # realrepo question → its id in queries.jsonl
#: The sentence cosines ``--sentence-judge`` is tried at, as a second way through the gate.
SENTENCE_THRESHOLDS = (0.7, 0.65, 0.6, 0.55, 0.5)
#: Why an answerable question was not answered with a correct citation (extractive).
CAUSES = {
    "retrieval": "no relevant document among the hits the gate judged (top k)",
    "gateRefused": "a relevant document among them, every hit refused by the gate",
    "gatePassedOthers": "a relevant document among them failed the gate, an irrelevant one passed",
    "citation": "a relevant document passed the gate, the answer cited others",
}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _qrels(path: Path) -> dict[str, set[str]]:
    qrels: dict[str, set[str]] = {}
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    return qrels


def _fake_llm(messages: list[dict[str, Any]]) -> str:
    """First source's first sentence, cited; an invented citation; an uncited sentence."""
    user = messages[-1]["content"]
    start = user.index('<source id="1"')
    body = user[user.index("\n", start) + 1 : user.index("</source>", start)]
    first = next((line.strip() for line in body.splitlines() if len(line.split()) >= 4), body.strip()[:200])
    return f"{first[:300]} [1]. This also follows from the manual [99]. Nothing else is known."


def _questions(data: Path, name: str, faquad: int) -> list[tuple[str, str, set[str]]]:
    """(question, kind, relevant document ids) for one dataset."""
    if name in REPOS:
        folder = data / "realrepo" / name
        qrels = _qrels(folder / "qrels" / "test.tsv")
        out = [
            (q["text"], "answerable" if q["_id"] in qrels else "unanswerable", qrels.get(q["_id"], set()))
            for q in _jsonl(folder / "queries.jsonl")
        ]
        KIND_OF.update({q["text"]: q["metadata"]["kind"] for q in _jsonl(folder / "queries.jsonl")})
        ID_OF.update({q["text"]: q["_id"] for q in _jsonl(folder / "queries.jsonl")})
        other = data / "realrepo" / next(r for r in REPOS if r != name)
        other_qrels = _qrels(other / "qrels" / "test.tsv")
        out += [(q["text"], "out-of-corpus", set()) for q in _jsonl(other / "queries.jsonl") if q["_id"] in other_qrels]
        return out
    folder = data / "faquad-pt"
    texts = {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")}
    sci_qrels = _qrels(data / "scifact" / "qrels" / "test.tsv")
    sci = {q["_id"]: q["text"] for q in _jsonl(data / "scifact" / "queries.jsonl")}
    rng = random.Random(22)  # the test sample, as before the dev split was added
    test_qrels = _qrels(folder / "qrels" / "test.tsv")
    chosen = rng.sample(sorted(test_qrels), faquad)
    sci_test = rng.sample(sorted(sci_qrels), faquad)
    if name == "faquad-pt-test":
        out = [(texts[qid], "answerable", test_qrels[qid]) for qid in chosen]
        return out + [(sci[qid], "out-of-corpus", set()) for qid in sci_test]
    dev_qrels = _qrels(folder / "qrels" / "dev.tsv")
    out = [(texts[qid], "answerable", dev_qrels[qid]) for qid in sorted(dev_qrels)]
    rest = sorted(set(sci_qrels) - set(sci_test))
    return out + [(sci[qid], "out-of-corpus", set()) for qid in random.Random(23).sample(rest, len(dev_qrels))]


def _index(engine: Plait, data: Path, name: str, work: Path) -> None:
    if engine.store.get_collection("default") is not None:
        engine.reindex()  # unchanged: calibrates the gate if it never was
        return
    if name in REPOS:
        repo = work / f"repo-{name}"
        for doc in _jsonl(data / "realrepo" / name / "corpus.jsonl"):
            path = repo / doc["_id"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(doc["text"], encoding="utf-8")
        engine.index(repo)
    else:
        engine.index(data / "faquad-pt" / "corpus.jsonl")


def _table() -> dict[str, dict[str, int]]:
    return {kind: {"correct": 0, "wrong": 0, "refused": 0} for kind in ("answerable", "unanswerable", "out-of-corpus")}


def _shares(table: Mapping[str, Mapping[str, int]]) -> dict[str, float | None]:
    def share(kind: str, column: str) -> float | None:
        total = sum(table[kind].values())
        return round(table[kind][column] / total, 3) if total else None

    return {
        "answeredWithCorrectCitation": share("answerable", "correct"),
        "unanswerableRefused": share("unanswerable", "refused"),
        "outOfCorpusRefused": share("out-of-corpus", "refused"),
    }


def _auc(positive: list[float], negative: list[float]) -> float | None:
    """P(a positive scores above a negative), ties half."""
    if not positive or not negative:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positive for n in negative)
    return round(wins / (len(positive) * len(negative)), 3)


def _signals(text: str, hits: list[Hit], unknown: list[str]) -> dict[str, float]:
    """The retrieval signals of one question's top hits (the diagnosis)."""
    stems = content_stems(text)
    cosines = sorted((h.vector_score for h in hits if h.vector_score is not None), reverse=True)

    def coverage(twice: bool) -> float:
        return max(
            (term_coverage(index_text(h.content, h.origin.heading_path if isinstance(h.origin, FileOrigin) else []),
                           stems, unknown if twice else ()) for h in hits if h.ranks.lexical is not None),
            default=0.0,
        )

    return {
        "bestCosine": cosines[0] if cosines else 0.0,
        "cosineGapTop1Top2": cosines[0] - cosines[1] if len(cosines) > 1 else 0.0,
        "bestTermCoverage": coverage(False),
        "bestTermCoverageUnknownTwice": coverage(True),
        "shareOfWordsKnown": 1.0 - len(unknown) / max(1, len(stems)),
        "hitsFoundByBothArms": float(sum(1 for h in hits if h.ranks.lexical is not None and h.ranks.dense is not None)),
        "fusedTopScore": hits[0].score if hits else 0.0,
    }


def _miss(engine: Plait, text: str, relevant: set[str], outcome: str, result: AskResult,
          doc_of: Mapping[str, str]) -> dict[str, Any]:
    """Why an answerable question was refused or cited only irrelevant documents (``CAUSES``)."""
    judged = [(doc_of.get(c.chunk_id), c.passed) for c in result.gate_checks]
    if not any(doc in relevant for doc, _ in judged):
        cause = "retrieval"
    elif outcome == "refused":
        cause = "gateRefused"
    elif not any(doc in relevant and passed for doc, passed in judged):
        cause = "gatePassedOthers"
    else:
        cause = "citation"
    deep = engine.search(text, k=20).hits
    ranks = [n for n, h in enumerate(deep, start=1) if doc_of.get(h.chunk_id) in relevant]
    return {"id": ID_OF.get(text), "queryKind": KIND_OF.get(text), "outcome": outcome, "cause": cause,
            "firstRelevantRankTop20": ranks[0] if ranks else None, "question": text}


def _sentence_cosines(embedder: Embedder, text: str, hits: list[Hit]) -> tuple[list[float], int | None]:
    """Each hit's best sentence cosine with the question (sentences as
    :func:`plait.ask_extract.candidates` reads them; 0 for a hit holding none) and the
    number (1-based) of the hit holding the best sentence overall."""
    found = candidates(text, hits)
    best = [0.0] * len(hits)
    if not found:
        return best, None
    query = np.asarray(embedder.embed_query(text), dtype=np.float32)
    matrix = np.asarray(embedder.embed_documents([c.text for c in found]), dtype=np.float32)
    cosines = matrix @ query / np.maximum(np.linalg.norm(matrix, axis=1) * np.linalg.norm(query), 1e-12)
    for candidate, cosine in zip(found, cosines, strict=True):
        best[candidate.n - 1] = max(best[candidate.n - 1], round(float(cosine), 4))
    return best, found[int(np.argmax(cosines))].n


def _sentence_judge(calibration: GateCalibration, rows: list[dict[str, Any]], doc_of: Mapping[str, str]
                    ) -> list[dict[str, Any]]:
    """The gate as calibrated, or a hit whose best ``--sentence-judge`` sentence reaches a
    cosine (``SENTENCE_THRESHOLDS``): what a sentence-level judge added to the gate would do."""
    out = []
    for minimum in (None, *SENTENCE_THRESHOLDS):
        table = _table()
        for r in rows:
            gate = Gate(min_cosine=calibration.min_cosine or 1.0, min_term_coverage=calibration.min_term_coverage,
                        cosine_source="calibrated", coverage_source="calibrated", unknown_terms=r["unknown"])
            named = question_identifiers(r["text"])
            passing = [h for h, judged in zip(r["hits"], r["judgeCosines"], strict=True)
                       if verdict(h, content_stems(r["text"]), gate, identifiers=named).passed
                       or (minimum is not None and judged >= minimum)]
            if not passing:
                table[r["kind"]]["refused"] += 1
            else:
                table[r["kind"]]["correct" if {doc_of.get(h.chunk_id) for h in passing} & r["relevant"] else "wrong"] += 1
        out.append({"minSentenceCosine": minimum, "table": table, **_shares(table)})
    return out


def _diagnosis(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    negative = [r for r in rows if r["kind"] != "answerable"]
    groups = {
        "natural": [r for r in rows if r["kind"] == "answerable" and r["queryKind"] in ("natural", None)],
        "identifier": [r for r in rows if r["queryKind"] == "identifier"],
    }
    return {
        signal: {group: _auc([r["signals"][signal] for r in members], [r["signals"][signal] for r in negative])
                 for group, members in groups.items() if members}
        for signal in rows[0]["signals"]
    }


def _sweep(calibration: GateCalibration, rows: list[dict[str, Any]], doc_of: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for quantile, twice, floor, cosine_quantile, unknown_share in CHOICES:
        coverage = threshold(calibration.inside_coverage, calibration.outside_coverage, floor=floor,
                             quantile=quantile) or 1.0
        min_cosine = (threshold(calibration.inside_cosine, calibration.outside_cosine, quantile=cosine_quantile)
                      if cosine_quantile is not None else None) or 1.01  # 1.01: no cosine reaches it
        table = _table()
        for r in rows:
            gate = Gate(min_cosine=min_cosine, min_term_coverage=coverage,
                        cosine_source="calibrated", coverage_source="calibrated",
                        unknown_terms=r["unknown"] if twice else [])
            named = question_identifiers(r["text"]) if twice else frozenset()
            stems = content_stems(r["text"])
            if unknown_share is not None and len(r["unknown"]) > unknown_share * max(1, len(stems)):
                gate = gate.model_copy(update={"min_cosine": 1.01})  # the cosine path closed
            passing = [h for h in r["hits"] if verdict(h, stems, gate, identifiers=named).passed]
            if not passing:
                table[r["kind"]]["refused"] += 1
            else:
                table[r["kind"]]["correct" if {doc_of.get(h.chunk_id) for h in passing} & r["relevant"] else "wrong"] += 1
        out.append({"coverageQuantile": quantile, "unknownWordsTwice": twice, "coverageFloor": floor,
                    "minTermCoverage": coverage, "cosineQuantile": cosine_quantile,
                    "minCosine": min_cosine if cosine_quantile is not None else None,
                    "cosineMaxUnknownShare": unknown_share,
                    "table": table, **_shares(table)})
    return out


def run_dataset(data: Path, name: str, cache: Path, embedder: CachedEmbedder, faquad: int,
                judge: Embedder | None = None) -> dict[str, Any]:
    questions = _questions(data, name, faquad)
    store = cache / f"ask-{'faquad-pt' if name.startswith('faquad') else name}.db"
    tables: dict[str, dict[str, dict[str, int]]] = {"extractive": _table(), "fake-llm": _table()}
    rows: list[dict[str, Any]] = []
    dropped = 0
    misses: list[dict[str, Any]] = []
    lexical_only = 0  # asks whose query embedding missed the engine's deadline: lexical arm only
    by_query_kind: dict[str, dict[str, int]] = {}
    started = time.perf_counter()
    with WireServer() as server:
        server.chat = _fake_llm
        llm = OllamaLLM(base_url=server.url, model="fake", retries=0)
        with Plait(str(store), embedder=embedder, llm="none") as engine:
            _index(engine, data, name, cache)
        with Plait(str(store), embedder=embedder, llm="none") as engine, Plait(
            str(store), embedder=embedder, llm=llm
        ) as with_llm:
            calibration = GateCalibration.model_validate(read_settings(engine.store, "default").ask_gate)
            doc_of = {
                cid: chunk.source_id
                for cid, chunk in engine.store.get_chunks("default", sorted(engine.store.chunk_ids("default"))).items()
            }
            for text, kind, relevant in questions:
                for mode, eng in (("extractive", engine), ("fake-llm", with_llm)):
                    result = eng.ask(text)
                    lexical_only += not result.vector_available
                    if result.mode == "not-found":
                        outcome = "refused"
                    else:
                        cited = {doc_of.get(c.chunk_id) for c in result.citations}
                        outcome = "correct" if cited & relevant else "wrong"
                    tables[mode][kind][outcome] += 1
                    if mode == "extractive" and kind == "answerable" and text in KIND_OF:
                        tally = by_query_kind.setdefault(KIND_OF[text], {"correct": 0, "wrong": 0, "refused": 0})
                        tally[outcome] += 1
                    if mode == "extractive" and kind == "answerable" and outcome != "correct":
                        misses.append(_miss(engine, text, relevant, outcome, result, doc_of))
                    if mode == "fake-llm":
                        dropped += len(result.dropped)
                searched = engine.search(text, k=5)
                lexical_only += not searched.vector_available
                hits = searched.hits
                unknown = unknown_terms(engine.store, "default", text, content_stems(text))
                own, where = _sentence_cosines(embedder, text, hits)
                signals = {**_signals(text, hits, unknown), "bestSentenceCosine": max(own, default=0.0)}
                row: dict[str, Any] = {"text": text, "kind": kind, "relevant": relevant, "hits": hits, "unknown": unknown,
                       "queryKind": KIND_OF.get(text) if kind == "answerable" else None,
                       "bestSentenceRelevant": where is not None and doc_of.get(hits[where - 1].chunk_id) in relevant}
                if judge is not None:
                    row["judgeCosines"], judged_where = _sentence_cosines(judge, text, hits)
                    signals["bestSentenceCosineJudge"] = max(row["judgeCosines"], default=0.0)
                    row["judgeSentenceRelevant"] = (judged_where is not None
                                                    and doc_of.get(hits[judged_where - 1].chunk_id) in relevant)
                rows.append({**row, "signals": signals})
    return {
        "dataset": name,
        "role": "dev (constants chosen here)" if name in DEV else "held out",
        "questions": {kind: sum(1 for _, k, _ in questions if k == kind) for kind in _table()},
        "gate": {"minCosine": calibration.min_cosine, "minTermCoverage": calibration.min_term_coverage,
                 "samples": calibration.samples, "chunks": calibration.chunks,
                 "calibratedAt": calibration.calibrated_at, "calibratedBy": calibration.calibrated_by,
                 "version": calibration.version, "coverageQuantile": COVERAGE_QUANTILE},
        "tables": tables,
        "shares": {mode: _shares(table) for mode, table in tables.items()},
        "extractiveAnswerableByQueryKind": by_query_kind,
        "extractiveMisses": misses,
        "extractiveMissCauses": {cause: sum(1 for m in misses if m["cause"] == cause) for cause in CAUSES},
        "bestSentenceFromRelevantDocument": {
            group: sum(1 for r in rows if r["kind"] == "answerable" and (r["queryKind"] or "natural") == group
                       and r["bestSentenceRelevant"])
            for group in ("natural", "identifier")
        },
        "fakeLlmSentencesDropped": dropped,
        "asksWithoutDenseArm": lexical_only,
        "diagnosisAuc": _diagnosis(rows),
        "sweepSourcesPassingGate": _sweep(calibration, rows, doc_of),
        "sentenceJudge": None if judge is None else {
            "embedder": f"{judge.provider}/{judge.model}",
            "bestSentenceFromRelevantDocument": {
                group: sum(1 for r in rows if r["kind"] == "answerable" and (r["queryKind"] or "natural") == group
                           and r["judgeSentenceRelevant"])
                for group in ("natural", "identifier")
            },
            "sweep": _sentence_judge(calibration, rows, doc_of),
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


def _named_miss(miss: Mapping[str, Any]) -> str:
    """A missed question's id, with where retrieval put its first relevant hit."""
    if miss["cause"] != "retrieval":
        return str(miss["id"])
    rank = miss["firstRelevantRankTop20"]
    return f"{miss['id']} ({'first relevant hit at rank ' + str(rank) if rank else 'none in the top 20'})"


def _markdown(results: list[dict[str, Any]], meta: Mapping[str, Any]) -> str:
    lines = ["# ask: refusals and citations", "", f"{meta['machine']} · {meta['date']} · embedder {meta['embedder']}"
             f" · plait {meta['commit']} · busy machine (other helpers running; load average "
             f"{meta['loadBefore']} at the start, {meta['loadAfter']} at the end)", ""]
    for r in results:
        g = r["gate"]
        lines += [f"## {r['dataset']} ({r['role']})", "",
                  f"gate: cosine ≥ {g['minCosine']}, term coverage ≥ {g['minTermCoverage']} "
                  f"({g['samples']} pseudo-questions over {g['chunks']} chunks; calibrated {g['calibratedAt']} "
                  f"by {g['calibratedBy']}, method version {g['version']})", ""]
        for mode, table in r["tables"].items():
            lines += [f"**{mode}**", "", "| kind | correct citation | wrong citation | refused |", "|---|---|---|---|"]
            lines += [f"| {kind} | {row['correct']} | {row['wrong']} | {row['refused']} |" for kind, row in table.items()]
            lines += ["", "shares: " + ", ".join(f"{k} {v}" for k, v in r["shares"][mode].items()), ""]
        if r["extractiveAnswerableByQueryKind"]:
            lines += ["extractive, answerable questions by kind: " + "; ".join(
                f"{kind} {row['correct']} correct / {row['wrong']} wrong / {row['refused']} refused"
                for kind, row in r["extractiveAnswerableByQueryKind"].items()), ""]
        lines += [f"fake LLM: {r['fakeLlmSentencesDropped']} sentences dropped by the claim check; "
                  f"{r['asksWithoutDenseArm']} asks and diagnosis searches ran without the dense arm (the query "
                  "embedding past the engine's deadline on the busy machine)", ""]
        causes = r["extractiveMissCauses"]
        lines += ["why answerable questions were not answered with a correct citation (extractive):", "",
                  "| cause | questions | which |", "|---|---|---|"]
        for cause, meaning in CAUSES.items():
            named = ", ".join(_named_miss(m) for m in r["extractiveMisses"] if m["cause"] == cause and m["id"])
            lines.append(f"| {cause}: {meaning} | {causes[cause]} | {named} |")
        best = r["bestSentenceFromRelevantDocument"]
        groups = sorted({group for aucs in r["diagnosisAuc"].values() for group in aucs})
        lines += ["", "the question's best e5 sentence among its top 5 hits comes from a relevant document: "
                  + "; ".join(f"{group} {best[group]}" for group in groups), ""]
        lines += ["diagnosis (AUC of each top-5 signal, answerable against unanswerable + out-of-corpus):", "",
                  "| signal | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
        lines += [f"| {signal} | " + " | ".join(str(aucs.get(group)) for group in groups) + " |"
                  for signal, aucs in r["diagnosisAuc"].items()]
        judged = r.get("sentenceJudge")
        if judged:
            lines += ["", f"sentence judge {judged['embedder']} (the gate, or a hit whose best sentence reaches the "
                      "cosine; offline, relevant document among the sources passing): its best sentence comes from "
                      "a relevant document: " + "; ".join(f"{g} {n}" for g, n in
                                                          judged["bestSentenceFromRelevantDocument"].items()
                                                          if g in groups), "",
                      "| min sentence cosine | answerable correct | unanswerable refused | out-of-corpus refused |",
                      "|---|---|---|---|"]
            lines += [f"| {j['minSentenceCosine'] if j['minSentenceCosine'] is not None else 'gate alone'} | "
                      f"{j['answeredWithCorrectCitation']} | {j['unanswerableRefused']} | {j['outOfCorpusRefused']} |"
                      for j in judged["sweep"]]
        lines += ["", "sweep (offline, relevant document among the sources passing the gate):", "",
                  "| coverage quantile | unknown words twice | floor | min coverage | cosine gate "
                  "| cosine path: unknown share at most | answerable correct | unanswerable refused | out-of-corpus refused |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for s in r["sweepSourcesPassingGate"]:
            cosine = "off" if s["cosineQuantile"] is None else f"{s['minCosine']} (quantile {s['cosineQuantile']})"
            lines.append(f"| {s['coverageQuantile']} | {s['unknownWordsTwice']} | {s['coverageFloor']} | {s['minTermCoverage']} | {cosine} | "
                         f"{'any' if s.get('cosineMaxUnknownShare') is None else s['cosineMaxUnknownShare']} | "
                         f"{s['answeredWithCorrectCitation']} | {s['unanswerableRefused']} | {s['outOfCorpusRefused']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache", default="/tmp/ask-cache")
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--faquad", type=int, default=60, help="answerable FaQuAD test questions (and SciFact ones)")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--sentence-judge", default=None,
                        help="an embedder (e.g. minilm) whose best sentence cosine per hit is measured as a judge")
    args = parser.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    inner = make_embedder(args.embedder)
    if inner is None:
        raise SystemExit("an embedder is needed")
    embedder = CachedEmbedder(inner, path=cache / "embeddings.sqlite")
    embedder.embed_query("warm up")  # the model loads before the first timed query
    names = args.only or list(DATASETS)
    load_before = round(os.getloadavg()[0], 2)
    judge = None
    if args.sentence_judge:
        inner_judge = make_embedder(args.sentence_judge)
        if inner_judge is None:
            raise SystemExit(f"no embedder {args.sentence_judge!r}")
        judge = CachedEmbedder(inner_judge, path=cache / "embeddings.sqlite")
    results = [run_dataset(Path(args.data), name, cache, embedder, args.faquad, judge) for name in names]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    meta = {"embedder": args.embedder, "commit": commit or "unknown",
            "machine": f"{platform.machine()} · {platform.platform()} · Python {platform.python_version()} · "
                       f"{os.cpu_count()} cores",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "loadBefore": load_before, "loadAfter": round(os.getloadavg()[0], 2)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ask_answers.json").write_text(json.dumps({**meta, "results": results}, indent=2) + "\n", encoding="utf-8")
    (RESULTS / "ask_answers.md").write_text(_markdown(results, meta), encoding="utf-8")
    print(_markdown(results, meta))


if __name__ == "__main__":
    main()
