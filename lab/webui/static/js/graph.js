// The run graph, as the KFP UI draws it: one box per task, edges from the IR's
// dependentTasks, and every sub-DAG (a sub-pipeline, a dsl.If/Elif/Else condition, an
// ExitHandler's body, a ParallelFor) as a group holding its own tasks, a ParallelFor's group
// holding one group per iteration. Tasks not started yet are drawn too (dashed), from the
// pipeline's graph the run keeps (status.graph). As KFP's grouped graph does, each DAG is
// laid out on its own (dagre, the layout KFP uses) from the inside out, a group sized to what
// it holds, so an edge never crosses into a group.

import { el, svg } from "./dom.js";

const PAD = 14, HEAD = 40, CHAR = 7.4, BOX_H = 46, MAX_ITERATIONS = 24;
const KIND = { dag: "sub-pipeline", condition: "condition", branches: "If / Elif / Else",
               "exit-handler": "exit handler", loop: "ParallelFor" };

export function taskPath(parent, display) { return parent ? `${parent}/${display}` : display; }

const STATIC = { static: true, state: "" };  // a pipeline's graph, not a run's: no states

function stateOf(t) {
  if (!t) return "PENDING";
  if (t.static) return "STATIC";
  return t.cached ? "CACHED" : (t.state || "PENDING");
}

let finished = false;  // the run has ended: a task with no record did not run

function stateText(t) {
  if (!t) return finished ? "did not run" : "not started";
  if (t.static) return "";
  if (t.cached) return "from cache";
  return (t.state || "pending").toLowerCase();
}

// The graph's layers, from the pipeline's graph and the run's tasks (by path).
function build(nodes, parent, suffix, byPath, depth, seen) {
  const layer = { nodes: [], edges: [] };
  for (const s of nodes) {
    const display = s.name + suffix, path = taskPath(parent, display);
    const t = byPath ? byPath.get(path) : STATIC;
    const n = { id: s.name, path, display, kind: s.kind || "task", spec: s, task: t };
    seen.set(path, n);
    if (n.kind === "loop") {
      let count = t && Number.isInteger(t.iterations) ? t.iterations : null;
      if (count === null && s.items) { try { const v = JSON.parse(s.items); if (Array.isArray(v)) count = v.length; } catch { /* unknown */ } }
      const inner = { nodes: [], edges: [] };
      const shown = count === null ? 1 : Math.min(count, MAX_ITERATIONS);
      for (let i = 0; i < shown; i++) {
        const known = count !== null;
        const it = { id: `iteration-${i}`, kind: "iteration", path: null,
                     display: known ? `iteration ${i}` : "iterations (how many: known when it runs)",
                     child: depth < 60 ? build(s.tasks || [], path, known ? `${suffix}.${i}` : `${suffix}.?`, byPath, depth + 1, seen) : null };
        inner.nodes.push(it);
      }
      if (count !== null && count > shown) n.more = count - shown;
      n.count = count;
      n.child = inner;
    } else if (n.kind !== "task") {
      n.child = depth < 60 ? build(s.tasks || [], path, suffix, byPath, depth + 1, seen) : null;
    }
    layer.nodes.push(n);
    for (const d of s.deps || []) layer.edges.push([d, s.name]);
  }
  return layer;
}

// Without a recorded graph (a run from before runs kept one): the tasks in one DAG, the root
// DAG's edges, and the root tasks the edges name that have not started.
function flat(run, seenPaths) {
  const layer = { nodes: [], edges: [] };
  const seen = new Set();
  for (const t of run.tasks) {
    seen.add(t.key);
    const n = { id: t.key, path: t.key, display: t.name, kind: "task", spec: { name: t.name }, task: t };
    seenPaths.set(t.key, n);
    layer.nodes.push(n);
  }
  for (const [a, b] of run.edges || []) {
    for (const n of [a, b]) if (!seen.has(n)) {
      seen.add(n);
      const p = { id: n, path: n, display: n, kind: "task", spec: { name: n }, task: null };
      seenPaths.set(n, p);
      layer.nodes.push(p);
    }
    layer.edges.push([a, b]);
  }
  return layer;
}

function boxSize(n) {
  const title = n.kind === "task" ? n.display : `${KIND[n.kind] || n.kind}: ${n.display}`;
  return Math.max(120, 24 + CHAR * Math.max(title.length, stateText(n.task).length + 2));
}

// Lay out a layer (children first): positions relative to the layer's top left, and its size.
function layout(layer) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 36, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of layer.nodes) {
    if (n.child) {
      const inner = layout(n.child);
      n.width = Math.max(boxSize(n), inner.width + 2 * PAD);
      n.height = HEAD + Math.max(inner.height, 20) + 2 * PAD;
    } else {
      n.width = boxSize(n);
      n.height = BOX_H;
    }
    g.setNode(n.id, { width: n.width, height: n.height });
  }
  for (const [a, b] of layer.edges) if (g.hasNode(a) && g.hasNode(b)) g.setEdge(a, b);
  dagre.layout(g);
  for (const n of layer.nodes) {
    const p = g.node(n.id);
    n.x = p.x - n.width / 2;
    n.y = p.y - n.height / 2;
  }
  layer.lines = g.edges().map(e => g.edge(e).points);
  const { width, height } = g.graph();
  layer.width = Math.max(width || 0, ...layer.nodes.map(n => n.x + n.width));
  layer.height = Math.max(height || 0, ...layer.nodes.map(n => n.y + n.height));
  return layer;
}

