// Charts: line charts by uPlot (vendored, MIT: docs/ui.md), parallel coordinates as plain SVG
// (docs/ui.md says why no library). Colours come from the page's theme (light or dark, as the
// system says), read when a chart is drawn; each chart carries its values as text too.

import { el, roomFor, svg } from "./dom.js";

export function colour(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#555";
}

function axis(label) {
  return { label, stroke: colour("--fg"), grid: { stroke: colour("--grid") }, ticks: { stroke: colour("--grid") } };
}

// uPlot measures nothing itself: draw once the box is in the page (the next frame)
function later(opts, data, box) { requestAnimationFrame(() => { if (box.isConnected) new uPlot(opts, data, box); }); }

// objective over trials, and the best so far
export function objectiveChart(values, label, goal) {
  const xs = values.map((_, i) => i + 1);
  const better = goal === "maximize" ? Math.max : Math.min;
  const best = values.map((_, i) => better(...values.slice(0, i + 1)));
  const box = el("div", { class: "chart", role: "img",
                          "aria-label": `${label} over trials: ${values.join(", ")}; best ${best.at(-1)}` });
  const opts = {
    width: roomFor(560), height: 260, legend: { show: false }, cursor: { show: false },
    scales: { x: { time: false } },
    axes: [{ ...axis("trial"), incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500] }, axis(label)],
    series: [{}, { label, stroke: colour("--accent"), width: 2, points: { size: 7 } },
             { label: "best so far", stroke: colour("--ok"), width: 1.5, dash: [6, 4] }],
  };
  later(opts, [xs, values, best], box);
  return box;
}

// KFP's ROCCurve viewer: x false positive rate, y true positive rate (recall), both 0..1,
// a dashed diagonal. The points, with their thresholds, also as a table.
export function rocChart(points, name) {
  const xs = [...new Set([0, ...points.map(p => p.fpr), 1])].sort((a, b) => a - b);
  const at = new Map(points.map(p => [p.fpr, p.tpr]));  // the last point of a repeated fpr
  const ys = xs.map(x => at.has(x) ? at.get(x) : null);
  const box = el("div", { class: "chart roc", role: "img",
                          "aria-label": `ROC curve of ${name}: ` + points.map(p => `fpr ${p.fpr} tpr ${p.tpr}`).join(", ") });
  const opts = {
    width: roomFor(420), height: 320, legend: { show: false }, cursor: { show: false },
    scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
    axes: [axis("fpr (false positive rate)"), axis("tpr (true positive rate)")],
    series: [{}, { label: "ROC", stroke: colour("--accent"), width: 2, spanGaps: true, points: { size: 5 } },
             { label: "chance", stroke: colour("--muted"), width: 1, dash: [4, 4], points: { show: false } }],
  };
  later(opts, [xs, ys, xs], box);
  const rows = points.map(p => el("tr", {}, el("td", {}, p.threshold), el("td", {}, p.fpr), el("td", {}, p.tpr)));
  const details = el("details", {}, el("summary", {}, "ROC points"),
    el("table", {}, el("caption", {}, `ROC points of ${name}`),
       el("thead", {}, el("tr", {}, ...["threshold", "fpr", "tpr"].map(h => el("th", { scope: "col" }, h)))),
       el("tbody", {}, ...rows)));
  return [box, details];
}

const fmt = v => typeof v === "number" ? Number(v.toPrecision(4)).toString() : String(v ?? "");

// Parallel coordinates: one vertical axis per column (a parameter, a metric), one line per
// row (a trial, a run). A numeric axis scales linearly from its least to its greatest value,
// another spaces its values evenly. `axes`: [{label, value(row)}]; `strong(row)`: drawn
// thick and on top (the best trial); `name(row)`: the line's title.
export function parallelCoordinates(rows, axes, { strong = () => false, name = () => "", label = "", legend = false } = {}) {
  const H = 280, top = 36, bottom = 28, left = 80;
  const W = Math.max(360, 140 * axes.length);
  const step = (W - 2 * left) / Math.max(1, axes.length - 1);
  const mid = (top + H - bottom) / 2;
  const scaled = axes.map(a => {
    const vals = rows.map(a.value).filter(v => v !== undefined && v !== null && v !== "");
    const numeric = vals.length > 0 && vals.every(v => typeof v !== "boolean" && Number.isFinite(Number(v)));
    if (numeric) {
      const nums = vals.map(Number), lo = Math.min(...nums), hi = Math.max(...nums);
      return { ...a, y: v => (v === undefined || v === null || v === "") ? null
                           : hi === lo ? mid : H - bottom - (Number(v) - lo) / (hi - lo) * (H - bottom - top),
               ticks: hi === lo ? [lo] : [lo, (lo + hi) / 2, hi] };
    }
    const cats = [...new Set(vals.map(String))].sort();
    return { ...a, y: v => (v === undefined || v === null || v === "") ? null
                         : cats.length < 2 ? mid : H - bottom - cats.indexOf(String(v)) / (cats.length - 1) * (H - bottom - top),
             ticks: cats };
  });
  const root = svg("svg", { class: "parcoords", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
  const line = (r, cls) => {
    const pts = scaled.map((a, i) => [left + i * step, a.y(a.value(r))]).filter(p => p[1] !== null);
    const pl = svg("polyline", { class: legend ? "run" : cls, points: pts.map(p => p.join(",")).join(" "),
                                 stroke: legend ? PALETTE[rows.indexOf(r) % PALETTE.length] : null });
    const t = name(r);
    if (t) pl.append(svg("title", {}, t));
    return pl;
  };
  for (const r of rows) if (!strong(r)) root.append(line(r, "trial"));
  for (const r of rows) if (strong(r)) root.append(line(r, "trial best"));  // on top
  scaled.forEach((a, i) => {
    const x = left + i * step;
    root.append(svg("line", { class: "axis", x1: x, x2: x, y1: top, y2: H - bottom }));
    root.append(svg("text", { x, y: top - 14, "text-anchor": "middle", class: "axis-name" }, a.label));
    for (const v of a.ticks) root.append(svg("text", { x: x - 6, y: a.y(v) + 4, "text-anchor": "end" }, fmt(v)));
  });
  const box = el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "parallel coordinates chart" }, root);
  if (!legend) return box;
  const key = el("ul", { class: "legend-list", "aria-label": "line colours" }, ...rows.map((r, i) => {
    const sw = svg("svg", { width: 18, height: 10, "aria-hidden": "true" });
    sw.append(svg("rect", { width: 18, height: 10, fill: PALETTE[i % PALETTE.length] }));
    return el("li", {}, sw, " ", name(r));
  }));
  return el("div", {}, box, key);
}

// Ten line colours told apart on a light and a dark background (Okabe-Ito, and four more).
const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#d55e00", "#56b4e9", "#8c6d31",
                 "#7f7f7f", "#b07aa1", "#2ca02c"];
