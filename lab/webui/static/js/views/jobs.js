// Training jobs: PyTorchJobs and TFJobs (Training Operator v1) and TrainJobs (Kubeflow
// Trainer v2). The list says each replica type's counts in words; a job's page shows each
// replica type's counts once (the operator counts a type, not a replica), its replicas to
// pick a log from, and the chosen replica's log.
// Addresses: #/jobs, #/jobs/KIND/NAME[/REPLICA].

import { el, enc, link, muted, stateCell, table, when } from "../dom.js";
import { get } from "../data.js";

export const routes = [
  ["jobs", () => jobsView()],
  ["jobs/:kind/:name", p => jobView(p.kind, p.name, null)],
  ["jobs/:kind/:name/:replica", p => jobView(p.kind, p.name, p.replica)],
];

// "Master: 1 succeeded · Worker: 2 running" (a TrainJob's: per replicated Job)
export function replicaText(types) {
  return (types || []).map(t => {
    const parts = [["active", "running"], ["succeeded", "succeeded"], ["failed", "failed"],
                   ["ready", "ready"], ["suspended", "suspended"]]
      .filter(([k]) => t[k]).map(([k, word]) => `${t[k]} ${word}`);
    const of = t.replicas != null ? `${t.replicas} replica${t.replicas === 1 ? "" : "s"}` : "";
    return `${t.type}: ${[of, ...parts].filter(Boolean).join(", ") || "none yet"}`;
  }).join(" · ");
}

async function jobsView() {
  const rows = await get("jobs");
  return [el("h1", {}, "Training jobs"), table("PyTorchJobs, TFJobs and TrainJobs", [
    ["Kind", r => r.kind],
    ["Job", r => link(`#/jobs/${enc(r.kind)}/${enc(r.name)}`, r.name)],
    ["State", r => stateCell(r.state)],
    ["Replicas", r => replicaText(r.replicas)], ["Created", r => when(r.created_at)],
  ], rows)];
}

async function jobView(kind, name, replica) {
  const path = ["jobs", kind, name, ...(replica ? [replica] : [])].map(enc).join("/");
  const j = await get(path);
  const home = `#/jobs/${enc(kind)}/${enc(name)}`;
  const out = [el("h1", {}, `${kind} ${j.name} `, stateCell(j.state))];
  if (j.message) out.push(el("p", {}, j.message));
  if (kind === "TrainJob") {
    // Kubeflow Trainer v2: a runtime, numNodes node pods (one Indexed Job of the JobSet)
    out.push(el("p", { class: "meta" }, [`runtime ${j.runtime}`, `${j.num_nodes} node(s)`,
                                         j.nproc_per_node !== "" && `numProcPerNode ${j.nproc_per_node}`]
                                        .filter(Boolean).join(" · ")),
             el("h2", {}, "Nodes"), table("Nodes (select one for its log)", [
               ["Node", r => link(`${home}/${enc(r.name)}`, r.name)], ["Pod", r => r.pod],
               ["Phase", r => stateCell(r.phase)], ["Restarts", r => r.restarts ?? ""],
             ], j.replica_list),
             el("h2", {}, "Jobs status"), table("jobsStatus: the JobSet's replicated Jobs", [
               ["Job", r => r.name], ["Ready", r => r.ready], ["Active", r => r.active],
               ["Succeeded", r => r.succeeded], ["Failed", r => r.failed], ["Suspended", r => r.suspended],
             ], j.jobs_status));
  } else {
    out.push(el("h2", {}, "Replica types"), table("Counts per replica type (replicaStatuses)", [
               ["Type", t => t.type], ["Replicas", t => t.replicas], ["Active", t => t.active],
               ["Succeeded", t => t.succeeded], ["Failed", t => t.failed],
             ], j.replicas),
             el("h2", {}, "Replicas"),
             muted("The operator counts replicas per type (above); pick a replica for its log."),
             el("ul", { class: "replicas" }, ...j.replica_list.map(r => el("li", {},
               link(`${home}/${enc(r.name)}`, r.name, r.name === replica ? { "aria-current": "page" } : {}),
               ` (${r.type})`))));
  }
  if (j.replica) out.push(el("h2", { id: "log", tabindex: "-1", "data-focus": "" }, `Log of ${j.replica}`),
                          el("pre", { class: "log", role: "log", tabindex: "0", "aria-label": `log of ${j.replica}`, "data-keep-scroll": "log" },
                             j.log.join("\n") || "(no output)"));
  return out;
}
