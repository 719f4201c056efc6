// The guided labs started in this state folder and one lab's progress (read from its
// progress and journal: opening it runs no check), and the notebook servers.
// Addresses: #/labs, #/labs/ID, #/notebooks.

import { el, enc, link, stateCell, table, when } from "../dom.js";
import { get } from "../data.js";

export const routes = [
  ["labs", () => labsView()],
  ["labs/:id", p => labView(p.id)],
  ["notebooks", () => notebooksView()],
];

async function labsView() {
  const rows = await get("labs");
  return [el("h1", {}, "Guided labs"), table("Labs started in this state folder", [
    ["Lab", r => link("#/labs/" + enc(r.id), r.id)], ["Title", r => r.title],
    ["Progress", r => r.finished ? "complete" : `step ${r.step} of ${r.steps ?? "?"}`],
    ["Active", r => r.active ? "yes (kflab check works on it)" : ""],
    ["Started", r => when(r.started_at)],
  ], rows)];
}

async function labView(id) {
  const p = await get("labs/" + enc(id));
  const done = p.steps.filter(s => ["passed", "solved", "skipped"].includes(s.status)).length;
  return [el("h1", {}, `Lab ${p.id} `, el("span", { class: "state" }, p.finished ? "complete" : "in progress")),
          el("p", { class: "meta" }, [p.title, `${done} of ${p.steps.length} steps done`,
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
}

async function notebooksView() {
  const rows = await get("notebooks");
  return [el("h1", {}, "Notebooks"), table("Notebook servers", [
    ["Name", r => r.name], ["State", r => stateCell(r.state)],
    ["Ready", r => r.ready ? "yes" : "no"], ["Open it with", r => el("code", {}, r.open)],
    ["Created", r => when(r.created_at)],
  ], rows)];
}
