// A task's output artifacts as the KFP UI renders them (docs/ui.md "Artifacts"): ROC curve
// and confusion matrix of a ClassificationMetrics, the scalars of a Metrics, an HTML artifact
// in a sandboxed frame, a Markdown artifact rendered on the server, in a frame with no script.

import { el, enc, errorNote, table } from "./dom.js";
import { rocChart } from "./charts.js";

export function artifactUrl(run, task, output, download) {
  return "/ui-api/runs/" + [run, "artifacts", task, output].map(enc).join("/") + (download ? "?download=1" : "");
}

function confusion(cm) {
  // rows are the true label, columns the predicted one (KFP's ConfusionMatrix viewer)
  const head = el("tr", {}, el("th", { scope: "col" }, "true label \\ predicted label"),
                  ...cm.labels.map(l => el("th", { scope: "col" }, l)));
  const rows = cm.rows.map((r, i) => el("tr", {}, el("th", { scope: "row" }, cm.labels[i] ?? ""),
                                         ...r.map(v => el("td", {}, v))));
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Confusion matrix" },
            el("table", { class: "confusion" }, el("caption", {}, "Confusion matrix"),
               el("thead", {}, head), el("tbody", {}, ...rows)));
}

// one task's visualizations, in the KFP UI's order: ROC and confusion matrix of each
// ClassificationMetrics, each Metrics' scalars, the HTML, the Markdown
export function visualizations(runKey, t, level = "h3") {
  const out = [];
  const sub = level === "h3" ? "h4" : "h3";
  for (const a of t.artifacts) {
    const name = `${t.name} / ${a.name}`;
    if (a.roc) out.push(el(sub, {}, `ROC Curve: ${name}`),
                        ...(a.roc.error ? [errorNote(a.roc.error)] : rocChart(a.roc.points, name)));
    if (a.confusion) out.push(el(sub, {}, `Confusion Matrix: ${name}`),
                              a.confusion.error ? errorNote(a.confusion.error) : confusion(a.confusion));
  }
  for (const a of t.artifacts.filter(a => a.scalars)) {
    out.push(el(sub, {}, `Scalar Metrics: ${t.name} / ${a.name}`),
             table(`Scalar metrics of ${a.name}`, [["name", m => m[0]], ["value", m => m[1]]], a.scalars));
  }
  for (const [type, title, sandbox] of [["system.HTML", "Static HTML", "allow-scripts"],
                                        ["system.Markdown", "Static Markdown", ""]]) {
    for (const a of t.artifacts.filter(a => a.shown && a.type === type)) {
      out.push(el(sub, {}, `${title}: ${t.name} / ${a.name}`),
               el("iframe", { src: artifactUrl(runKey, t.key, a.name), sandbox,
                              title: `${title} written by ${t.name} (${a.name})`,
                              class: "artifact " + (type === "system.HTML" ? "html" : "markdown"),
                              loading: "lazy" }));
    }
  }
  return out.length ? [el(level, {}, `Visualizations: ${t.name}`), ...out] : [];
}

// An artifact in a list: its name and type, where it is, and a link to open or download it
export function artifactItem(runKey, t, a) {
  const links = [];
  if (a.shown) links.push(el("a", { href: artifactUrl(runKey, t.key, a.name), target: "_blank", rel: "noopener" }, "view"));
  if (a.download) links.push(el("a", { href: artifactUrl(runKey, t.key, a.name, true), download: a.download }, "download"));
  return el("li", {}, el("strong", {}, a.name), ` (${a.type || "artifact"})`,
            a.uri ? el("div", { class: "uri" }, el("code", {}, a.uri)) : null,
            a.note ? el("div", { class: "muted" }, a.note) : null,
            links.length ? el("div", {}, ...links.flatMap((l, i) => i ? [" · ", l] : [l])) : null);
}
