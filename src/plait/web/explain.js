// "Why not found?": a document's journey for the current query and settings, rendered
// from the API's explain trace (the same stages and diagnosis as `plait explain`).

import { api, collectionPath, state } from "./api.js";
import { $, el, errorText, fmt, table } from "./dom.js";
import { fusionText } from "./fusion.js";

const CHUNK_ID = /^[0-9a-f]{24}$/;

function yes(flag, word) {
  return (flag ? "✓ " : "✗ ") + (word || (flag ? "yes" : "no"));
}

// What the analyser did to one query word, in words.
function termNotes(t) {
  const notes = [];
  if (t.stopword && !t.reason) notes.push("stopword: not searched");
  if (t.identifier) notes.push("identifier: kept whole in the exact field");
  const parts = (t.stems || []).filter((s) => s !== t.exact);
  if (t.identifier && parts.length) notes.push("split for the stems field into " + parts.join(", "));
  const lowered = t.raw.toLowerCase();
  const stemmed = (t.stems || []).filter((s) => s !== lowered && s !== t.exact);
  if (!t.identifier && stemmed.length) notes.push("stem changed it: " + lowered + " → " + stemmed.join(", "));
  if (t.exact && t.exact !== lowered) notes.push("normalised to " + t.exact);
  if (t.reason) notes.push(t.reason);
  return notes.join("; ");
}

function termsTable(terms, caption) {
  const rows = terms.map((t) => {
    const stems = (t.stems || []).map((s) => (t.matchedStems || []).includes(s) ? s + " ✓" : s).join(", ");
    return [
      t.raw,
      t.stopword ? "—" : (t.exact || "—") + " " + (t.matchedExact ? "✓ matched" : "✗ not in chunk"),
      t.stopword ? "—" : (stems || "—") + ((t.matchedStems || []).length ? "" : " (no match)"),
      termNotes(t),
    ];
  });
  return table(caption, ["query word", "exact field", "stems field", "what happened"], rows, "detail terms");
}

function armLine(name, arm, depthNote) {
  if (!arm.ran) return name + " did not run: " + (arm.reason || "no reason given") + ".";
  if (arm.rank === null || arm.rank === undefined) {
    return name + ": not ranked at all (" + arm.candidates + " candidates).";
  }
  const where = arm.withinOverfetch ? "within the over-fetch of " + arm.overfetch
    : "past the over-fetch of " + arm.overfetch + ": fusion never saw it";
  return name + ": rank " + arm.rank + " of " + arm.candidates + " (score " + fmt(arm.score, 4) + "), " + where + depthNote + ".";
}

function stage(title, lines, extra) {
  const li = el("li", "stage");
  li.append(el("h3", null, title));
  for (const line of lines) li.append(typeof line === "string" ? el("p", null, line) : line);
  if (extra) li.append(extra);
  return li;
}

// "; calibrated … by …" as `plait explain` says it (plait.ask_gate.calibration_note).
function calibrationNote(gate) {
  if (!gate.calibratedAt) return "";
  const by = { index: "at the end of an index run", calibrate: "by plait calibrate" }[gate.calibratedBy]
    || "by the first ask after a change";
  const since = gate.changedSince ? ", " + (gate.changedSince * 100).toFixed(1) + "% of its chunks changed since" : "";
  return "; calibrated " + gate.calibratedAt + " " + by + since;
}

// A chunk of the document as the chunks table names it: its ordinal and headings.
function chunkName(r, chunkId) {
  const c = (r.chunks || []).find((j) => j.chunkId === chunkId);
  if (!c) return "chunk " + chunkId;
  const headings = (c.headingPath || []).join(" › ");
  return "chunk " + c.ordinal + (headings ? " (" + headings + ")" : "");
}

// Would ask's relevance gate pass the document: the gate, and the verdict the API reports
// (askGate.verdict: the first chunk that passes, else the explained one), named when the
// document has more than one chunk.
function askGateStage(r) {
  const g = r.askGate;
  const gate = g.gate;
  const lines = [
    "Gate: cosine ≥ " + fmt(gate.minCosine, 4) + " (" + gate.cosineSource + ") or term coverage ≥ "
      + fmt(gate.minTermCoverage, 2) + " (" + gate.coverageSource + ")" + calibrationNote(gate) + ".",
  ];
  if (gate.unknownTerms && gate.unknownTerms.length) {
    lines.push("Never in the collection, counted twice in the coverage: " + gate.unknownTerms.join(", ") + ".");
  }
  const v = g.verdict;
  if (v) {
    const named = (r.chunks || []).length > 1 ? chunkName(r, v.chunkId) + ": " : "";
    lines.push(el("p", "gate-verdict gate-" + (v.passed ? "passed" : "failed"), named + v.reason + "."));
  } else {
    lines.push(el("p", "gate-verdict", "No chunk of the document to judge."));
  }
  const li = stage("Ask gate", lines);
  li.classList.add("stage-ask-gate");
  return li;
}

