// plait search & retrieval debug page: vanilla JS over the HTTP API, no build step.
// Every value from the server is written with textContent, never as HTML.
"use strict";

const KEY_STORAGE = "plait.apiKey";
const $ = (id) => document.getElementById(id);

const state = { auth: false, result: null, opener: null };

function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-Plait-Request"] = "1"; // needed without auth (no cross-site POSTs)
  const key = apiKey();
  if (state.auth && key) headers.Authorization = "Bearer " + key;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  if (!response.ok) {
    const message = data && data.error ? data.error : response.status + " " + response.statusText;
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return data;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function setStatus(text, isError) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", Boolean(isError));
}

function fmt(value, digits) {
  return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
}

function rank(value) {
  return value === null || value === undefined ? "—" : "#" + value;
}

function originText(origin) {
  if (origin.kind === "file") {
    return [origin.sourcePath].concat(origin.headingPath || []).join(" › ");
  }
  return "session " + origin.sessionId + (origin.eventId ? " › event " + origin.eventId : "");
}

// One line saying why fusion kept this hit: the mechanical answer to "why is this here?".
function whyKept(hit, result) {
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

function fusionText(f) {
  if (f.method === "rrf") return "RRF (k=" + f.rrfK + ", lexical weight " + f.lexicalWeight + ")";
  if (f.method === "minmax" || f.method === "dbsf" || f.method === "adaptive") {
    const used = f.denseWeightUsed === null || f.denseWeightUsed === undefined ? f.denseWeight : f.denseWeightUsed;
    let language = "";
    if (f.method === "adaptive" && f.queryLanguage) {
      const covered = f.embedderCoversQuery === true ? "declared by the embedder"
        : f.embedderCoversQuery === false ? "not declared by the embedder" : "embedder languages unknown";
      language = "; query language " + f.queryLanguage + ", " + covered;
    }
    return f.method + " (dense weight " + used + (f.fusionReason ? ": " + f.fusionReason : "") + language + ")";
  }
  return "weighted (vector " + f.vectorWeight + " / lexical " + f.lexicalScoreWeight + ", threshold " + f.threshold + ")";
}

function renderHits(result) {
  const list = $("hits");
  list.replaceChildren();
  result.hits.forEach((hit, index) => {
    const item = el("li", "hit");
    item.tabIndex = 0;
    item.dataset.index = String(index);
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
    item.append(head);
    item.append(el("div", "origin", originText(hit.origin)));
    const snippet = hit.content.replace(/\s+/g, " ").trim();
    item.append(el("p", "snippet", snippet.length > 280 ? snippet.slice(0, 279) + "…" : snippet));
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

function render(result) {
  state.result = result;
  renderHits(result);
  renderTimings(result.timingsMs);
  const arms = !result.vectorAvailable ? "lexical only"
    : (result.vectorCoverage !== undefined && result.vectorCoverage < 1)
      ? "lexical + dense arm over " + Math.floor(result.vectorCoverage * 100) + "% of chunks (backfill in progress)"
      : "dense + lexical";
  setStatus(
    result.hits.length + " hit" + (result.hits.length === 1 ? "" : "s") + " · " + fusionText(result.fusion) +
      " · over-fetch " + result.fusion.overfetch + " · " + arms +
      (result.timingsMs && result.timingsMs.total !== undefined ? " · " + result.timingsMs.total + " ms" : ""),
    false,
  );
  const degraded = $("degraded");
  degraded.hidden = result.vectorAvailable;
  degraded.textContent = result.vectorAvailable ? "" : "Dense arm unavailable: " + (result.vectorUnavailableReason || "unknown reason");
}

function openDebug(index, opener) {
  const result = state.result;
  const hit = result && result.hits[index];
  if (!hit) return;
  state.opener = opener || null;
  $("debug-title").textContent = "Hit #" + hit.ranks.fused + " — " + originText(hit.origin);
  $("debug-why").textContent = "Why kept: " + whyKept(hit, result);

  const stages = $("debug-stages");
  stages.replaceChildren();
  const rows = [
    ["dense", hit.ranks.dense, "vectorScore " + fmt(hit.vectorScore, 4)],
    ["lexical", hit.ranks.lexical, "lexicalScore " + fmt(hit.lexicalScore, 4)],
    ["fused", hit.ranks.fused, "score " + fmt(hit.score, 6)],
  ];
  if (hit.ranks.rerank !== null && hit.ranks.rerank !== undefined) rows.push(["rerank", hit.ranks.rerank, ""]);
  for (const [stage, r, score] of rows) {
    const tr = el("tr", "stage-" + stage);
    tr.append(el("th", null, stage), el("td", "stage-rank", rank(r)), el("td", "stage-score", score));
    tr.firstChild.setAttribute("scope", "row");
    stages.append(tr);
  }

  const facts = $("debug-facts");
  facts.replaceChildren();
  const pairs = [
    ["match", hit.match],
    ["scope", hit.scope],
    ["chunk", hit.chunkId],
    ["fusion", fusionText(result.fusion)],
  ];
  for (const [name, value] of Object.entries(hit.metadata || {})) pairs.push(["meta " + name, value]);
  for (const [name, value] of pairs) facts.append(el("dt", null, name), el("dd", null, value));
  $("debug-content").textContent = hit.content;

  const dialog = $("debug");
  if (!dialog.open) dialog.showModal();
  $("debug-title").focus();
}

function searchBody() {
  const body = { query: $("query").value, k: Number($("k").value) };
  const fusion = $("fusion").value;
  if (fusion) body.fusion = fusion;
  const slider = $("lexical-weight");
  if (slider.dataset.touched === "1" && !slider.disabled) body.lexicalWeight = Number(slider.value);
  const rerank = $("rerank").value;
  if (rerank) body.rerank = rerank;
  return body;
}

async function runSearch(event) {
  event.preventDefault();
  const collection = $("collection").value;
  if (!collection) {
    setStatus("No collection to search: index one first, or enter an API key that covers one.", true);
    return;
  }
  setStatus("Searching…", false);
  try {
    const result = await api("POST", "/v1/collections/" + encodeURIComponent(collection) + "/search", searchBody());
    render(result);
  } catch (error) {
    $("hits").replaceChildren();
    renderTimings({});
    setStatus("Error " + (error.status || "") + ": " + error.message, true);
    if (error.status === 401) showKeyForm(true);
  }
}

function showKeyForm(focus) {
  const form = $("key-form");
  form.hidden = false;
  $("api-key").value = apiKey();
  if (focus) $("api-key").focus();
}

async function loadCollections(preferred) {
  const select = $("collection");
  try {
    const infos = await api("GET", "/v1/collections");
    const previous = select.value || preferred;
    select.replaceChildren();
    for (const info of infos) {
      const option = el("option", null, info.name + " (" + info.chunks + " chunks)");
      option.value = info.name;
      select.append(option);
    }
    if (infos.some((i) => i.name === previous)) select.value = previous;
    if (!infos.length) setStatus("No collections yet: run 'plait index PATH' first.", false);
  } catch (error) {
    setStatus("Error " + (error.status || "") + ": " + error.message, true);
    if (error.status === 401) showKeyForm(true);
  }
}

function collectionPath(suffix) {
  return "/v1/collections/" + encodeURIComponent($("collection").value) + suffix;
}

function setMessage(id, text, isError) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("error", Boolean(isError));
}

async function loadCoverage() {
  const rows = $("coverage-rows");
  if (!$("collection").value) return;
  try {
    const report = await api("GET", collectionPath("/coverage"));
    rows.replaceChildren();
    for (const scope of report.scopes) {
      const tr = el("tr", "coverage-row");
      tr.dataset.scope = scope.scope;
      tr.append(el("th", null, scope.scope));
      tr.firstChild.setAttribute("scope", "row");
      const cells = [
        ["present", scope.sourcesPresent],
        ["indexed", scope.sourcesIndexed],
        ["stored", scope.sourcesStored],
        ["chunks", scope.chunks],
        ["without-vector", scope.chunksWithoutVector],
        ["last-indexed", scope.lastIndexedAt],
      ];
      for (const [name, value] of cells) tr.append(el("td", "cov-" + name, value === null || value === undefined ? "—" : value));
      rows.append(tr);
    }
    setMessage("coverage-message", report.scopes.length ? "" : "Nothing indexed in this collection yet.", false);
  } catch (error) {
    rows.replaceChildren();
    setMessage("coverage-message", "Error " + (error.status || "") + ": " + error.message, true);
  }
}

function renderCard(card) {
  const item = el("li", "card card-" + card.status);
  item.dataset.id = card.id;
  item.append(el("p", "card-question", card.question));
  item.append(el("p", "card-answer", card.answer));
  item.append(el("span", "card-status", card.status));
  for (const action of ["approve", "reject"]) {
    const button = el("button", "card-" + action, action === "approve" ? "Approve" : "Reject");
    button.type = "button";
    button.dataset.action = action;
    button.setAttribute("aria-label", (action === "approve" ? "Approve" : "Reject") + " card: " + card.question);
    button.disabled = card.status === (action === "approve" ? "approved" : "rejected");
    item.append(button);
  }
  return item;
}

async function loadCards() {
  const list = $("faq-cards");
  if (!$("collection").value) return;
  const status = $("faq-status").value;
  try {
    const cards = await api("GET", collectionPath("/faq" + (status ? "?status=" + encodeURIComponent(status) : "")));
    list.replaceChildren(...cards.map(renderCard));
    setMessage("faq-message", cards.length + " card" + (cards.length === 1 ? "" : "s"), false);
  } catch (error) {
    list.replaceChildren();
    setMessage("faq-message", "Error " + (error.status || "") + ": " + error.message, true);
  }
}

async function reviewCard(button) {
  const item = button.closest(".card");
  const action = button.dataset.action;
  try {
    const card = await api("POST", collectionPath("/faq/" + encodeURIComponent(item.dataset.id) + "/" + action));
    const fresh = renderCard(card);
    item.replaceWith(fresh);
    fresh.querySelector("button:not([disabled])").focus();
    setMessage("faq-message", "Card " + (action === "approve" ? "approved" : "rejected") + ": " + card.question, false);
  } catch (error) {
    setMessage("faq-message", "Error " + (error.status || "") + ": " + error.message, true);
  }
}

function loadPanels() {
  loadCoverage();
  loadCards();
}

async function init() {
  let health = { auth: false, defaultCollection: "default" };
  try {
    health = await api("GET", "/healthz");
  } catch (error) {
    setStatus("The server does not answer: " + error.message, true);
  }
  state.auth = Boolean(health.auth);
  if (state.auth) showKeyForm(false);

  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(KEY_STORAGE, $("api-key").value.trim());
    setStatus("Key saved.", false);
    loadCollections(health.defaultCollection).then(loadPanels);
  });
  $("collection").addEventListener("change", loadPanels);
  $("coverage-refresh").addEventListener("click", loadCoverage);
  $("faq-refresh").addEventListener("click", loadCards);
  $("faq-status").addEventListener("change", loadCards);
  $("faq-cards").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) reviewCard(button);
  });

  const slider = $("lexical-weight");
  slider.addEventListener("input", () => {
    slider.dataset.touched = "1";
    $("lexical-weight-value").textContent = Number(slider.value).toFixed(2);
  });
  $("fusion").addEventListener("change", () => {
    const method = $("fusion").value;
    const weighted = method !== "" && method !== "rrf";  // the slider weighs RRF's arms only
    slider.disabled = weighted;
    $("lexical-weight-value").textContent = weighted
      ? "n/a (" + method + ")"
      : slider.dataset.touched === "1" ? Number(slider.value).toFixed(2) : "default";
  });

  $("search-form").addEventListener("submit", runSearch);

  const hits = $("hits");
  hits.addEventListener("click", (event) => {
    const item = event.target.closest(".hit");
    if (item) openDebug(Number(item.dataset.index), item);
  });
  hits.addEventListener("keydown", (event) => {
    const item = event.target.closest(".hit");
    if (!item) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      openDebug(Number(item.dataset.index), item);
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const next = event.key === "ArrowDown" ? item.nextElementSibling : item.previousElementSibling;
      if (next) next.focus();
    }
  });
  $("debug").addEventListener("close", () => {
    // The close event arrives after the browser has already moved focus back; only
    // restore it when focus was lost, or a key pressed meanwhile would be undone.
    const active = document.activeElement;
    if (state.opener && (!active || active === document.body || $("debug").contains(active))) {
      state.opener.focus();
    }
  });

  await loadCollections(health.defaultCollection);
  loadPanels();
  $("query").focus();
}

document.addEventListener("DOMContentLoaded", init);
