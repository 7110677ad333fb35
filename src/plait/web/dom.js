// Small DOM and formatting helpers shared by the views.

export const $ = (id) => document.getElementById(id);

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function fmt(value, digits) {
  return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
}

export function rank(value) {
  return value === null || value === undefined ? "—" : "#" + value;
}

export function setStatus(text, isError) {
  setMessage("status", text, isError);
}

export function setMessage(id, text, isError) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("error", Boolean(isError));
}

export function errorText(error) {
  return "Error " + (error.status || "") + ": " + error.message;
}

// An origin as its trail: path › heading › heading (or session › event).
export function originParts(origin) {
  if (!origin) return ["(deleted chunk)"];
  if (origin.kind === "file") return [origin.sourcePath].concat(origin.headingPath || []);
  return ["session " + origin.sessionId].concat(origin.eventId ? ["event " + origin.eventId] : []);
}

export function originText(origin) {
  return originParts(origin).join(" › ");
}

export function originTrail(origin, className) {
  const node = el("p", className || "origin");
  originParts(origin).forEach((part, i) => {
    if (i > 0) node.append(el("span", "sep", " › "));
    node.append(el("span", i === 0 ? "crumb crumb-source" : "crumb", part));
  });
  return node;
}

// Plain text with the [start, end) highlight ranges wrapped in <mark>.
export function marked(text, highlights, className) {
  // The API's offsets count Unicode code points (Python's str), not the UTF-16 units
  // String.slice counts: slice by code point, or each emoji before a match shifts it.
  const chars = Array.from(text);
  const part = (a, b) => chars.slice(a, b).join("");
  const node = el("p", className);
  let at = 0;
  const spans = (highlights || []).slice().sort((a, b) => a[0] - b[0]);
  for (const [start, end] of spans) {
    if (start < at || end > chars.length || end <= start) continue;
    node.append(document.createTextNode(part(at, start)), el("mark", null, part(start, end)));
    at = end;
  }
  node.append(document.createTextNode(part(at)));
  return node;
}

export function table(caption, columns, rows, className) {
  const t = el("table", className || "detail");
  if (caption) t.append(el("caption", null, caption));
  const head = el("thead");
  const tr = el("tr");
  for (const name of columns) {
    const th = el("th", null, name);
    th.setAttribute("scope", "col");
    tr.append(th);
  }
  head.append(tr);
  const body = el("tbody");
  for (const row of rows) {
    const line = el("tr");
    row.forEach((cell, i) => {
      const td = el(i === 0 ? "th" : "td");
      if (i === 0) td.setAttribute("scope", "row");
      if (cell instanceof Node) td.append(cell);
      else td.textContent = cell === null || cell === undefined ? "—" : String(cell);
      line.append(td);
    });
    body.append(line);
  }
  t.append(head, body);
  const wrap = el("div", "table-wrap");
  wrap.tabIndex = 0; // scrollable on a narrow screen: reachable by keyboard
  wrap.setAttribute("role", "region");
  wrap.setAttribute("aria-label", caption || columns.join(", "));
  wrap.append(t);
  return wrap;
}
