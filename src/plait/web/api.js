// The HTTP API client and where the API key is kept. Every value from the server is
// written to the page with textContent (dom.js); the only HTML the page inserts is the
// chunk rendering the server sanitised (nh3).

const KEY_STORAGE = "plait.apiKey";

export const state = {
  auth: false,
  me: null, // {auth, role, collection} of the current key
  result: null, // the last search result
  arms: null, // the last arm lists
  opener: null, // what opened the debug dialog (focus returns there)
  sources: new Map(), // source id -> SourceEntry, for the explain form
  cards: new Map(), // FAQ card id -> card, as last listed
  lastBody: null, // the last search request, which explain repeats
};

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || localStorage.getItem(KEY_STORAGE) || "";
}

// In this tab's session storage unless asked to remember it (local storage).
export function saveKey(token, remember) {
  sessionStorage.removeItem(KEY_STORAGE);
  localStorage.removeItem(KEY_STORAGE);
  (remember ? localStorage : sessionStorage).setItem(KEY_STORAGE, token);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_STORAGE);
  localStorage.removeItem(KEY_STORAGE);
}

export function keyRemembered() {
  return Boolean(localStorage.getItem(KEY_STORAGE));
}

export async function api(method, path, body) {
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

export function collectionPath(suffix) {
  return "/v1/collections/" + encodeURIComponent(document.getElementById("collection").value) + suffix;
}

// True when the current key may review FAQ cards (maintainer or admin).
export function canReview() {
  const me = state.me;
  return Boolean(me && (me.role === "maintainer" || me.role === "admin"));
}
