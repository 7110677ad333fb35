// Operations: coverage (with embedding progress while a backfill runs) and FAQ review.

import { api, canReview, collectionPath, state } from "./api.js";
import { $, el, errorText, setMessage } from "./dom.js";

let poll = null;
let unchanged = 0;
let lastMissing = null;

function renderProgress(report) {
  const chunks = report.scopes.reduce((n, s) => n + s.chunks, 0);
  const missing = report.scopes.reduce((n, s) => n + s.chunksWithoutVector, 0);
  const box = $("embed-box");
  box.hidden = chunks === 0;
  const progress = $("embed-progress");
  progress.max = Math.max(chunks, 1);
  progress.value = chunks - missing;
  const percent = chunks ? Math.floor(((chunks - missing) * 100) / chunks) : 100;
  $("embed-label").textContent = missing
    ? "Embedding: " + (chunks - missing) + " of " + chunks + " chunks have a vector (" + percent + "%); " + missing + " still without one"
    : "Every one of the " + chunks + " chunks has a vector" + (report.embedderModel ? " (" + report.embedderModel + ")" : "");
  // While vectors are missing and the count moves, a backfill is running: follow it.
  unchanged = missing === lastMissing ? unchanged + 1 : 0;
  lastMissing = missing;
  clearTimeout(poll);
  if (missing > 0 && unchanged < 5) poll = setTimeout(loadCoverage, 2000);
}

export async function loadCoverage() {
  const rows = $("coverage-rows");
  const collection = $("collection").value;
  if (!collection) return;
  try {
    const report = await api("GET", collectionPath("/coverage"));
    if ($("collection").value !== collection) return; // another collection was chosen meanwhile
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
    const roots = $("coverage-roots");
    roots.replaceChildren();
    for (const root of report.roots || []) {
      const skipped = (root.skipped || []).length;
      const text = root.kind + " " + root.path + (root.ref ? "@" + root.ref : "") + ": " +
        (root.available ? (root.sourcesPresent === null ? "" : root.sourcesPresent + " sources present") : "unavailable — " + (root.reason || "")) +
        (skipped ? "; " + skipped + " skipped when indexing" : "");
      roots.append(el("li", "root", text));
    }
    renderProgress(report);
    setMessage("coverage-message", report.scopes.length ? "" : "Nothing indexed in this collection yet.", false);
  } catch (error) {
    if ($("collection").value !== collection) return;
    rows.replaceChildren();
    setMessage("coverage-message", errorText(error), true);
  }
}

function button(className, text, action, label) {
  const node = el("button", className, text);
  node.type = "button";
  node.dataset.action = action;
  node.setAttribute("aria-label", label);
  return node;
}

function renderCard(card) {
  const item = el("li", "card card-" + card.status);
  item.dataset.id = card.id;
  item.append(el("p", "card-question", card.question));
  item.append(el("p", "card-answer", card.answer));
  const foot = el("div", "card-foot");
  foot.append(el("span", "card-status", card.status));
  foot.append(el("span", "help", card.sources.length + " source chunk" + (card.sources.length === 1 ? "" : "s") + " · " + card.mode));
  if (canReview()) {
    for (const action of ["approve", "reject"]) {
      const word = action === "approve" ? "Approve" : "Reject";
      const node = button("card-" + action, word, action, word + " card: " + card.question);
      node.disabled = card.status === (action === "approve" ? "approved" : "rejected");
      foot.append(node);
    }
    foot.append(button("card-edit secondary", "Edit", "edit", "Edit card: " + card.question));
  }
  item.append(foot);
  return item;
}

function editForm(item, card) {
  const form = el("form", "card-form");
  const id = "edit-" + card.id;
  const q = el("textarea", "edit-question");
  q.id = id + "-q";
  q.value = card.question;
  q.rows = 2;
  const a = el("textarea", "edit-answer");
  a.id = id + "-a";
  a.value = card.answer;
  a.rows = 5;
  const ql = el("label", null, "Question");
  ql.htmlFor = q.id;
  const al = el("label", null, "Answer");
  al.htmlFor = a.id;
  const save = el("button", "card-save", "Save");
  save.type = "submit";
  const cancel = el("button", "card-cancel secondary", "Cancel");
  cancel.type = "button";
  form.append(ql, q, al, a, save, cancel);
  cancel.addEventListener("click", () => {
    const fresh = renderCard(card);
    item.replaceWith(fresh);
    fresh.querySelector(".card-edit").focus();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const edited = await api("PATCH", collectionPath("/faq/" + encodeURIComponent(card.id)), { question: q.value, answer: a.value });
      state.cards.set(edited.id, edited);
      const fresh = renderCard(edited);
      item.replaceWith(fresh);
      fresh.querySelector(".card-edit").focus();
      setMessage("faq-message", "Card edited: " + edited.question + (edited.note ? " (" + edited.note + ")" : ""), false);
    } catch (error) {
      setMessage("faq-message", errorText(error), true);
    }
  });
  item.replaceChildren(form);
  q.focus();
}

export async function loadCards() {
  const list = $("faq-cards");
  const collection = $("collection").value;
  if (!collection) return;
  const status = $("faq-status").value;
  $("faq-role").textContent = canReview() ? "" : "Reviewing cards needs a maintainer key; this key is a " + (state.me ? state.me.role : "reader") + " (it sees approved cards only).";
  try {
    const cards = await api("GET", collectionPath("/faq" + (status ? "?status=" + encodeURIComponent(status) : "")));
    if ($("collection").value !== collection || $("faq-status").value !== status) return; // a newer list is coming
    state.cards = new Map(cards.map((c) => [c.id, c]));
    list.replaceChildren(...cards.map(renderCard));
    setMessage("faq-message", cards.length + " card" + (cards.length === 1 ? "" : "s"), false);
  } catch (error) {
    list.replaceChildren();
    setMessage("faq-message", errorText(error), true);
  }
}

export async function reviewCard(target) {
  const item = target.closest(".card");
  const action = target.dataset.action;
  if (action === "edit") {
    editForm(item, state.cards.get(item.dataset.id));
    return;
  }
  try {
    const updated = await api("POST", collectionPath("/faq/" + encodeURIComponent(item.dataset.id) + "/" + action));
    state.cards.set(updated.id, updated);
    const fresh = renderCard(updated);
    item.replaceWith(fresh);
    fresh.querySelector("button:not([disabled])").focus();
    setMessage("faq-message", "Card " + (action === "approve" ? "approved" : "rejected") + ": " + updated.question, false);
  } catch (error) {
    setMessage("faq-message", errorText(error), true);
  }
}
