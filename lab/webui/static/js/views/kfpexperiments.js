// KFP experiments (groups of pipeline runs; Katib's experiments are under #/experiments), as
// the KFP UI lists them, and one experiment: its runs and recurring runs. Read from the KFP
// v2beta1 API (the local backend's). Addresses: #/kfp-experiments and
// #/experiments/details/ID (the link kfp.Client prints).

import { el, enc, link, muted, table, when } from "../dom.js";
import { kfp, serverInfo } from "../data.js";
import { Listing } from "../listing.js";
import { apiRow, runColumns } from "./runs.js";

export const routes = [
  ["kfp-experiments", () => experimentsView()],
  ["kfp-experiments/:id", p => experimentView(p.id)],
  ["experiments/details/:id", p => experimentView(p.id)],
];

const list = new Listing("kfp-experiments", "experiments", { name: "Experiment", created_at: "Created" });
const runs = new Listing("experiment-runs", "runs", { name: "Run", created_at: "Created" });

export function noApi() {
  return [el("h1", {}, "Not on this backend"),
          el("p", {}, "kflab ui answers the KFP API on the local backend. On a cluster, Kubeflow Pipelines " +
                      "has its own UI and API: open them with `kflab open pipelines`.")];
}

async function experimentsView() {
  if (!(await serverInfo()).kfp_api) return noApi();
  const answer = await kfp("experiments", list.query());
  const rows = answer.experiments || [];
  return [el("h1", {}, "KFP experiments"),
          muted("Groups of pipeline runs (kfp.Client's experiment_name). Katib's hyperparameter experiments are under Experiments."),
          list.toolbar(),
          table(list.caption(), [
            list.column("name", e => link(`#/experiments/details/${enc(e.experiment_id)}`, e.display_name)),
            ["Description", e => e.description || ""],
            ["State", e => e.storage_state === "ARCHIVED" ? "archived" : "available"],
            list.column("created_at", e => when(e.created_at)),
            ["Last run", e => when(e.last_run_created_at)],
          ], rows, { empty: list.q ? "no experiment matches" : "none yet" }),
          list.pager(answer.next_page_token || "", answer.total_size)];
}

async function experimentView(id) {
  if (!(await serverInfo()).kfp_api) return noApi();
  const e = await kfp(`experiments/${enc(id)}`);
  const answer = await kfp("runs", { experiment_id: id, ...runs.query() });
  const names = { [e.experiment_id]: e.display_name };
  const rows = (answer.runs || []).map(r => apiRow(r, names));
  let recurring = [];
  try {
    const rr = await kfp("recurringruns", { experiment_id: id, page_size: 100 });
    recurring = rr.recurringRuns || rr.recurring_runs || [];
  } catch { recurring = []; }
  return [el("h1", {}, `KFP experiment ${e.display_name}`),
          el("p", { class: "meta" }, [e.description, `created ${when(e.created_at)}`,
                                      e.storage_state === "ARCHIVED" ? "archived" : "",
                                      `id ${e.experiment_id}`].filter(Boolean).join(" · ")),
          el("h2", {}, "Runs"), runs.toolbar(),
          table(runs.caption(), runColumns(rows, false, false, runs), rows,
                { empty: runs.q ? "no run matches" : "no run yet" }),
          runs.pager(answer.next_page_token || "", answer.total_size),
          el("h2", {}, "Recurring runs"),
          table("Recurring runs of the experiment", [
            ["Recurring run", j => link(`#/recurringrun/details/${enc(j.recurring_run_id)}`, j.display_name)],
            ["Mode", j => j.mode === "ENABLE" ? "enabled" : "disabled"],
            ["Trigger", j => triggerText(j.trigger)], ["Created", j => when(j.created_at)],
          ], recurring)];
}

export function triggerText(trigger) {
  const cron = (trigger || {}).cron_schedule, every = (trigger || {}).periodic_schedule;
  if (cron && cron.cron) return `cron ${cron.cron}`;
  if (every && every.interval_second) return `every ${every.interval_second} s`;
  return "";
}
