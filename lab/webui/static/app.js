// kflab ui: read-only views over /ui-api/ (the backend API the CLI uses), refetched when the
// server's event stream (/events) says the records changed: no reload, no polling.
// Every value from the backend goes in through textContent or an attribute, never as HTML.
"use strict";

// The token (or the launch file's one-time code) that opened this page is in the page's
// cookie now: take it out of the address bar and this history entry (lab/webui/server.py).
if (/[?&](token|code)=/.test(location.search)) {
  history.replaceState(history.state, "", location.pathname + location.hash);
}

const SVG = "http://www.w3.org/2000/svg";
const main = document.getElementById("main");
let stream = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function table(caption, columns, rows) {
  const head = el("tr", {}, ...columns.map(c => el("th", { scope: "col" }, c[0])));
  const body = rows.map(r => el("tr", {}, ...columns.map(c => {
    const v = c[1](r);
    return el("td", {}, v instanceof Node ? v : (v ?? ""));
  })));
  if (!rows.length) body.push(el("tr", {}, el("td", { colspan: columns.length }, "none yet")));
  return el("table", {}, el("caption", {}, caption), el("thead", {}, head),
            el("tbody", {}, ...body));
}

function stateCell(s) { return el("span", { class: "state " + (s || "") }, s || ""); }
function secs(v) { return v == null ? "" : v.toFixed(1) + " s"; }
function link(href, text) { return el("a", { href }, text); }
function json(v) { return Object.keys(v || {}).length ? JSON.stringify(v) : ""; }

let fetched = [];

async function get(path) {
  const res = await fetch("/ui-api/" + path, { credentials: "same-origin" });
  if (!res.ok) throw new Error((await res.json()).message || res.statusText);
  const data = await res.json();
  fetched.push(data);
  return data;
}

