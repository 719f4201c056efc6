// The runs list, as the KFP UI's: search by name, sort by a column, pages of 10 to 100, and
// runs picked to compare. On the local backend it reads the KFP v2beta1 API's ListRuns
// (filter, sort_by, page_size, page_token: what the KFP UI sends); on a cluster, whose KFP
// API is Kubeflow's own, the backend's run records, searched and paged in the page.

import { duration, el, enc, link, muted, seconds, stateCell, table, when } from "../dom.js";
import { get, kfp, serverInfo } from "../data.js";
import { redraw } from "../router.js";
import { Listing } from "../listing.js";

export const routes = [["runs", () => runsView()]];

const list = new Listing("runs", "runs", { name: "Run", created_at: "Created" });
const picked = new Set();  // run ids (local API) or names (cluster) to compare

function compareBar() {
  const ids = [...picked];
  const bar = el("div", { class: "toolbar" });
  if (ids.length >= 2) bar.append(link(`#/compare?runlist=${ids.map(enc).join(",")}`,
                                       `Compare the ${ids.length} selected runs`, { class: "button", id: "compare-go" }));
  else bar.append(el("span", { class: "muted" }, "Select two or more runs (Compare column) to compare their parameters and metrics. "));
  if (ids.length) {
    const clear = el("button", { type: "button", id: "compare-clear" }, "Clear selection");
    clear.addEventListener("click", () => { picked.clear(); redraw(); });
    bar.append(" ", clear);
  }
  return bar;
}

function pick(id, name) {
  const box = el("input", { type: "checkbox", id: `pick-${id}`, "aria-label": `select ${name} to compare`,
                            checked: picked.has(id) });
  box.addEventListener("change", () => { if (box.checked) picked.add(id); else picked.delete(id); redraw(); });
  return box;
}

// experiment id -> name, for the Experiment column
export async function experimentNames() {
  try {
    return Object.fromEntries(((await kfp("experiments", { page_size: 200 })).experiments || [])
      .map(e => [e.experiment_id, e.display_name]));
  } catch { return {}; }
}

export function apiRow(r, names) {
  return { id: r.run_id, name: r.display_name, state: r.state, created_at: r.created_at,
           duration_s: seconds(r.created_at, r.finished_at),
           tasks: ((r.run_details || {}).task_details || []).length,
           experiment: r.experiment_id ? { id: r.experiment_id, name: names[r.experiment_id] || r.experiment_id } : null,
           storage: r.storage_state, href: `#/runs/details/${enc(r.run_id)}` };
}

async function fromApi() {
  const answer = await kfp("runs", list.query());
  const names = await experimentNames();
  return { rows: (answer.runs || []).map(r => apiRow(r, names)), next: answer.next_page_token || "",
           total: answer.total_size };
}

async function fromRecords() {
  let rows = (await get("runs")).map(r => ({ id: r.name, name: r.name, state: r.state, created_at: r.created_at,
    duration_s: r.duration_s, tasks: r.tasks, pipeline: r.pipeline, href: `#/runs/${enc(r.name)}` }));
  if (list.q) rows = rows.filter(r => r.name.toLowerCase().includes(list.q.toLowerCase()));
  const key = list.sort === "name" ? "name" : "created_at";
  rows.sort((a, b) => String(a[key] ?? "").localeCompare(String(b[key] ?? "")) * (list.desc ? -1 : 1));
  const start = list.page * list.size;
  const next = start + list.size < rows.length ? String(start + list.size) : "";
  return { rows: rows.slice(start, start + list.size), next, total: rows.length };
}

export function runColumns(rows, withExperiment, pipelineColumn, sortable) {
  return [
    sortable ? sortable.column("name", r => link(r.href, r.name)) : ["Run", r => link(r.href, r.name)],
    ["State", r => el("span", {}, stateCell(r.state), r.storage === "ARCHIVED" ? " (archived)" : "")],
    ...(withExperiment ? [["Experiment", r => r.experiment ? link(`#/experiments/details/${enc(r.experiment.id)}`, r.experiment.name) : ""]] : []),
    ...(pipelineColumn ? [["Pipeline", r => r.pipeline]] : []),
    ["Tasks", r => r.tasks],
    sortable ? sortable.column("created_at", r => when(r.created_at)) : ["Created", r => when(r.created_at)],
    ["Duration", r => duration(r.duration_s)],
  ];
}

export async function runsView() {
  const info = await serverInfo();
  const { rows, next, total } = info.kfp_api ? await fromApi() : await fromRecords();
  const columns = [["Compare", r => pick(r.id, r.name)], ...runColumns(rows, info.kfp_api, !info.kfp_api, list)];
  return [el("h1", {}, "Pipeline runs"),
          info.kfp_api ? null : muted("On this backend runs are read from kflab's records (KFP's own UI: kflab open pipelines)."),
          list.toolbar(), compareBar(),
          table(list.caption(), columns, rows, { empty: list.q ? "no run matches" : "none yet" }),
          list.pager(next, total)];
}
