// Recurring runs (KFP's "jobs": a pipeline started on a cron or an interval while `kflab ui`
// runs), as the KFP UI lists them, and one: its trigger, limits, parameters and the runs it
// started. Read from the KFP v2beta1 API. Addresses: #/recurringruns and
// #/recurringrun/details/ID (the KFP UI's).

import { el, enc, link, muted, pairs, show, table, when } from "../dom.js";
import { kfp, serverInfo } from "../data.js";
import { Listing } from "../listing.js";
import { noApi, triggerText } from "./kfpexperiments.js";
import { apiRow, experimentNames, runColumns } from "./runs.js";

export const routes = [
  ["recurringruns", () => recurringView()],
  ["recurringrun/details/:id", p => oneView(p.id)],
];

const list = new Listing("recurring", "recurring runs", { name: "Name", created_at: "Created" });

function items(answer) { return answer.recurringRuns || answer.recurring_runs || []; }

async function recurringView() {
  if (!(await serverInfo()).kfp_api) return noApi();
  const answer = await kfp("recurringruns", list.query());
  const names = await experimentNames();
  return [el("h1", {}, "Recurring runs"),
          muted("Pipelines started on a schedule while kflab ui runs (kfp.Client().create_recurring_run)."),
          list.toolbar(),
          table(list.caption(), [
            list.column("name", j => link(`#/recurringrun/details/${enc(j.recurring_run_id)}`, j.display_name)),
            ["Mode", j => j.mode === "ENABLE" ? "enabled" : "disabled"],
            ["Trigger", j => triggerText(j.trigger)],
            ["Experiment", j => j.experiment_id ? link(`#/experiments/details/${enc(j.experiment_id)}`, names[j.experiment_id] || j.experiment_id) : ""],
            list.column("created_at", j => when(j.created_at)),
          ], items(answer), { empty: list.q ? "no recurring run matches" : "none yet" }),
          list.pager(answer.next_page_token || "", answer.total_size)];
}

function schedule(trigger) {
  const cron = (trigger || {}).cron_schedule, every = (trigger || {}).periodic_schedule;
  const s = cron || every || {};
  return [["trigger", triggerText(trigger) || "none"], ["starts", when(s.start_time) || "now"],
          ["ends", when(s.end_time) || "never"]];
}

async function oneView(id) {
  if (!(await serverInfo()).kfp_api) return noApi();
  const j = await kfp(`recurringruns/${enc(id)}`);
  const names = await experimentNames();
  // the runs it started: KFP's runs carry recurring_run_id
  const answer = await kfp("runs", { page_size: 100, sort_by: "created_at desc",
                                     ...(j.experiment_id ? { experiment_id: j.experiment_id } : {}) });
  const started = (answer.runs || []).filter(r => r.recurring_run_id === id).map(r => apiRow(r, names));
  const ref = j.pipeline_version_reference || {};
  let pipeline = ref.pipeline_id;
  try { if (ref.pipeline_id) { const p = await kfp(`pipelines/${enc(ref.pipeline_id)}`); pipeline = p.display_name || p.name; } }
  catch { /* deleted since: its id */ }
  return [el("h1", {}, `Recurring run ${j.display_name}`),
          el("p", { class: "meta" }, [j.description, j.mode === "ENABLE" ? "enabled" : "disabled",
                                      j.status && `status ${j.status}`, `id ${j.recurring_run_id}`].filter(Boolean).join(" · ")),
          j.error ? el("p", { class: "error", role: "alert" }, show(j.error.message || j.error)) : null,
          el("h2", {}, "Schedule"),
          pairs("Schedule", [...schedule(j.trigger),
                             ["at most at once", j.max_concurrency ?? ""],
                             ["catch up missed runs", j.no_catchup ? "no" : "yes"],
                             ["experiment", j.experiment_id ? link(`#/experiments/details/${enc(j.experiment_id)}`, names[j.experiment_id] || j.experiment_id) : ""],
                             ["pipeline", ref.pipeline_id ? link(`#/pipelines/details/${enc(ref.pipeline_id)}` +
                               (ref.pipeline_version_id ? `/version/${enc(ref.pipeline_version_id)}` : ""), pipeline) : "its own pipeline spec"]]),
          el("h2", {}, "Run parameters"),
          pairs("Run parameters", Object.entries(((j.runtime_config || {}).parameters) || {}).map(([k, v]) => [k, show(v)])),
          el("h2", {}, "Runs it started"),
          table("Runs this recurring run started, newest first", runColumns(started, false, false, null), started,
                { empty: "none yet" })];
}