function dag(run, tasks, edges) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 30, ranksep: 40, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const t of tasks) g.setNode(t.name, { width: 16 + 8 * (t.name.length + 12), height: 40, task: t });
  for (const [a, b] of edges) if (g.hasNode(a) && g.hasNode(b)) g.setEdge(a, b);
  dagre.layout(g);
  const { width, height } = g.graph();
  const root = svg("svg", { class: "dag", width, height, role: "group", "aria-label": "Pipeline graph" });
  const defs = svg("defs"), marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10,
    refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "head" }));
  defs.append(marker);
  root.append(defs);
  for (const e of g.edges()) {
    const pts = g.edge(e).points;
    root.append(svg("path", { d: "M" + pts.map(p => `${p.x},${p.y}`).join(" L"),
                              "marker-end": "url(#arrow)" }));
  }
  for (const id of g.nodes()) {
    const n = g.node(id);
    // each box links to its task's log: Tab reaches every task from the keyboard
    const group = svg("a", { href: `#/runs/${encodeURIComponent(run)}/${encodeURIComponent(id)}`,
                             "aria-label": `${id}: ${n.task.cached ? "reused from cache" : n.task.state}`,
                             transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})` });
    group.append(svg("rect", { width: n.width, height: n.height, rx: 6, class: n.task.state || "" }));
    const label = svg("text", { x: 8, y: 24 });
    label.textContent = `${id} · ${n.task.cached ? "cached" : (n.task.state || "").toLowerCase()}`;
    group.append(label);
    root.append(group);
  }
  return root;
}

function chart(points, label, goal) {
  // objective over trials, and the best so far, drawn by uPlot (vendored, MIT)
  const xs = points.map((_, i) => i + 1), ys = points.map(p => p.y);
  const better = goal === "maximize" ? Math.max : Math.min;
  const best = ys.map((_, i) => better(...ys.slice(0, i + 1)));
  const box = el("div", { class: "chart", role: "img",
                          "aria-label": `${label} over trials: ${ys.join(", ")}; best ${best.at(-1)}` });
  const opts = {
    width: 560, height: 260, legend: { show: false }, cursor: { show: false },
    scales: { x: { time: false } },
    axes: [{ label: "trial", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500] }, { label }],
    series: [{}, { label, stroke: "#0b4f94", width: 2, points: { size: 7 } },
             { label: "best so far", stroke: "#1a6b2a", width: 1.5, dash: [6, 4] }],
  };
  // uPlot measures its container: draw once the box is in the page
  requestAnimationFrame(() => new uPlot(opts, [xs, ys, best], box));
  return box;
}

function parcoords(trials, metric, goal) {
  // parallel coordinates: one vertical axis per parameter and one for the objective, one line
  // per trial; numeric axes scale linearly from their least to their greatest value, others
  // space their values evenly. Plain SVG from the data (docs/ui.md says why no library).
  const done = trials.filter(t => t.objective != null);
  const names = [...new Set(done.flatMap(t => Object.keys(t.parameters)))].sort();
  const axes = [...names.map(n => ({ label: n, value: t => t.parameters[n] })),
                { label: metric || "objective", value: t => t.objective }];
  const W = Math.max(360, 140 * axes.length), H = 280, top = 36, bottom = 28, left = 60;
  const step = (W - 2 * left) / Math.max(1, axes.length - 1);
  for (const a of axes) {
    const vals = done.map(a.value);
    a.numeric = vals.every(v => v !== undefined && v !== "" && Number.isFinite(Number(v)));
    if (a.numeric) {
      const nums = vals.map(Number);
      a.lo = Math.min(...nums); a.hi = Math.max(...nums);
      a.y = v => a.hi === a.lo ? (top + H - bottom) / 2
                               : H - bottom - (Number(v) - a.lo) / (a.hi - a.lo) * (H - bottom - top);
      a.ticks = a.hi === a.lo ? [a.lo] : [a.lo, (a.lo + a.hi) / 2, a.hi];
    } else {
      const cats = [...new Set(vals.map(v => String(v ?? "")))].sort();
      a.y = v => cats.length < 2 ? (top + H - bottom) / 2
                                 : H - bottom - cats.indexOf(String(v ?? "")) / (cats.length - 1) * (H - bottom - top);
      a.ticks = cats;
    }
  }
  const fmt = v => typeof v === "number" ? Number(v.toPrecision(4)).toString() : v;
  const better = goal === "maximize" ? Math.max : Math.min;
  const best = done.length ? better(...done.map(t => t.objective)) : null;
  const root = svg("svg", { class: "parcoords", width: W, height: H, role: "img",
    "aria-label": `Parallel coordinates of ${done.length} trials over ${names.join(", ")} and ${metric}; ` +
                  `the best trial's line is the thick one (the trials table below has every value)` });
  for (const t of done) {  // the best trial last, so its line is on top
    if (t.objective === best) continue;
    root.append(svg("polyline", { class: "trial", points: axes.map((a, i) => `${left + i * step},${a.y(a.value(t))}`).join(" ") }));
  }
  for (const t of done.filter(t => t.objective === best)) {
    root.append(svg("polyline", { class: "trial best", points: axes.map((a, i) => `${left + i * step},${a.y(a.value(t))}`).join(" ") }));
  }
  axes.forEach((a, i) => {
    const x = left + i * step;
    root.append(svg("line", { class: "axis", x1: x, x2: x, y1: top, y2: H - bottom }));
    const name = svg("text", { x, y: top - 14, "text-anchor": "middle", class: "axis-name" });
    name.textContent = a.label;
    root.append(name);
    for (const v of a.ticks) {
      const tick = svg("text", { x: x - 6, y: a.y(v) + 4, "text-anchor": "end" });
      tick.textContent = fmt(v);
      root.append(tick);
    }
  });
  return root;
}

const EXAMPLES = {
  v1: '{"instances": [[6.8, 2.8, 4.8, 1.4]]}',
  v2: '{"inputs": [{"name": "input-0", "shape": [1, 4], "datatype": "FP64",\n             "data": [6.8, 2.8, 4.8, 1.4]}]}',
};
const drafts = {};  // per service: protocol, body, answer: kept when a live redraw comes
let csrf = null;

