// Katib experiments, as the Katib UI shows them: the list; an experiment's objective over
// trials (uPlot), its trials in parallel coordinates, and its trials table with a column per
// parameter and per metric; one trial's parameters, metrics, conditions and log.
// Addresses: #/experiments, #/experiments/NAME, #/experiments/NAME/trial/TRIAL.

import { el, enc, link, muted, pairs, show, stateCell, table, when } from "../dom.js";
import { get } from "../data.js";
import { objectiveChart, parallelCoordinates } from "../charts.js";

export const routes = [
  ["experiments", () => experimentsView()],
  ["experiments/:name", p => experimentView(p.name)],
  ["experiments/:name/trial/:trial", p => trialView(p.name, p.trial)],
];

async function experimentsView() {
  const rows = await get("experiments");
  return [el("h1", {}, "Experiments (Katib)"), table("Katib experiments", [
    ["Experiment", r => link("#/experiments/" + enc(r.name), r.name)],
    ["State", r => stateCell(r.state)], ["Trials", r => r.trials], ["Best trial", r => r.best],
    ["Created", r => when(r.created_at)],
  ], rows)];
}

function trialHref(exp, trial) { return `#/experiments/${enc(exp)}/trial/${enc(trial)}`; }

function metricText(m) {
  if (!m) return "";
  return m.latest !== undefined ? String(m.latest) : show(m);
}

async function experimentView(name) {
  const e = await get("experiments/" + enc(name));
  const done = e.trials.filter(t => t.objective != null);
  const params = e.parameter_names.length ? e.parameter_names
               : [...new Set(e.trials.flatMap(t => Object.keys(t.parameters)))].sort();
  const extra = e.metric_names.filter(m => m && m !== e.metric);
  const c = e.counts;
  const out = [el("h1", {}, `Experiment ${e.name} `, stateCell(e.state)),
               el("p", { class: "meta" }, [`objective: ${e.goal} ${e.metric}`, e.algorithm && `algorithm ${e.algorithm}`,
                                           `best trial ${e.best || "none yet"}`].filter(Boolean).join(" · ")),
               el("p", { class: "meta" }, [`${c.trials} trial(s) of ${e.max_trials ?? "?"}`,
                                           `${e.parallel_trials ?? 1} at once`, `${c.trialsRunning} running`,
                                           `${c.trialsSucceeded} succeeded`, `${c.trialsFailed} failed`,
                                           c.trialsEarlyStopped && `${c.trialsEarlyStopped} stopped early`,
                                           c.trialsKilled && `${c.trialsKilled} killed`].filter(Boolean).join(" · "))];
  if (e.message) out.push(el("p", {}, e.message));
  out.push(el("h2", {}, "Objective over trials"),
           done.length ? objectiveChart(done.map(t => t.objective), e.metric, e.goal) : muted("no objective value yet"));
  out.push(el("h2", {}, "Parallel coordinates"));
  if (done.length) {
    const better = e.goal === "maximize" ? Math.max : Math.min;
    const best = better(...done.map(t => t.objective));
    const axes = [...params.map(p => ({ label: p, value: t => t.parameters[p] })),
                  { label: e.metric || "objective", value: t => t.objective }];
    out.push(parallelCoordinates(done, axes, {
      strong: t => t.objective === best, name: t => t.name,
      label: `Parallel coordinates of ${done.length} trials over ${params.join(", ")} and ${e.metric}; ` +
             "the best trial's line is the thick one (the trials table below has every value)" }));
  } else out.push(muted("no objective value yet"));
  out.push(el("h2", {}, "Trials"), table("Trials in creation order: a column per parameter and per metric", [
    ["Trial", t => link(trialHref(e.name, t.name), t.name)],
    ["State", t => el("span", {}, stateCell(t.state), t.name === e.best ? " (best)" : "")],
    ...params.map(p => [p, t => show(t.parameters[p])]),
    [e.metric || "Objective", t => t.objective ?? ""],
    ...extra.map(m => [m, t => metricText(t.metrics[m])]),
  ], e.trials));
  return out;
}

async function trialView(exp, name) {
  const t = await get(`experiments/${enc(exp)}/trials/${enc(name)}`);
  const out = [el("h1", {}, `Trial ${t.name} `, stateCell(t.state)),
               el("p", { class: "meta" }, [link(`#/experiments/${enc(exp)}`, `experiment ${exp}`),
                                           t.best ? "the best trial so far" : null,
                                           t.start_time && `started ${when(t.start_time)}`,
                                           t.completion_time && `ended ${when(t.completion_time)}`]
                                          .filter(Boolean).flatMap((b, i) => i ? [" · ", b] : [b]))];
  if (t.message) out.push(el("p", {}, t.message));
  out.push(el("h2", {}, "Parameters"), pairs("Parameter assignments", Object.entries(t.parameters).map(([k, v]) => [k, show(v)])));
  out.push(el("h2", {}, "Metrics"), table("Metrics the trial reported", [
    ["Metric", m => m[0] + (m[0] === t.metric ? " (objective)" : "")], ["Latest", m => show(m[1].latest)],
    ["Min", m => show(m[1].min)], ["Max", m => show(m[1].max)]], Object.entries(t.metrics), { empty: "none reported yet" }));
  out.push(el("h2", {}, "Conditions"), table("The trial's conditions, as Katib writes them", [
    ["Type", c => c.type], ["Status", c => c.status], ["Reason", c => c.reason || ""],
    ["Message", c => c.message || ""], ["Since", c => when(c.lastTransitionTime)]], t.conditions));
  out.push(el("h2", { id: "log" }, `Log of ${t.name}`),
           t.log === null ? muted("no log (not started, or its pod is gone)")
           : el("pre", { class: "log", role: "log", tabindex: "0", "aria-label": `log of ${t.name}`, "data-keep-scroll": "log" },
                t.log.join("\n") || "(no output)"));
  return out;
}
