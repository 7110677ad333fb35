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
  for (const line of lines) {
    if (line === null) continue;
    li.append(typeof line === "string" ? el("p", null, line) : line);
  }
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

// A chunk of the document as the page names it: "chunk 2 of 3 (Guide › Setup)", its
// source first when the document spans several. The API's ordinal counts from 0.
function chunkLabel(r, c) {
  const several = ((r.ingestion && r.ingestion.sourceIds) || []).length > 1;
  const headings = (c.headingPath || []).join(" › ");
  return (several ? c.sourceId + ": " : "") + "chunk " + (c.ordinal + 1)
    + (c.sourceChunks ? " of " + c.sourceChunks : "") + (headings ? " (" + headings + ")" : "");
}

// The chunk as a named reference, its id on hover.
function chunkRef(r, chunkId, text) {
  const c = (r.chunks || []).find((j) => j.chunkId === chunkId);
  const ref = el("span", "chunk-ref", text || (c ? chunkLabel(r, c) : "chunk " + chunkId));
  ref.title = "chunk id " + chunkId;
  ref.dataset.chunk = chunkId;
  return ref;
}

// Which chunk a stage's line is about, when the document has more than one.
function aboutChunk(r, chunkId) {
  if (!chunkId || (r.chunks || []).length < 2) return null;
  const line = el("p", "stage-chunk", "About ");
  line.append(chunkRef(r, chunkId));
  return line;
}

// The stages whose lines are about a chunk, for its row in the chunk table.
function stagesAbout(r, chunkId) {
  const named = [
    ["lexical", r.lexical.chunkId], ["dense", r.dense.chunkId], ["fused", r.fusion.chunkId],
    ["rerank", r.rerank && r.rerank.chunkId], ["ask gate", r.askGate && r.askGate.verdict && r.askGate.verdict.chunkId],
  ];
  return named.filter(([, id]) => id === chunkId).map(([name]) => name).join(", ") || "—";
}

// Why a chunk was not on the page: the API's droppedBy for it, in words.
function cutText(c, cut) {
  if (c.returned) return "✓ returned";
  const words = {
    filters: "outside the requested scopes or metadata",
    hidden: "hidden: its scope is searched only when named",
    overfetch: "not in either arm's over-fetch: fusion never saw it",
    threshold: "dropped by the weighted threshold",
    "max-per-source": "its source already had maxPerSource chunks above it",
    "top-k": "fused past the top " + cut,
    rerank: "moved out of the page by rerank",
  }[c.droppedBy];
  return "✗ " + (c.droppedBy ? c.droppedBy + (words ? ": " + words : "") : "not returned");
}

function ranked(rank, score, digits) {
  return rank === null || rank === undefined ? "—" : "#" + rank + " · " + fmt(score, digits);
}

// Every chunk of the document: where each stage put it, and whether it was cut and why.
function chunksTable(r) {
  const checks = new Map(((r.askGate && r.askGate.checks) || []).map((check) => [check.chunkId, check]));
  const cut = r.fusion.offset + r.fusion.k;
  const reranked = Boolean(r.rerank);
  const rows = r.chunks.map((c) => {
    const check = checks.get(c.chunkId);
    const row = [
      chunkRef(r, c.chunkId, String(c.ordinal + 1) + (c.sourceChunks ? " of " + c.sourceChunks : "")),
      (c.headingPath || []).join(" › ") || "—",
      stagesAbout(r, c.chunkId),
      ranked(c.lexicalRank, c.lexicalScore, 4),
      ranked(c.denseRank, c.cosine, 4),
      ranked(c.fusedRank, c.fusedScore, 4),
    ];
    if (reranked) row.push(c.rerankRank === null || c.rerankRank === undefined ? "—" : "#" + c.rerankRank);
    row.push(cutText(c, cut), c.hasVector ? "yes" : "no", check ? yes(check.passed, check.passed ? "passes" : "fails") : "—");
    return row;
  });
  const columns = ["chunk", "headings", "stages about it", "lexical (BM25)", "dense (cosine)", "fused (score)"]
    .concat(reranked ? ["rerank"] : [], ["page", "vector", "ask gate"]);
  return table("Exact ranks and scores, even past the over-fetch (— = not ranked); hover a chunk for its id",
    columns, rows, "detail chunk-table");
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
    const verdict = el("p", "gate-verdict gate-" + (v.passed ? "passed" : "failed"));
    if ((r.chunks || []).length > 1) verdict.append(chunkRef(r, v.chunkId), document.createTextNode(": "));
    verdict.append(document.createTextNode(v.reason + "."));
    lines.push(verdict);
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
  // several chunks: the caption names the one the words are held against (the API's
  // termsChunkId: the lexical arm's best chunk, else the one the fusion stage is about)
  const termsChunk = (r.chunks || []).length > 1 && r.chunks.find((c) => c.chunkId === lex.termsChunkId);
  const caption = termsChunk ? "Each query word against the two lexical fields of " + chunkLabel(r, termsChunk)
    : "Each query word against the best chunk's two lexical fields";
  const terms = lex.terms && lex.terms.length ? termsTable(lex.terms, caption) : null;
  const searched = "searched: exact [" + (lex.exactTerms || []).join(", ") + "], stems [" + (lex.stemTerms || []).join(", ") + "]";
  stages.append(stage("Lexical arm", [aboutChunk(r, lex.chunkId), armLine("BM25", lex, ""), searched], terms));
  stages.append(stage("Dense arm", [aboutChunk(r, r.dense.chunkId), armLine("Vectors", r.dense, "")]));
  const f = r.fusion;
  const fusionLines = [aboutChunk(r, f.chunkId)];
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
      aboutChunk(r, rr.chunkId),
      rr.method + (rr.reranked ? " reranked the top " + rr.kOverfetch : " kept the fused order (" + (rr.reason || "no reason") + ")") + ".",
      rr.inPool ? "In the pool: fused " + (rr.rankBefore || "—") + " → rerank " + (rr.rankAfter || "—") + "." : "Not in the rerank pool.",
    ]));
  }
  if (r.askGate) stages.append(askGateStage(r));
  container.append(stages);
  if (!compact && r.chunks && r.chunks.length) {
    const details = el("details", "chunks");
    details.open = r.chunks.length > 1; // one chunk: the stage lines above already say it all
    details.append(el("summary", null, "Each chunk of the document (" + r.chunks.length + ")"));
    details.append(chunksTable(r));
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
