// The hits list, the status line with the fusion decision, and the hit's debug dialog.

import { api, collectionPath, state } from "./api.js";
import { $, el, errorText, fmt, marked, originText, originTrail, rank, setStatus } from "./dom.js";
import { renderExplain } from "./explain.js";
import { fusionSentence, fusionText } from "./fusion.js";

// One line saying why fusion kept this hit: the mechanical answer to "why is this here?".
export function whyKept(hit, result) {
  const r = hit.ranks;
  const k = result.k;
  let why;
  if (hit.match === "both") {
    if (r.dense > k && r.lexical <= k) {
      why = "lexical rescue: dense rank " + r.dense + ", lexical rank " + r.lexical + " lifted it to fused #" + r.fused;
    } else if (r.lexical > k && r.dense <= k) {
      why = "semantic rescue: lexical rank " + r.lexical + ", dense rank " + r.dense + " lifted it to fused #" + r.fused;
    } else {
      why = "found by both arms (dense #" + r.dense + ", lexical #" + r.lexical + ")";
    }
  } else if (hit.match === "lexical") {
    why = result.vectorAvailable
      ? "lexical rescue: not in the dense arm's top " + result.fusion.overfetch + ", lexical rank " + r.lexical
      : "lexical only: the dense arm was off (" + (result.vectorUnavailableReason || "no vectors") + ")";
  } else {
    why = "semantic match: no query term matched it; dense rank " + r.dense;
  }
  if (r.rerank !== null && r.rerank !== undefined) why += "; reranked to #" + r.rerank;
  return why;
}

function renderFusionDetails(result) {
  const f = result.fusion;
  const decided = result.fusionDecided || {};
  $("fusion-long").textContent = "Fusion: " + fusionText(f) + ".";
  const facts = $("fusion-facts");
  facts.replaceChildren();
  const pairs = [["method", f.method + (decided.methodFrom ? " (from the " + decided.methodFrom + ")" : "")]];
  for (const [name, value] of Object.entries(decided.parameters || {})) pairs.push([name, value]);
  if (decided.reason) pairs.push(["why this weight", decided.reason]);
  if (decided.lexicalWeightReason) pairs.push(["lexical weight", decided.lexicalWeightReason]);
  if (decided.queryLanguage) pairs.push(["query language", decided.queryLanguage]);
  pairs.push(["over-fetch", f.overfetch + " per arm, fused before the top-" + result.k + " cut"]);
  for (const [name, value] of pairs) facts.append(el("dt", null, name), el("dd", null, value));
  $("fusion-details").hidden = false;
}

export function renderHits(result) {
  const list = $("hits");
  list.replaceChildren();
  result.hits.forEach((hit, index) => {
    const item = el("li", "hit");
    item.tabIndex = 0;
    item.dataset.index = String(index);
    item.dataset.chunk = hit.chunkId;
    item.setAttribute("aria-haspopup", "dialog");
    item.setAttribute("aria-label", "Hit " + hit.ranks.fused + ", " + hit.match + ", " + originText(hit.origin) + ". Press Enter for its journey.");

    const head = el("div", "hit-head");
    head.append(el("span", "fused-rank", "#" + hit.ranks.fused));
    head.append(el("span", "badge badge-" + hit.match, hit.match));
    head.append(el("span", "score", "score " + fmt(hit.score, 4)));
    const ranks = el("span", "ranks");
    ranks.append(el("span", "rank-dense", "dense " + rank(hit.ranks.dense)));
    ranks.append(el("span", "rank-lexical", "lexical " + rank(hit.ranks.lexical)));
    if (hit.ranks.rerank !== null && hit.ranks.rerank !== undefined) {
      ranks.append(el("span", "rank-rerank", "rerank " + rank(hit.ranks.rerank)));
    }
    head.append(ranks);
    item.append(head, originTrail(hit.origin));
    const text = hit.snippet || hit.content.replace(/\s+/g, " ").trim().slice(0, 280);
    item.append(marked(text, hit.snippet ? hit.highlights : [], "snippet"));
    item.append(el("p", "why-short", whyKept(hit, result)));
    list.append(item);
  });
}

function renderTimings(timings) {
  const dl = $("timings");
  dl.replaceChildren();
  for (const [stage, ms] of Object.entries(timings || {})) {
    dl.append(el("dt", null, stage), el("dd", null, ms));
  }
  $("timings-section").hidden = Object.keys(timings || {}).length === 0;
}

export function clearResult() {
  state.result = null;
  $("hits").replaceChildren();
  renderTimings({});
  $("fusion-details").hidden = true;
}

