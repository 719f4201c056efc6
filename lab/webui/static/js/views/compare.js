// Runs side by side, as the KFP UI's compare page (#/compare?runlist=ID,ID): an overview,
// the run parameters (a row per parameter, a column per run, differing values marked), the
// scalar metrics each run's tasks logged (dsl.Metrics: log_metric) and a parallel
// coordinates chart over both, a line per run.

import { duration, el, enc, link, muted, show, stateCell, table, when } from "../dom.js";
import { get } from "../data.js";
import { parallelCoordinates } from "../charts.js";

export const routes = [["compare", (_, q) => compareView(q)]];

const MAX_RUNS = 10;

function metricsOf(r) {
  const out = {};
  for (const t of r.tasks) {
    for (const [k, v] of Object.entries(t.metrics || {})) {
      if (k === "display_name") continue;
      out[`${t.key} · ${k}`] = v;
    }
  }
  return out;
}

function byName(runs, pick) {
  const names = [...new Set(runs.flatMap(r => Object.keys(pick(r))))].sort();
  return names.map(n => ({ name: n, values: runs.map(r => pick(r)[n]) }));
}

function sideBySide(caption, first, runs, rows) {
  const cols = [[first, row => el("span", {}, row.name, row.differs ? el("span", { class: "differs" }, " (differs)") : null)],
                ...runs.map((r, i) => [r.name, row => show(row.values[i])])];
  for (const row of rows) row.differs = new Set(row.values.map(v => JSON.stringify(v ?? null))).size > 1;
  return table(caption, cols, rows, { empty: "none", rowAttrs: row => row.differs ? { class: "differs-row" } : {} });
}

export async function compareView(query) {
  const ids = (query.get("runlist") || "").split(",").map(s => s.trim()).filter(Boolean).slice(0, MAX_RUNS);
  const out = [el("h1", {}, "Compare runs")];
  if (ids.length < 2) return [...out, muted("Pick two or more runs in the runs list (the Compare column), then Compare."),
                              el("p", {}, link("#/runs", "Back to the runs"))];
  const runs = await Promise.all(ids.map(id => get("runs/" + enc(id))));
  out.push(el("p", {}, link("#/runs", "Back to the runs"), ` · ${runs.length} runs`));
  out.push(el("h2", {}, "Overview"), table("The runs compared", [
    ["Run", r => link(`#/runs/${enc(r.name)}`, r.name)], ["State", r => stateCell(r.state)],
    ["Pipeline", r => r.pipeline], ["Created", r => when(r.created_at)], ["Duration", r => duration(r.duration_s)],
  ], runs));
  const params = byName(runs, r => r.arguments || {});
  const metrics = byName(runs, metricsOf);
  out.push(el("h2", {}, "Parameters"), sideBySide("Run parameters, a column per run", "Parameter", runs, params));
  out.push(el("h2", {}, "Scalar metrics"), sideBySide("Metrics the runs' tasks logged, a column per run", "Task · metric", runs, metrics));
  const axes = [...params, ...metrics].map(row => ({ label: row.name, value: r => row.values[runs.indexOf(r)] }));
  out.push(el("h2", {}, "Parallel coordinates"));
  if (axes.length < 2) out.push(muted("Two or more parameters or metrics are needed for this chart."));
  else out.push(parallelCoordinates(runs, axes, {
    name: r => r.name, legend: true,
    label: `Parallel coordinates of ${runs.length} runs over ${axes.map(a => a.label).join(", ")}; ` +
           "the tables above have every value",
  }));
  return out;
}
