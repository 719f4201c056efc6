// Building blocks of every view. Every value from the backend goes into the page through
// textContent or an attribute, never as HTML.

export const SVG = "http://www.w3.org/2000/svg";

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v == null) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === false || c == null) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

export function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

// A table whose columns are [heading, value of a row] (a value: text or a node). A wide table
// scrolls inside its own box, never the page (narrow screens).
export function table(caption, columns, rows, opts = {}) {
  const head = el("tr", {}, ...columns.map(c => el("th", { scope: "col", ...(c[2] || {}) }, c[0])));
  const body = rows.map(r => el("tr", opts.rowAttrs ? opts.rowAttrs(r) : {}, ...columns.map(c => {
    const v = c[1](r);
    return el("td", {}, v instanceof Node ? v : (v ?? ""));
  })));
  if (!rows.length) body.push(el("tr", {}, el("td", { colspan: columns.length }, opts.empty || "none yet")));
  const t = el("table", {}, el("caption", {}, caption), el("thead", {}, head), el("tbody", {}, ...body));
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": caption }, t);
}

// name / value pairs as a definition list (run parameters, a task's inputs)
export function pairs(label, entries) {
  if (!entries.length) return el("p", { class: "muted" }, `${label}: none`);
  return el("dl", { class: "pairs" },
            ...entries.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v instanceof Node ? v : show(v))]));
}

export function show(v) {
  if (v == null) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

export function stateCell(s) { return el("span", { class: "state " + (s || "") }, s || ""); }
export function link(href, text, attrs) { return el("a", { href, ...(attrs || {}) }, text); }
export function errorNote(text) { return el("p", { class: "error", role: "alert" }, text); }
export function muted(text) { return el("p", { class: "muted" }, text); }
export function json(v) { return v && Object.keys(v).length ? JSON.stringify(v) : ""; }
export const enc = encodeURIComponent;

// Durations to the millisecond where they are short, as the KFP UI's run list shows them
// ("0:00:01.234" there; here "1.234 s", "2 min 3.5 s", "1 h 2 min").
export function duration(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return "";
  if (Number.isInteger(seconds) && seconds < 60) return `${seconds} s`;  // from times to the second
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 3 : 2)} s`;
  const m = Math.floor(seconds / 60), s = seconds - 60 * m;
  if (m < 60) return `${m} min ${s.toFixed(1)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function seconds(start, end) {
  if (!start) return null;
  const a = Date.parse(start), b = end ? Date.parse(end) : NaN;
  return Number.isFinite(a) && Number.isFinite(b) ? (b - a) / 1000 : null;
}

// A time as the page's reader reads it: local date and time, seconds shown.
export function when(iso) {
  if (!iso) return "";
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? String(iso) : t.toLocaleString();
}

export function heading(text, ...rest) { return el("h1", {}, text, ...rest); }

// The width the page has for a drawing (a chart fits the screen it is on).
export function roomFor(most) {
  const main = document.getElementById("main");
  const width = (main ? main.clientWidth : window.innerWidth) - 32;
  return Math.max(240, Math.min(most, width));
}
