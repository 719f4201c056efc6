// A pipeline run, as the KFP UI's run details page shows it: the run's state, parameters and
// (when it failed) its error at the top; the graph with a side panel for the task selected in
// it (inputs, outputs, artifacts with links, its visualizations, its log); then every task
// in a table and the run's output (every task's visualizations).
// Addresses: #/runs/NAME[/TASK] and #/runs/details/ID[/TASK] (the link kfp.Client prints).

import { duration, el, enc, errorNote, json, link, muted, pairs, show, stateCell, table, when } from "../dom.js";
import { get } from "../data.js";
import { drawGraph, graphModel, kindName } from "../graph.js";
import { artifactItem, visualizations } from "../artifacts.js";

export const routes = [
  ["runs/details/:id", p => runView(p.id, null, true)],
  ["runs/details/:id/:task", p => runView(p.id, p.task, true)],
  ["runs/:run", p => runView(p.run, null, false)],
  ["runs/:run/:task", p => runView(p.run, p.task, false)],
];

function base(key, byId) { return byId ? `#/runs/details/${enc(key)}` : `#/runs/${enc(key)}`; }

function summary(r, key, byId) {
  const bits = [`pipeline ${r.pipeline || "?"}`, `created ${when(r.created_at)}`];
  if (r.duration_s != null) bits.push(`took ${duration(r.duration_s)}`);
  else if (r.state === "RUNNING" || r.state === "PENDING") bits.push("still running");
  bits.push(`${r.tasks.length} task record${r.tasks.length === 1 ? "" : "s"}`);
  const id = byId ? key : r.run_id;  // a KFP API run's id is the API's, not the engine's
  return el("p", { class: "meta" }, bits.join(" · "),
            id ? el("span", { class: "muted" }, ` · run id `, el("code", {}, id)) : null);
}

export async function runView(key, selected, byId) {
  const r = await get("runs/" + enc(key));
  const home = base(key, byId);
  const href = path => `${home}/${enc(path)}`;
  const out = [el("h1", {}, `Run ${r.name} `, stateCell(r.state)), summary(r, key, byId)];
  if (r.error) out.push(el("div", { class: "run-error", role: "alert" },
                           el("strong", {}, `This run ${r.state === "CANCELED" ? "was canceled" : "failed"}: `),
                           el("span", {}, r.error),
                           ...(r.failures || []).map(f => el("div", { class: "failure" },
                             el("p", {}, "The end of ", link(href(f.key), f.key), "'s log:"),
                             el("pre", {}, f.tail.join("\n") || "(no output)")))));
  out.push(el("h2", {}, "Parameters"),
           pairs("Run parameters", Object.entries(r.arguments || {}).map(([k, v]) => [k, show(v)])));
  const model = graphModel(r);
  const panel = selected != null ? await taskPanel(r, key, selected, model, href, home) : [
    el("h2", {}, "Task details"),
    muted("Select a task in the graph (or in the task table below) for its inputs, outputs, artifacts and log.")];
  out.push(el("div", { class: "run-layout" },
    el("section", { class: "graph-section", "aria-labelledby": "graph-h" },
       el("h2", { id: "graph-h" }, "Graph"), legend(), drawGraph(model, selected, href)),
    el("aside", { class: "panel", "aria-label": "Task details", id: "panel" }, ...panel)));
  out.push(el("h2", {}, "Tasks"), table("Tasks of the run", [
    ["Task", t => link(href(t.key), t.key)],
    ["State", t => stateCell(t.state)], ["Duration", t => duration(t.duration_s)],
    ["Cache", t => t.cached ? "reused from cache" : ""], ["Output parameters", t => json(t.parameters)],
    ["Metrics", t => json(t.metrics)], ["Artifacts", t => t.artifacts.map(a => `${a.name} (${a.type})`).join(", ")],
  ], r.tasks));
  const shown = r.tasks.flatMap(t => visualizations(key, t, "h3"));
  if (shown.length) out.push(el("h2", {}, "Run output"), ...shown);
  return out;
}

function legend() {
  return el("p", { class: "legend muted" }, "Boxes are tasks; a framed group is a sub-DAG " +
            "(sub-pipeline, condition, exit handler, ParallelFor and its iterations); a dashed box has not started.");
}

function close(home) { return el("p", {}, link(home, "Close the task details")); }

