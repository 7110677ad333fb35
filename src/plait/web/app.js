// plait search & retrieval debug page: vanilla JS modules over the HTTP API, no build step.

import { api, apiKey, collectionPath, forgetKey, keyRemembered, saveKey, state } from "./api.js";
import { clearArms, linkArms, renderArms } from "./arms.js";
import { $, el, errorText, setStatus } from "./dom.js";
import { loadSources, runExplain } from "./explain.js";
import { clearResult, openChunk, render } from "./hits.js";
import { loadCards, loadCoverage, reviewCard } from "./ops.js";

function searchBody() {
  const body = { query: $("query").value.trim(), k: Number($("k").value) };
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
  if (!$("collection").value) {
    setStatus(state.auth && !apiKey()
      ? "Enter an API key first."
      : "No collection to search: index one first, or use an API key that covers one.", true);
    return;
  }
  const body = searchBody();
  state.lastBody = body;
  setStatus("Searching…", false);
  // Both requests at once; the arm lists' outcome is kept until the hits are shown.
  const arms = api("POST", collectionPath("/arms?limit=10"), Object.assign({}, body, { rerank: undefined }))
    .then((lists) => ({ lists }), (error) => ({ error }));
  try {
    render(await api("POST", collectionPath("/search"), body));
  } catch (error) {
    clearResult();
    setStatus(errorText(error), true);
    if (error.status === 401) askForKey("That key is no longer accepted: enter another.");
  }
  const outcome = await arms;
  if (outcome.lists) renderArms(outcome.lists);
  else clearArms(errorText(outcome.error));
}

function askForKey(message) {
  $("key-prompt").hidden = false;
  $("key-message").textContent = message;
  $("remember-key").checked = keyRemembered();
  $("api-key").value = "";
  $("api-key").focus();
}

function showKeyState() {
  const known = state.auth && state.me;
  $("key-state").hidden = !known;
  $("change-key").hidden = !state.auth;
  if (known) {
    $("key-state").textContent = state.me.role + " key" + (state.me.collection === "*" ? "" : " for " + state.me.collection) +
      (keyRemembered() ? " (remembered)" : " (this tab only)");
  }
}

// Who the key is, then the collections it covers; a refused key asks for another.
async function connect(preferred) {
  try {
    state.me = await api("GET", "/v1/me");
  } catch (error) {
    state.me = null;
    showKeyState();
    if (error.status === 401) {
      forgetKey();
      askForKey("That key was not accepted: check it and try again.");
    } else {
      setStatus("The server does not answer: " + error.message, true);
    }
    return;
  }
  $("key-prompt").hidden = true;
  showKeyState();
  await loadCollections(preferred);
  loadPanels();
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
    setStatus(infos.length ? "" : "No collections yet: run 'plait index PATH' first.", false);
  } catch (error) {
    setStatus(errorText(error), true);
  }
}

function loadPanels() {
  clearArms();
  state.sources = new Map();
  loadSources("");
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

  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    saveKey($("api-key").value.trim(), $("remember-key").checked);
    $("api-key").value = "";
    connect(health.defaultCollection).then(() => {
      if ($("key-prompt").hidden) $("query").focus();
    });
  });
  $("change-key").addEventListener("click", () => askForKey("Enter another API key."));
  $("collection").addEventListener("change", loadPanels);
  $("coverage-refresh").addEventListener("click", loadCoverage);
  $("faq-refresh").addEventListener("click", loadCards);
  $("faq-status").addEventListener("change", loadCards);
  $("faq-cards").addEventListener("click", (event) => {
    const target = event.target.closest("button[data-action]");
    if (target) reviewCard(target);
  });
  $("explain-form").addEventListener("submit", (event) => runExplain(event, searchBody));
  $("explain-path").addEventListener("input", () => loadSources($("explain-path").value));

  const slider = $("lexical-weight");
  slider.addEventListener("input", () => {
    slider.dataset.touched = "1";
    $("lexical-weight-value").textContent = Number(slider.value).toFixed(2);
  });
  $("fusion").addEventListener("change", () => {
    const method = $("fusion").value;
    const weighted = method !== "" && method !== "rrf"; // the slider weighs RRF's arms only
    slider.disabled = weighted;
    $("lexical-weight-value").textContent = weighted
      ? "n/a (" + method + ")"
      : slider.dataset.touched === "1" ? Number(slider.value).toFixed(2) : "default";
  });

  $("search-form").addEventListener("submit", runSearch);

  const hits = $("hits");
  hits.addEventListener("click", (event) => {
    const item = event.target.closest(".hit");
    if (item) openChunk(item.dataset.chunk, item);
  });
  hits.addEventListener("keydown", (event) => {
    const item = event.target.closest(".hit");
    if (!item) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      openChunk(item.dataset.chunk, item);
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const next = event.key === "ArrowDown" ? item.nextElementSibling : item.previousElementSibling;
      if (next) next.focus();
    }
  });
  const arms = document.querySelector(".arms");
  linkArms(arms);
  arms.addEventListener("click", (event) => {
    const entry = event.target.closest(".arm-entry");
    if (entry) openChunk(entry.dataset.chunk, entry);
  });
  $("debug").addEventListener("close", () => {
    // The close event arrives after the browser has already moved focus back; only
    // restore it when focus was lost, or a key pressed meanwhile would be undone.
    const active = document.activeElement;
    if (state.opener && (!active || active === document.body || $("debug").contains(active))) {
      state.opener.focus();
    }
  });

  if (state.auth && !apiKey()) {
    askForKey("Enter a key to see the collections it covers (ask a maintainer: plait keys create).");
    return;
  }
  await connect(health.defaultCollection);
  $("query").focus();
}

document.addEventListener("DOMContentLoaded", init);