export function renderExplain(container, r, options) {
  const compact = options && options.compact;
  container.replaceChildren();
  const diagnosis = el("p", "diagnosis diagnosis-" + r.diagnosis.code);
  diagnosis.append(el("strong", null, "Diagnosis (" + r.diagnosis.code + "): "), document.createTextNode(r.diagnosis.message));
  container.append(diagnosis);
  const stages = el("ol", "stages");
  const ing = r.ingestion;
  if (!compact) {
    stages.append(stage("Ingestion", [
      (ing.indexed ? "" : "Not in the index: ") + ing.message + (ing.skipReason ? " — " + ing.skipReason : "") + ".",
    ]));
  }
  const lex = r.lexical;
  const terms = lex.terms && lex.terms.length ? termsTable(lex.terms, "Each query word against the best chunk's two lexical fields") : null;
  const searched = "searched: exact [" + (lex.exactTerms || []).join(", ") + "], stems [" + (lex.stemTerms || []).join(", ") + "]";
  stages.append(stage("Lexical arm", [armLine("BM25", lex, ""), searched], terms));
  stages.append(stage("Dense arm", [armLine("Vectors", r.dense, "")]));
  const f = r.fusion;
  const fusionLines = [];
  if (f.rank === null || f.rank === undefined) fusionLines.push("Not in the fused list (" + f.settings.method + ").");
  else {
    fusionLines.push("Fused rank " + f.rank + " (" + f.settings.method + ", score " + fmt(f.score, 4)
      + ", " + fmt(f.scoreNormalised, 4) + " of the best).");
  }
  const cut = f.offset + f.k;
  fusionLines.push(f.returned ? "Returned: within the top " + cut + "." : "Cut: " + (f.droppedBy ? "dropped by " + f.droppedBy : "not returned") + " (top " + cut + ").");
  fusionLines.push("Fusion: " + fusionText(f.settings) + ".");
  if (f.settings.identifierReason) fusionLines.push("Identifier precedence: " + f.settings.identifierReason + ".");
  stages.append(stage("Fusion and cut", fusionLines));
  if (r.rerank) {
    const rr = r.rerank;
    stages.append(stage("Rerank", [
      rr.method + (rr.reranked ? " reranked the top " + rr.kOverfetch : " kept the fused order (" + (rr.reason || "no reason") + ")") + ".",
      rr.inPool ? "In the pool: fused " + (rr.rankBefore || "—") + " → rerank " + (rr.rankAfter || "—") + "." : "Not in the rerank pool.",
    ]));
  }
  if (r.askGate) stages.append(askGateStage(r));
  container.append(stages);
  if (!compact && r.chunks && r.chunks.length) {
    const details = el("details", "chunks");
    details.append(el("summary", null, "Each chunk of the document (" + r.chunks.length + ")"));
    const checks = new Map(((r.askGate && r.askGate.checks) || []).map((check) => [check.chunkId, check]));
    const rows = r.chunks.map((c) => [
      String(c.ordinal), (c.headingPath || []).join(" › ") || "—", c.lexicalRank, c.denseRank, c.fusedRank,
      yes(c.returned), c.hasVector ? "yes" : "no",
      checks.has(c.chunkId) ? yes(checks.get(c.chunkId).passed, checks.get(c.chunkId).passed ? "passes" : "fails") : "—",
    ]);
    details.append(table("Exact ranks, even past the over-fetch (— = not ranked)", ["chunk", "headings", "lexical", "dense", "fused", "returned", "vector", "ask gate"], rows));
    container.append(details);
  }
}

// Which explain argument the form's value is: the chosen kind, else a listed source's own
// target (path for files, doc otherwise), else a chunk id by its shape, else a path.
export function targetOf(value, kind) {
  if (kind) return kind;
  const source = state.sources.get(value);
  if (source) return source.target;
  return CHUNK_ID.test(value) ? "chunk" : "path";
}

export async function runExplain(event, searchBody) {
  event.preventDefault();
  const box = $("explain-result");
  const value = $("explain-path").value.trim();
  const body = searchBody();
  if (!body.query) {
    box.replaceChildren(el("p", "error", "Type the query above first: the journey is for a query."));
    $("query").focus();
    return;
  }
  if (!value) return;
  body[targetOf(value, $("explain-kind").value)] = value;
  box.replaceChildren(el("p", "help", "Explaining…"));
  try {
    const trace = await api("POST", collectionPath("/explain"), body);
    renderExplain(box, trace, {});
  } catch (error) {
    box.replaceChildren(el("p", "error", errorText(error)));
  }
}

let pending = null;

// Completion: the collection's sources starting with what is typed.
export function loadSources(prefix) {
  clearTimeout(pending);
  pending = setTimeout(async () => {
    const collection = $("collection").value;
    if (!collection) return;
    try {
      const path = "/sources?limit=50" + (prefix ? "&prefix=" + encodeURIComponent(prefix) : "");
      const sources = await api("GET", collectionPath(path));
      if ($("collection").value !== collection) return;
      const list = $("explain-sources");
      list.replaceChildren();
      for (const source of sources) {
        state.sources.set(source.sourceId, source);
        const option = el("option");
        option.value = source.sourceId;
        option.label = source.kind + " · " + source.scope + " · " + source.chunks + " chunk" + (source.chunks === 1 ? "" : "s");
        list.append(option);
      }
    } catch (_) {
      // completion is a convenience: the form still works without it
    }
  }, prefix ? 150 : 0);
}