function tryForm(s) {
  const d = drafts[s.name] ??= { protocol: s.protocols[0], body: null, answer: "" };
  const body = el("textarea", { id: "tryit-body", rows: 6, cols: 72, spellcheck: "false",
                                "aria-describedby": "tryit-help" });
  body.value = d.body ?? EXAMPLES[d.protocol];
  body.addEventListener("input", () => { d.body = body.value; });
  const radios = s.protocols.map(p => {
    const input = el("input", { type: "radio", name: "protocol", id: `tryit-${p}`, value: p });
    input.checked = p === d.protocol;
    input.addEventListener("change", () => {
      d.protocol = p;
      if (d.body === null) body.value = EXAMPLES[p];  // untouched: show this protocol's example
    });
    return el("span", {}, input, el("label", { for: `tryit-${p}` }, p.toUpperCase()), " ");
  });
  const answer = el("pre", { id: "tryit-out", class: "log", tabindex: "0", "aria-live": "polite",
                             "aria-label": "answer of the model server" }, d.answer);
  const form = el("form", { id: "tryit", "aria-labelledby": "tryit-h" },
    el("fieldset", {}, el("legend", {}, "Protocol"), ...radios),
    el("p", {}, el("label", { for: "tryit-body" }, "Request body (JSON)")), body,
    el("p", { id: "tryit-help" }, "V1: one row of feature values per instance; V2: tensors with " +
                                  "name, shape, datatype and data. Sent to the model server on 127.0.0.1."),
    el("button", { type: "submit" }, "Send"), answer);
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    d.answer = answer.textContent = "sending…";
    try {
      csrf ??= (await (await fetch("/ui-api/csrf", { credentials: "same-origin" })).json()).csrf;
      const res = await fetch(`/ui-api/inferenceservices/${encodeURIComponent(s.name)}/predict?protocol=${d.protocol}`, {
        method: "POST", credentials: "same-origin", body: body.value,
        headers: { "Content-Type": "application/json", "X-Kflab-Csrf": csrf || "" } });
      const data = await res.json();
      d.answer = res.ok ? `predictions: ${JSON.stringify(data.predictions)}\n\n${JSON.stringify(data.response, null, 2)}`
                        : `error ${res.status}: ${data.message}`;
    } catch (err) {
      d.answer = `error: ${err.message || err}`;
    }
    answer.textContent = d.answer;
  });
  return form;
}

function artifactUrl(run, task, output) {
  return "/ui-api/runs/" + [run, "artifacts", task, output].map(encodeURIComponent).join("/");
}

function artifactList(run, t) {
  return t.artifacts.map(a => `${a.name} (${a.type})`).join(", ");
}

function errorNote(text) { return el("p", { class: "error" }, text); }

function confusion(cm) {
  // rows are the true label, columns the predicted one (KFP's ConfusionMatrix viewer)
  const head = el("tr", {}, el("th", { scope: "col" }, "true label \\ predicted label"),
                  ...cm.labels.map(l => el("th", { scope: "col" }, l)));
  const rows = cm.rows.map((r, i) => el("tr", {}, el("th", { scope: "row" }, cm.labels[i] ?? ""),
                                         ...r.map(v => el("td", {}, v))));
  return el("table", { class: "confusion" }, el("caption", {}, "Confusion matrix"),
            el("thead", {}, head), el("tbody", {}, ...rows));
}

