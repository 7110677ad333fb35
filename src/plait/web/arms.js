// Both arms side by side: the lexical list, the dense list and the fused list, each chunk
// in one colour in all three, with its place in the others written next to it.

import { state } from "./api.js";
import { $, el, originParts } from "./dom.js";

const COLOURS = 10;

function short(origin) {
  const parts = originParts(origin);
  const file = parts[0].split("/").pop();
  return parts.length > 1 ? file + " › " + parts[parts.length - 1] : file;
}

function where(value) {
  return value === null || value === undefined ? "—" : "#" + value;
}

// The tag that makes a lexical rescue or a dense paraphrase match visible at a glance.
function rescue(entry, k) {
  if (!entry.returned) return null;
  const lexTop = entry.lexicalRank !== null && entry.lexicalRank <= k;
  const denseTop = entry.denseRank !== null && entry.denseRank <= k;
  if (lexTop && !denseTop) return entry.denseRank === null ? "lexical only" : "lexical rescue";
  if (denseTop && !lexTop) return entry.lexicalRank === null ? "dense match, no shared word" : "dense rescue";
  return null;
}

function entryNode(entry, arm, colours, k) {
  const item = el("li", "arm-item");
  const button = el("button", "arm-entry " + (colours.has(entry.chunkId) ? "c" + colours.get(entry.chunkId) : "c-none"));
  button.type = "button";
  button.dataset.chunk = entry.chunkId;
  const top = el("span", "arm-top");
  top.append(el("span", "arm-rank", "#" + entry.rank));
  top.append(el("span", "arm-name", short(entry.origin)));
  button.append(top);
  let moves;
  if (arm === "fused") moves = "lexical " + where(entry.lexicalRank) + " · dense " + where(entry.denseRank);
  else moves = "→ fused " + where(entry.fusedRank) + " · " + (arm === "lexical" ? "dense " + where(entry.denseRank) : "lexical " + where(entry.lexicalRank));
  const move = el("span", "arm-move", moves);
  button.append(move);
  const tags = el("span", "arm-tags");
  if (entry.returned) tags.append(el("span", "tag tag-returned", "in results"));
  const tag = arm === "fused" ? rescue(entry, k) : null;
  if (tag) tags.append(el("span", "tag tag-rescue", tag));
  if (tags.childNodes.length) button.append(tags);
  item.append(button);
  return item;
}

export function clearArms(message) {
  state.arms = null;
  for (const id of ["arm-lexical", "arm-dense", "arm-fused"]) $(id).replaceChildren();
  if (message) $("arms-message").textContent = message;
}

export function renderArms(lists) {
  state.arms = lists;
  // Colours follow the fused order, then chunks only an arm shows.
  const colours = new Map();
  for (const entry of [].concat(lists.fused, lists.lexical, lists.dense)) {
    if (!colours.has(entry.chunkId) && colours.size < COLOURS) colours.set(entry.chunkId, colours.size);
  }
  const k = lists.offset + lists.k;
  for (const arm of ["lexical", "dense", "fused"]) {
    const list = $("arm-" + arm);
    list.replaceChildren(...lists[arm].map((entry) => entryNode(entry, arm, colours, k)));
    if (!lists[arm].length) {
      const why = arm === "dense" && !lists.vectorAvailable
        ? "The dense arm did not run: " + (lists.vectorUnavailableReason || "no vectors") + "."
        : "No candidates.";
      list.append(el("li", "arm-empty", why));
    }
  }
  $("arms-message").textContent =
    "Top " + lists.limit + " of each: lexical " + lists.lexicalCandidates + " candidates, dense " + lists.denseCandidates +
    " (each arm fetched " + lists.depth + "); the cut keeps the fused top " + k +
    ". A chunk keeps its colour in all three lists; focus or hover one to see it in the others.";
}

// Focus or hover on an entry marks the same chunk in every list.
export function linkArms(container) {
  const mark = (chunk) => {
    for (const node of container.querySelectorAll(".arm-entry")) node.classList.toggle("linked", chunk !== null && node.dataset.chunk === chunk);
  };
  for (const type of ["mouseover", "focusin"]) {
    container.addEventListener(type, (event) => {
      const entry = event.target.closest(".arm-entry");
      mark(entry ? entry.dataset.chunk : null);
    });
  }
  container.addEventListener("mouseleave", () => mark(null));
  container.addEventListener("focusout", () => mark(null));
}
