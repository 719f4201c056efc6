// The hash router: `#/VIEW/...` picks a view module's route; the links kfp.Client prints
// (`#/runs/details/ID`, `#/experiments/details/ID`, `#/pipelines/details/ID`) are routes too.
// A view is drawn again when the server's event stream says the records changed; a redraw
// that brings nothing new leaves the page (and the keyboard focus) alone.

import { el, errorNote } from "./dom.js";
import { Missing, Refused, drawnFrom, startDraw } from "./data.js";

const routes = [];  // [{ parts: ["runs", ":id"], view }], in the order added: first match wins

// pattern: "runs/details/:id/*rest" (":name" one segment, "*name" the rest, maybe none)
export function route(pattern, view) {
  routes.push({ parts: pattern.split("/"), view });
}

export function parse(hash) {
  const raw = (hash || "").replace(/^#\/?/, "") || "runs";
  const [path, qs] = raw.split("?", 2);
  const segs = path.split("/").filter(s => s !== "").map(s => {
    try { return decodeURIComponent(s); } catch { return s; }
  });
  return { segs, query: new URLSearchParams(qs || "") };
}

export function match(segs) {
  for (const r of routes) {
    const params = {};
    let ok = true, i = 0;
    for (; i < r.parts.length; i++) {
      const p = r.parts[i];
      if (p.startsWith("*")) { params[p.slice(1)] = segs.slice(i); i = segs.length; break; }
      if (i >= segs.length) { ok = false; break; }
      if (p.startsWith(":")) params[p.slice(1)] = segs[i];
      else if (p !== segs[i]) { ok = false; break; }
    }
    if (ok && i === segs.length) return { view: r.view, params };
  }
  return null;
}

const main = () => document.getElementById("main");
let shown = null;           // what the page shows: the hash and the answers it was drawn from
let moved = false;          // the hash changed: the new view takes the focus

function stalePage() {
  // The tab's token is not this server's: kflab ui was restarted (a new token), or this tab
  // belongs to another `kflab ui` on this port. Say so, instead of a bare 403.
  return [el("h1", {}, "This tab is no longer connected"),
          el("p", {}, "kflab ui refused this page's token. The server behind this address was " +
                      "restarted (each start makes a new token), or another kflab ui now runs on " +
                      "this port."),
          el("p", {}, "Open the URL that `kflab ui` printed in its terminal (it carries the token); " +
                      "this tab then works again.")];
}

async function render() {
  const { segs, query } = parse(location.hash);
  const found = match(segs);
  let nodes;
  startDraw();
  try {
    nodes = found ? await found.view(found.params, query)
                  : [el("h1", {}, "No such view"), el("p", {}, `Nothing is at #/${segs.join("/")}.`)];
  } catch (err) {
    nodes = err instanceof Refused ? stalePage()
          : err instanceof Missing ? [el("h1", {}, "Not found"), errorNote(err.message)]
          : [el("h1", {}, "Could not draw this view"), errorNote(String(err.message || err))];
    if (err instanceof Refused) { stale = true; stopStream(); }
  }
  const stamp = document.getElementById("updated");
  if (stamp) stamp.textContent = "updated " + new Date().toLocaleTimeString();
  const key = location.hash + drawnFrom();
  if (key === shown) return;
  shown = key;
  const m = main();
  // a redraw keeps the keyboard focus: the same link (or log) in the new page gets it back
  const had = m.contains(document.activeElement) ? document.activeElement : null;
  const href = had && had.getAttribute("href"), label = had && had.getAttribute("aria-label");
  const id = had && had.id;
  const scroll = [...m.querySelectorAll("[data-keep-scroll]")].map(n => [n.dataset.keepScroll, n.scrollTop, n.scrollLeft]);
  m.replaceChildren(...nodes.filter(n => n != null && n !== false));
  for (const [k, top, left] of scroll) {
    const n = m.querySelector(`[data-keep-scroll="${CSS.escape(k)}"]`);
    if (n) { n.scrollTop = top; n.scrollLeft = left; }
  }
  m.setAttribute("data-view", segs.join("/"));
  document.title = (m.querySelector("h1")?.textContent || "kflab") + " · kflab";
  markNav(segs);
  if (moved) {
    moved = false;
    // a selected node (a task in the graph) is brought into its scrolling box's view
    for (const n of m.querySelectorAll("[data-reveal]")) reveal(n);
    const target = m.querySelector("[data-focus]");
    if (target) { target.focus({ preventScroll: false }); return; }
  }
  const back = id ? document.getElementById(id)
             : href ? m.querySelector(`[href="${CSS.escape(href)}"]`)
             : label ? m.querySelector(`[aria-label="${CSS.escape(label)}"]`) : null;
  if (back) {
    back.focus({ preventScroll: true });
    if (back.tagName === "INPUT" && typeof back.value === "string" && back.type !== "checkbox") {
      try { back.setSelectionRange(back.value.length, back.value.length); } catch { /* no caret */ }
    }
  }
}

function reveal(node) {
  const box = node.closest("[data-keep-scroll]");
  if (!box) return;
  const a = node.getBoundingClientRect(), b = box.getBoundingClientRect();
  box.scrollLeft += (a.left + a.width / 2) - (b.left + b.width / 2);
  box.scrollTop += (a.top + a.height / 2) - (b.top + b.height / 2);
}

function markNav(segs) {
  const first = segs[0] === "experiments" && segs[1] === "details" ? "kfp-experiments" : segs[0];
  const section = { compare: "runs", recurringrun: "recurringruns" }[first] || first;
  for (const a of document.querySelectorAll("header nav a")) {
    if (a.getAttribute("href") === `#/${section}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

let busy = false, again = false;

export async function refresh() {
  // one render at a time; a change that comes during one is drawn right after it
  if (busy) { again = true; return; }
  busy = true;
  try { await render(); } finally { busy = false; }
  if (again) { again = false; refresh(); }
}

// The view asks for a redraw now (a search typed, a page of a list turned).
export function redraw() { shown = null; refresh(); }

let stream = null, timer = null, stale = false;

function stopStream() {
  if (stream) { stream.close(); stream = null; }
  if (timer) { clearInterval(timer); timer = null; }
}

export function listen() {
  // one stream per page, kept across views; the browser reconnects it by itself (retry: 2 s).
  // A browser without EventSource polls every 2 s instead.
  if (!window.EventSource) { timer = setInterval(refresh, 2000); return; }
  stream = new EventSource("/events");
  stream.addEventListener("change", refresh);
  stream.addEventListener("ready", refresh);  // also after a reconnect: catch up
  stream.onerror = () => {
    const stamp = document.getElementById("updated");
    if (stamp) stamp.textContent = "not live: reconnecting to kflab ui…";
    // the browser gives up on a stream the server refused (403: a restarted server's new
    // token): draw the view again, which then says what to do
    // (a 503, too many pages open, is tried again in 10 s)
    if (stream && stream.readyState === EventSource.CLOSED) {
      stream = null;
      redraw();
      setTimeout(() => { if (!stale && !stream) listen(); }, 10000);
    }
  };
}

export function start() {
  window.addEventListener("hashchange", () => { shown = null; moved = true; refresh(); });
  refresh();
  listen();
}