function roc(points, name) {
  // KFP's ROCCurve viewer: x false positive rate, y true positive rate (recall), both 0..1,
  // a dashed diagonal; drawn by uPlot. The points, with their thresholds, also as a table.
  const xs = [...new Set([0, ...points.map(p => p.fpr), 1])].sort((a, b) => a - b);
  const at = new Map(points.map(p => [p.fpr, p.tpr]));  // the last point of a repeated fpr
  const ys = xs.map(x => at.has(x) ? at.get(x) : null);
  const box = el("div", { class: "chart roc", role: "img",
                          "aria-label": `ROC curve of ${name}: ` + points.map(p => `fpr ${p.fpr} tpr ${p.tpr}`).join(", ") });
  const opts = {
    width: 420, height: 320, legend: { show: false }, cursor: { show: false },
    scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
    axes: [{ label: "fpr (false positive rate)" }, { label: "tpr (true positive rate)" }],
    series: [{}, { label: "ROC", stroke: "#0b4f94", width: 2, spanGaps: true, points: { size: 5 } },
             { label: "chance", stroke: "#6b6b6b", width: 1, dash: [4, 4], points: { show: false } }],
  };
  requestAnimationFrame(() => new uPlot(opts, [xs, ys, xs], box));
  const rows = points.map(p => el("tr", {}, el("td", {}, p.threshold), el("td", {}, p.fpr), el("td", {}, p.tpr)));
  const details = el("details", {}, el("summary", {}, "ROC points"),
    el("table", {}, el("caption", {}, `ROC points of ${name}`),
       el("thead", {}, el("tr", {}, ...["threshold", "fpr", "tpr"].map(h => el("th", { scope: "col" }, h)))),
       el("tbody", {}, ...rows)));
  return [box, details];
}

function visualizations(r, t) {
  // one task's artifacts, in the KFP UI's order: ROC and confusion matrix of each
  // ClassificationMetrics, each Metrics' scalars, the HTML, the Markdown
  const out = [];
  for (const a of t.artifacts) {
    const name = `${t.name} / ${a.name}`;
    if (a.roc) out.push(el("h3", {}, `ROC Curve: ${name}`),
                        ...(a.roc.error ? [errorNote(a.roc.error)] : roc(a.roc.points, name)));
    if (a.confusion) out.push(el("h3", {}, `Confusion Matrix: ${name}`),
                              a.confusion.error ? errorNote(a.confusion.error) : confusion(a.confusion));
  }
  for (const a of t.artifacts.filter(a => a.scalars)) {
    out.push(el("h3", {}, `Scalar Metrics: ${t.name} / ${a.name}`),
             table(`Scalar metrics of ${a.name}`, [["name", m => m[0]], ["value", m => m[1]]], a.scalars));
  }
  for (const [type, title, sandbox] of [["system.HTML", "Static HTML", "allow-scripts"],
                                        ["system.Markdown", "Static Markdown", ""]]) {
    for (const a of t.artifacts.filter(a => a.shown && a.type === type)) {
      out.push(el("h3", {}, `${title}: ${t.name} / ${a.name}`),
               el("iframe", { src: artifactUrl(r.name, t.name, a.name), sandbox,
                              title: `${title} written by ${t.name} (${a.name})`,
                              class: "artifact " + (type === "system.HTML" ? "html" : "markdown"),
                              loading: "lazy" }));
    }
  }
  return out.length ? [el("h2", {}, `Visualizations: ${t.name}`), ...out] : [];
}

