// InferenceServices (KServe): the list, and one service with its try-it form, the one thing
// the UI sends (POST /ui-api/inferenceservices/NAME/predict, local backend only: token,
// Origin and a CSRF token bound to the page's session; docs/ui.md "Access").
// Addresses: #/inferenceservices, #/inferenceservices/NAME.

import { el, enc, link, muted, stateCell, table, when } from "../dom.js";
import { get } from "../data.js";

export const routes = [
  ["inferenceservices", () => listView()],
  ["inferenceservices/:name", p => serviceView(p.name)],
];

const EXAMPLES = {
  v1: '{"instances": [[6.8, 2.8, 4.8, 1.4]]}',
  v2: '{"inputs": [{"name": "input-0", "shape": [1, 4], "datatype": "FP64",\n             "data": [6.8, 2.8, 4.8, 1.4]}]}',
};
const drafts = {};  // per service: protocol, body, answer: kept when a live redraw comes
let csrf = null;

async function listView() {
  const rows = await get("inferenceservices");
  return [el("h1", {}, "InferenceServices"), table("Model servers", [
    ["Name", r => link("#/inferenceservices/" + enc(r.name), r.name)],
    ["State", r => stateCell(r.state)], ["URL", r => el("span", { class: "uri" }, r.url)],
    ["Created", r => when(r.created_at)],
  ], rows)];
}

function tryForm(s) {
  const d = drafts[s.name] ??= { protocol: s.protocols[0], body: null, answer: "" };
  const body = el("textarea", { id: "tryit-body", rows: 6, spellcheck: "false", "aria-describedby": "tryit-help" });
  body.value = d.body ?? EXAMPLES[d.protocol];
  body.addEventListener("input", () => { d.body = body.value; });
  const radios = s.protocols.map(p => {
    const input = el("input", { type: "radio", name: "protocol", id: `tryit-${p}`, value: p, checked: p === d.protocol });
    input.addEventListener("change", () => {
      d.protocol = p;
      if (d.body === null) body.value = EXAMPLES[p];  // untouched: show this protocol's example
    });
    return el("span", {}, input, el("label", { for: `tryit-${p}` }, p.toUpperCase()), " ");
  });
  const answer = el("pre", { id: "tryit-out", class: "log", role: "log", tabindex: "0", "aria-live": "polite",
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
      const res = await fetch(`/ui-api/inferenceservices/${enc(s.name)}/predict?protocol=${d.protocol}`, {
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

async function serviceView(name) {
  const s = await get("inferenceservices/" + enc(name));
  const out = [el("h1", {}, `InferenceService ${s.name} `, stateCell(s.state)),
               el("p", { class: "meta" }, [`model format ${s.format || "?"}`, `protocol ${s.protocol}`,
                                           s.runtime && `runtime ${s.runtime}`].filter(Boolean).join(" · ")),
               s.url ? el("p", { class: "uri" }, "URL ", el("code", {}, s.url)) : null];
  if (s.message) out.push(el("p", {}, s.message));
  out.push(el("h2", { id: "tryit-h" }, "Try it"));
  if (!s.can_try) return [...out, muted("Send requests with `kflab predict` on this backend.")];
  return [...out, tryForm(s)];
}