async function taskPanel(r, key, path, model, href, home) {
  const node = model.nodes.get(path);
  const record = r.tasks.find(t => t.key === path);
  const head = el("h2", { tabindex: "-1", "data-focus": "", id: "panel-h" },
                  `${node && node.kind !== "task" ? kindName(node.kind) : "Task"}: ${node ? node.display : path} `,
                  stateCell(record ? record.state : "not started"));
  const out = [head];
  if (path.includes("/")) out.push(el("p", { class: "muted" }, "in ", el("code", {}, path.slice(0, path.lastIndexOf("/")))));
  if (node && node.kind !== "task") return [...out, ...dagDetails(r, node, href), close(home)];
  if (!record) {
    const deps = (node && node.spec.deps) || [];
    return [...out, muted("This task has not started yet."),
            deps.length ? el("p", {}, "It waits for: ", ...deps.flatMap((d, i) => [i ? ", " : "", d])) : null,
            close(home)];
  }
  const t = await get(`runs/${enc(key)}/tasks/${enc(path)}`);
  const times = [t.start_time && `started ${when(t.start_time)}`, t.duration_s != null && `took ${duration(t.duration_s)}`,
                 t.cached && "its outputs were reused from KFP's cache"].filter(Boolean);
  if (times.length) out.push(el("p", { class: "meta" }, times.join(" · ")));
  if (t.error) out.push(errorNote(t.error));
  out.push(el("h3", {}, "Inputs"));
  if (!t.inputs.available) out.push(muted("Its inputs are not recorded here."));
  else {
    out.push(pairs("Input parameters", Object.entries(t.inputs.parameters).map(([k, v]) => [k, show(v)])));
    if (t.inputs.artifacts.length) out.push(el("ul", { class: "artifacts", "aria-label": "Input artifacts" },
      ...t.inputs.artifacts.map(a => el("li", {}, el("strong", {}, a.name), ` (${a.type || "artifact"})`,
        a.from ? el("span", {}, " from ", link(href(a.from.task), a.from.task), ` / ${a.from.output}`) : null,
        a.uri ? el("div", { class: "uri" }, el("code", {}, a.uri)) : null))));
  }
  out.push(el("h3", {}, "Outputs"),
           pairs("Output parameters", Object.entries(t.parameters).map(([k, v]) => [k, show(v)])));
  if (Object.keys(t.metrics).length) out.push(pairs("Metrics", Object.entries(t.metrics).map(([k, v]) => [k, show(v)])));
  out.push(t.artifacts.length ? el("ul", { class: "artifacts", "aria-label": "Output artifacts" },
                                   ...t.artifacts.map(a => artifactItem(key, t, a)))
                              : muted("No output artifacts."));
  out.push(...visualizations(key, t, "h3"));
  out.push(el("h3", { id: "log" }, `Log of ${t.name}`));
  out.push(t.log === null ? muted("This task ran no process of its own (no log).")
           : el("pre", { class: "log", role: "log", tabindex: "0", "aria-label": `log of ${t.name}`, "data-keep-scroll": "log" },
                t.log.join("\n") || "(no output)"));
  out.push(close(home));
  return out;
}

// A DAG task's details: what it is, its condition or iterations, and how its tasks went.
function dagDetails(r, node, href) {
  const out = [];
  const s = node.spec;
  if (s.reads) out.push(el("p", {}, "Runs if ", el("code", {}, s.reads), "."));
  if (node.kind === "loop") {
    out.push(el("p", {}, node.count === null ? "Its iterations are known when it runs (items from " +
                         (s.items_from || "an input") + ")." : `${node.count} iteration${node.count === 1 ? "" : "s"}` +
                         (s.items ? ` over ${s.items}` : "") + (s.parallelism ? `, at most ${s.parallelism} at once` : "") + "."));
  }
  const inside = r.tasks.filter(t => t.key.startsWith(node.path + "/"));
  const counts = {};
  for (const t of inside) counts[t.state] = (counts[t.state] || 0) + 1;
  out.push(el("h3", {}, "Its tasks"));
  out.push(inside.length ? el("ul", {}, ...inside.map(t => el("li", {}, link(href(t.key), t.key.slice(node.path.length + 1)), " ", stateCell(t.state))))
                         : muted("None has started yet."));
  if (Object.keys(counts).length) out.push(el("p", { class: "muted" }, Object.entries(counts).map(([k, v]) => `${v} ${k.toLowerCase()}`).join(" · ")));
  return out;
}