const views = {
  async runs() {
    const rows = await get("runs");
    return [el("h1", {}, "Pipeline runs"), table("Runs, newest first", [
      ["Run", r => link("#/runs/" + encodeURIComponent(r.name), r.name)],
      ["State", r => stateCell(r.state)], ["Pipeline", r => r.pipeline],
      ["Tasks", r => r.tasks], ["Created", r => r.created_at], ["Duration", r => secs(r.duration_s)],
    ], rows)];
  },
  async run(name, task) {
    const r = await get("runs/" + encodeURIComponent(name));
    const out = [el("h1", {}, `Run ${r.name} `, stateCell(r.state)),
                 el("p", {}, [`Pipeline ${r.pipeline}`, `created ${r.created_at}`,
                               r.duration_s == null ? "" : `took ${secs(r.duration_s)}`]
                              .filter(Boolean).join(" · "))];
    if (r.error) out.push(el("p", { class: "error" }, r.error));
    out.push(el("h2", {}, "Graph"), r.tasks.length ? dag(r.name, r.tasks, r.edges) : el("p", {}, "no task has started yet"));
    out.push(el("h2", {}, "Tasks"), table("Tasks of the run", [
      ["Task", t => link(`#/runs/${encodeURIComponent(r.name)}/${encodeURIComponent(t.name)}`, t.name)],
      ["State", t => stateCell(t.state)], ["Duration", t => secs(t.duration_s)],
      ["Cache", t => t.cached ? "reused from cache" : ""], ["Output parameters", t => json(t.parameters)],
      ["Metrics", t => json(t.metrics)], ["Artifacts", t => artifactList(r.name, t)],
    ], r.tasks));
    for (const t of r.tasks) out.push(...visualizations(r, t));
    if (task) {
      const log = await get(`runs/${encodeURIComponent(name)}/logs/${encodeURIComponent(task)}`);
      out.push(el("h2", { id: "log" }, `Log of ${task}`),
               el("pre", { class: "log", tabindex: "0", "aria-label": `log of ${task}` },
                  log.lines.join("\n") || "(no output)"));
    }
    return out;
  },
  async kfpExperiment(id) {
    const k = await get("kfp/experiments/" + encodeURIComponent(id));
    return [el("h1", {}, `KFP experiment ${k.experiment.display_name}`),
            el("p", {}, k.experiment.description || ""),
            table("Runs of the experiment", [
              ["Run", r => r.name ? link("#/runs/" + encodeURIComponent(r.name), r.display_name) : r.display_name],
              ["State", r => stateCell(r.state)], ["Created", r => r.created_at],
              ["Storage", r => r.storage_state],
            ], k.runs)];
  },
  async kfpPipeline(id) {
    const k = await get("kfp/pipelines/" + encodeURIComponent(id));
    return [el("h1", {}, `Pipeline ${k.pipeline.display_name}`),
            el("p", {}, k.pipeline.description || ""),
            table("Versions, newest first", [
              ["Version", v => v.display_name], ["Created", v => v.created_at],
              ["Description", v => v.description], ["Id", v => v.pipeline_version_id],
            ], k.versions)];
  },
  async experiments() {
    const rows = await get("experiments");
    return [el("h1", {}, "Experiments"), table("Katib experiments", [
      ["Experiment", r => link("#/experiments/" + encodeURIComponent(r.name), r.name)],
      ["State", r => stateCell(r.state)], ["Trials", r => r.trials], ["Best trial", r => r.best],
      ["Created", r => r.created_at],
    ], rows)];
  },
  async experiment(name) {
    const e = await get("experiments/" + encodeURIComponent(name));
    const pts = e.trials.filter(t => t.objective != null).map((t, i) => ({ x: i, y: t.objective }));
    return [el("h1", {}, `Experiment ${e.name} `, stateCell(e.state)),
            el("p", {}, `Objective: ${e.goal} ${e.metric} · best trial ${e.best || "none yet"}`),
            el("h2", {}, "Objective over trials"), pts.length ? chart(pts, e.metric, e.goal) : el("p", {}, "no objective value yet"),
            el("h2", {}, "Parallel coordinates"), pts.length ? parcoords(e.trials, e.metric, e.goal) : el("p", {}, "no objective value yet"),
            el("h2", {}, "Trials"), table("Trials in creation order", [
              ["Trial", t => t.name], ["State", t => stateCell(t.state)],
              ["Parameters", t => json(t.parameters)], [e.metric || "Objective", t => t.objective],
            ], e.trials)];
  },
  async jobs() {
    const rows = await get("jobs");
    return [el("h1", {}, "Training jobs"), table("PyTorchJobs, TFJobs and TrainJobs", [
      ["Kind", r => r.kind],
      ["Job", r => link(`#/jobs/${encodeURIComponent(r.kind)}/${encodeURIComponent(r.name)}`, r.name)],
      ["State", r => stateCell(r.state)],
      ["Replicas", r => json(r.replicas)], ["Created", r => r.created_at],
    ], rows)];
  },
  async job(kind, rest) {
    const [name, replica] = rest;
    const path = ["jobs", kind, name, ...(replica ? [replica] : [])].map(encodeURIComponent).join("/");
    const j = await get(path);
    const base = `#/jobs/${encodeURIComponent(kind)}/${encodeURIComponent(name)}`;
    const out = [el("h1", {}, `${kind} ${j.name} `, stateCell(j.state))];
    if (j.message) out.push(el("p", {}, j.message));
    if (kind === "TrainJob") {
      // Kubeflow Trainer v2: a runtime, numNodes node pods (one Indexed Job of the JobSet)
      out.push(el("p", {}, [`runtime ${j.runtime}`, `${j.num_nodes} node(s)`,
                            j.nproc_per_node !== "" && `numProcPerNode ${j.nproc_per_node}`]
                           .filter(Boolean).join(" · ")),
               el("h2", {}, "Nodes"), table("Nodes (select one for its log)", [
                 ["Node", r => link(`${base}/${encodeURIComponent(r.name)}`, r.name)], ["Pod", r => r.pod],
                 ["Phase", r => stateCell(r.phase)], ["Restarts", r => r.restarts ?? ""],
               ], j.replica_list),
               el("h2", {}, "Jobs status"), table("jobsStatus: the JobSet's replicated Jobs", [
                 ["Job", r => r.name], ["Ready", r => r.ready], ["Active", r => r.active],
                 ["Succeeded", r => r.succeeded], ["Failed", r => r.failed], ["Suspended", r => r.suspended],
               ], j.jobs_status));
    } else {
      out.push(el("h2", {}, "Replicas"), table("Replicas (select one for its log)", [
        ["Replica", r => link(`${base}/${encodeURIComponent(r.name)}`, r.name)], ["Type", r => r.type],
        ["Active", r => r.active], ["Succeeded", r => r.succeeded], ["Failed", r => r.failed],
      ], j.replica_list));
    }
    if (j.replica) out.push(el("h2", {}, `Log of ${j.replica}`),
                            el("pre", { class: "log", tabindex: "0", "aria-label": `log of ${j.replica}` },
                               j.log.join("\n") || "(no output)"));
    return out;
  },
  async inferenceservices() {
    const rows = await get("inferenceservices");
    return [el("h1", {}, "InferenceServices"), table("Model servers", [
      ["Name", r => link("#/inferenceservices/" + encodeURIComponent(r.name), r.name)],
      ["State", r => stateCell(r.state)], ["URL", r => r.url], ["Created", r => r.created_at],
    ], rows)];
  },
  async inferenceservice(name) {
    const s = await get("inferenceservices/" + encodeURIComponent(name));
    const out = [el("h1", {}, `InferenceService ${s.name} `, stateCell(s.state)),
                 el("p", {}, [`model format ${s.format || "?"}`, `protocol ${s.protocol}`,
                              s.runtime && `runtime ${s.runtime}`, s.url && `URL ${s.url}`].filter(Boolean).join(" · "))];
    if (s.message) out.push(el("p", {}, s.message));
    out.push(el("h2", { id: "tryit-h" }, "Try it"));
    if (!s.can_try) return [...out, el("p", {}, "Send requests with `kflab predict` on this backend.")];
    return [...out, tryForm(s)];
  },
  async labs() {
    const rows = await get("labs");
    return [el("h1", {}, "Guided labs"), table("Labs started in this state folder", [
      ["Lab", r => link("#/labs/" + encodeURIComponent(r.id), r.id)], ["Title", r => r.title],
      ["Progress", r => r.finished ? "complete" : `step ${r.step} of ${r.steps ?? "?"}`],
      ["Active", r => r.active ? "yes (kflab check works on it)" : ""],
      ["Started", r => r.started_at],
    ], rows)];
  },
  async lab(id) {
    const p = await get("labs/" + encodeURIComponent(id));
    const done = p.steps.filter(s => ["passed", "solved", "skipped"].includes(s.status)).length;
    return [el("h1", {}, `Lab ${p.id} `, el("span", { class: "state" }, p.finished ? "complete" : "in progress")),
            el("p", {}, [p.title, `${done} of ${p.steps.length} steps done`,
                         p.active ? "the active lab" : "not the active lab", `work folder ${p.workdir}`].join(" · ")),
            el("progress", { max: p.steps.length, value: done, "aria-label": "steps done" }),
            table("Steps", [
              ["#", s => s.n], ["Step", s => s.title],
              ["Status", s => el("span", { class: "step " + s.status }, s.status + (s.skipped ? `: ${s.skipped}` : ""))],
              ["Checks", s => el("ul", {}, ...s.checks.map(c => el("li", {}, c)))],
              ["Check attempts", s => s.attempts ? `${s.attempts} (${s.failed} failed)` : ""],
              ["Last check", s => s.last ? `${s.last.ok ? "passed" : "failed"} at ${s.last.t}` : ""],
              ["Hints used", s => `${s.hints} of ${s.hints_total}`],
            ], p.steps)];
  },
  async notebooks() {
    const rows = await get("notebooks");
    return [el("h1", {}, "Notebooks"), table("Notebook servers", [
      ["Name", r => r.name], ["State", r => stateCell(r.state)],
      ["Ready", r => r.ready ? "yes" : "no"], ["Open it with", r => el("code", {}, r.open)],
      ["Created", r => r.created_at],
    ], rows)];
  },
};