function draw(root, layer, ox, oy, ctx) {
  for (const pts of layer.lines) {
    root.append(svg("path", { d: "M" + pts.map(p => `${p.x + ox},${p.y + oy}`).join(" L"),
                              "marker-end": "url(#arrow)", class: "edge" }));
  }
  for (const n of layer.nodes) {
    const x = n.x + ox, y = n.y + oy;
    const state = stateOf(n.task);
    const selected = n.path && n.path === ctx.selected;
    if (n.kind === "iteration") {
      root.append(svg("rect", { x, y, width: n.width, height: n.height, rx: 6, class: "iteration" }));
      root.append(svg("text", { x: x + 10, y: y + 20, class: "group-name" }, n.display));
    } else if (n.child) {
      const title = `${KIND[n.kind] || n.kind}: ${n.display}`;
      const extra = n.kind === "loop" ? (n.count === null ? "" : `${n.count} iteration${n.count === 1 ? "" : "s"}`)
                  : n.spec.reads ? `if ${n.spec.reads}` : "";
      // a link's name is its visible text (WCAG 2.5.3); a drawing that is no link is an image
      const a = svg(ctx.href ? "a" : "g", { href: ctx.href ? ctx.href(n.path) : null, role: ctx.href ? null : "img", class: "group " + n.kind + (selected ? " selected" : ""),
                           "aria-label": ctx.href ? null : `${title}${extra ? "; " + extra : ""}`,
                           ...(selected ? { "aria-current": "true", "data-reveal": "" } : {}) });
      a.append(svg("rect", { x, y, width: n.width, height: n.height, rx: 8, class: `frame ${state}` }));
      a.append(svg("text", { x: x + 10, y: y + 17, class: "group-name" }, title));
      a.append(svg("text", { x: x + 10, y: y + 33, class: "group-state" },
                   [stateText(n.task), extra].filter(Boolean).join(" · ").slice(0, Math.floor(n.width / CHAR) - 2)));
      root.append(a);
    }
    if (n.child) {
      draw(root, n.child, x + PAD, y + HEAD + PAD, ctx);
      if (n.more) root.append(svg("text", { x: x + 10, y: y + n.height - 4, class: "group-state" },
                                   `+ ${n.more} more iterations (in the task table)`));
      continue;
    }
    const a = svg(ctx.href ? "a" : "g", { href: ctx.href ? ctx.href(n.path) : null, role: ctx.href ? null : "img", class: "task" + (selected ? " selected" : ""),
                         "aria-label": ctx.href ? null : n.display,
                         ...(selected ? { "aria-current": "true", "data-reveal": "" } : {}) });
    a.append(svg("rect", { x, y, width: n.width, height: n.height, rx: 6, class: state + (n.task ? "" : " pending") }));
    const sub = [n.spec.exit && "runs at exit", stateText(n.task)].filter(Boolean).join(" · ");
    a.append(svg("text", { x: x + 10, y: y + (sub ? 19 : 28), class: "task-name" }, n.display));
    if (sub) a.append(svg("text", { x: x + 10, y: y + 36, class: "task-state" }, sub));
    root.append(a);
  }
}

// The graph of a run: its layers (from the pipeline's graph the run keeps, else from its
// tasks) and every node by its path, tasks not started included (the side panel's subject).
export function graphModel(run, pipeline = false) {
  finished = ["SUCCEEDED", "FAILED", "CANCELED", "SKIPPED"].includes(run.state);
  const byPath = pipeline ? null : new Map(run.tasks.map(t => [t.key, t]));
  const nodes = new Map();
  const layer = run.graph ? build(run.graph.tasks || [], "", "", byPath, 0, nodes) : flat(run, nodes);
  return { layer, nodes };
}

// The graph of a run page: `selected` the path shown in the side panel, `href(path)` the
// address that selects a task.
export function drawGraph(model, selected, href) {
  const layer = model.layer;
  if (!layer.nodes.length) return el("p", { class: "muted" }, "no task has started yet");
  layout(layer);
  const W = Math.ceil(layer.width) + 20, H = Math.ceil(layer.height) + 20;
  const root = svg("svg", { class: "dag", width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                            role: "group", "aria-label": "Pipeline graph: select a task for its details" });
  const defs = svg("defs"), marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10,
    refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "head" }));
  defs.append(marker);
  root.append(defs);
  draw(root, layer, 10, 10, { selected, href });
  return el("div", { class: "graph-box", "data-keep-scroll": "graph" }, root);
}

export const kindName = k => KIND[k] || k;