export function render(result) {
  state.result = result;
  renderHits(result);
  renderTimings(result.timingsMs);
  renderFusionDetails(result);
  const arms = !result.vectorAvailable ? "lexical only"
    : (result.vectorCoverage !== undefined && result.vectorCoverage < 1)
      ? "dense arm over " + Math.floor(result.vectorCoverage * 100) + "% of chunks (backfill in progress)"
      : "both arms";
  const count = result.hits.length + " hit" + (result.hits.length === 1 ? "" : "s");
  const total = result.timingsMs && result.timingsMs.total !== undefined ? " · " + result.timingsMs.total + " ms" : "";
  setStatus(count + " · " + fusionSentence(result.fusion) + " · " + arms + total, false);
  const degraded = $("degraded");
  degraded.hidden = result.vectorAvailable;
  degraded.textContent = result.vectorAvailable ? "" : "Dense arm unavailable: " + (result.vectorUnavailableReason || "unknown reason");
}

function stageRows(hit) {
  const rows = [
    ["dense", hit.ranks.dense, "vectorScore " + fmt(hit.vectorScore, 4)],
    ["lexical", hit.ranks.lexical, "lexicalScore " + fmt(hit.lexicalScore, 4)],
    ["fused", hit.ranks.fused, "score " + fmt(hit.score, 6)],
  ];
  if (hit.ranks.rerank !== null && hit.ranks.rerank !== undefined) rows.push(["rerank", hit.ranks.rerank, ""]);
  const stages = $("debug-stages");
  stages.replaceChildren();
  for (const [stage, r, score] of rows) {
    const tr = el("tr", "stage-" + stage);
    tr.append(el("th", null, stage), el("td", "stage-rank", rank(r)), el("td", "stage-score", score));
    tr.firstChild.setAttribute("scope", "row");
    stages.append(tr);
  }
}

// The debug dialog for a chunk: a hit of the last search (ranks, why kept) or any chunk
// of the arm lists; then its rendered content and its explain trace, fetched.
export function openChunk(chunkId, opener) {
  const result = state.result;
  const hit = result && result.hits.find((h) => h.chunkId === chunkId);
  state.opener = opener || null;
  const entry = state.arms && [].concat(state.arms.fused, state.arms.lexical, state.arms.dense).find((e) => e.chunkId === chunkId);
  const origin = hit ? hit.origin : entry ? entry.origin : null;
  $("debug-title").textContent = (hit ? "Hit #" + hit.ranks.fused : "Chunk") + " — " + originText(origin);
  $("debug-why").textContent = hit ? "Why kept: " + whyKept(hit, result) : "Not among the hits of this search.";
  if (hit) stageRows(hit);
  else $("debug-stages").replaceChildren();
  const facts = $("debug-facts");
  facts.replaceChildren();
  const pairs = hit
    ? [["match", hit.match], ["scope", hit.scope], ["chunk", hit.chunkId], ["fusion", fusionText(result.fusion)]]
    : [["chunk", chunkId]];
  for (const [name, value] of Object.entries((hit && hit.metadata) || {})) pairs.push(["meta " + name, value]);
  for (const [name, value] of pairs) facts.append(el("dt", null, name), el("dd", null, value));
  $("debug-content").textContent = hit ? hit.content : "";
  $("debug-rendered").replaceChildren(el("p", "help", "Loading…"));
  $("debug-explain").replaceChildren(el("p", "help", "Loading…"));

  const dialog = $("debug");
  if (!dialog.open) dialog.showModal();
  $("debug-title").focus();
  loadChunk(chunkId);
  loadTrace(chunkId);
}

async function loadChunk(chunkId) {
  try {
    const view = await api("GET", collectionPath("/chunks/" + encodeURIComponent(chunkId)));
    const box = $("debug-rendered");
    // Sanitised on the server (nh3 allowlist: no scripts, handlers, styles or images).
    box.innerHTML = view.html;
    $("debug-content").textContent = view.content;
  } catch (error) {
    $("debug-rendered").replaceChildren(el("p", "error", errorText(error)));
  }
}

async function loadTrace(chunkId) {
  const query = lastQuery();
  if (!query) {
    $("debug-explain").replaceChildren(el("p", "help", "Search first: the trace is for a query."));
    return;
  }
  try {
    const body = Object.assign({}, state.lastBody, { chunk: chunkId });
    const trace = await api("POST", collectionPath("/explain"), body);
    renderExplain($("debug-explain"), trace, { compact: true });
  } catch (error) {
    $("debug-explain").replaceChildren(el("p", "error", errorText(error)));
  }
}

function lastQuery() {
  return state.lastBody && state.lastBody.query;
}