let shown = null;  // the data last drawn: a poll that brings nothing new leaves the page
                  // (and the keyboard focus) alone

async function render() {
  let [, view, name, ...rest] = (location.hash || "#/runs").split("/").map(decodeURIComponent);
  // the KFP UI's links that kfp.Client prints: #/runs/details/ID (the run's own view),
  // #/experiments/details/ID and #/pipelines/details/ID[/version/VID] (the KFP objects)
  const kfp = name === "details" && /^[0-9a-f-]{36}$/.test(rest[0] || "") ? view : null;
  if (kfp) [name, ...rest] = rest;
  const sub = view === "jobs" ? rest : rest[0];
  const fn = kfp === "experiments" ? views.kfpExperiment : kfp === "pipelines" ? views.kfpPipeline
           : name ? { runs: views.run, experiments: views.experiment, jobs: views.job,
                      labs: views.lab, inferenceservices: views.inferenceservice }[view]
                  : views[view];
  try {
    fetched = [];
    const nodes = fn ? await fn(name, sub) : [el("p", {}, "No such view.")];
    const key = location.hash + JSON.stringify(fetched);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    if (key === shown) return;
    shown = key;
    // a redraw keeps the keyboard focus: the same link (or log) in the new page gets it back
    const had = main.contains(document.activeElement) ? document.activeElement : null;
    const href = had && had.getAttribute("href"), label = had && had.getAttribute("aria-label");
    const id = had && had.id;
    main.replaceChildren(...nodes);
    const back = id ? document.getElementById(id)
               : href ? main.querySelector(`[href="${CSS.escape(href)}"]`)
               : label ? main.querySelector(`[aria-label="${CSS.escape(label)}"]`) : null;
    if (back) back.focus({ preventScroll: true });
    main.setAttribute("data-view", [view, name, ...rest].filter(Boolean).join("/"));
  } catch (err) {
    shown = null;
    main.replaceChildren(el("p", { class: "error" }, String(err.message || err)));
  }
}

let busy = false, again = false;

async function refresh() {
  // one render at a time; a change that comes during one is drawn right after it
  if (busy) { again = true; return; }
  busy = true;
  try { await render(); } finally { busy = false; }
  if (again) { again = false; refresh(); }
}

function listen() {
  // one stream per page, kept across views; the browser reconnects it by itself (retry: 2 s).
  // A browser without EventSource polls every 2 s instead.
  if (!window.EventSource) return setInterval(refresh, 2000);
  stream = new EventSource("/events");
  stream.addEventListener("change", refresh);
  stream.addEventListener("ready", refresh);  // also after a reconnect: catch up
  stream.onerror = () => {
    document.getElementById("updated").textContent = "not live: reconnecting to kflab ui…";
  };
}

window.addEventListener("hashchange", () => { shown = null; refresh(); });
refresh();
listen();
