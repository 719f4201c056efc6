// Pipelines and their versions, as the KFP UI shows them: the uploaded pipelines; one
// pipeline's versions, and a version's graph (drawn from its pipeline spec) and the spec
// itself as YAML. Read from the KFP v2beta1 API. Addresses: #/pipelines,
// #/pipelines/details/ID (the link kfp.Client prints) and
// #/pipelines/details/ID/version/VERSION (the KFP UI's).

import { el, enc, link, muted, table, when } from "../dom.js";
import { get, kfp, serverInfo } from "../data.js";
import { Listing } from "../listing.js";
import { drawGraph, graphModel } from "../graph.js";
import { noApi } from "./kfpexperiments.js";

export const routes = [
  ["pipelines", () => pipelinesView()],
  ["pipelines/details/:pid", p => pipelineView(p.pid, null)],
  ["pipelines/details/:pid/version/:vid", p => pipelineView(p.pid, p.vid)],
];

const list = new Listing("pipelines", "pipelines", { name: "Pipeline", created_at: "Uploaded" });
const versions = new Listing("versions", "versions", { name: "Version", created_at: "Uploaded" });

async function pipelinesView() {
  if (!(await serverInfo()).kfp_api) return noApi();
  const answer = await kfp("pipelines", list.query());
  return [el("h1", {}, "Pipelines"),
          muted("Pipelines uploaded with kfp.Client (upload_pipeline, upload_pipeline_version)."),
          list.toolbar(),
          table(list.caption(), [
            list.column("name", p => link(`#/pipelines/details/${enc(p.pipeline_id)}`, p.display_name || p.name)),
            ["Description", p => p.description || ""],
            list.column("created_at", p => when(p.created_at)),
          ], answer.pipelines || [], { empty: list.q ? "no pipeline matches" : "none yet" }),
          list.pager(answer.next_page_token || "", answer.total_size)];
}

async function pipelineView(pid, vid) {
  if (!(await serverInfo()).kfp_api) return noApi();
  const p = await kfp(`pipelines/${enc(pid)}`);
  const answer = await kfp(`pipelines/${enc(pid)}/versions`, versions.query());
  const rows = answer.pipeline_versions || [];
  if (!vid) {  // the newest version, as the KFP UI opens a pipeline
    const newest = await kfp(`pipelines/${enc(pid)}/versions`, { page_size: 1, sort_by: "created_at desc" });
    vid = ((newest.pipeline_versions || [])[0] || {}).pipeline_version_id;
  }
  const out = [el("h1", {}, `Pipeline ${p.display_name || p.name}`),
               el("p", { class: "meta" }, [p.description, `uploaded ${when(p.created_at)}`, `id ${p.pipeline_id}`]
                                           .filter(Boolean).join(" · ")),
               el("h2", {}, "Versions"), versions.toolbar(),
               table(versions.caption(), [
                 versions.column("name", v => v.pipeline_version_id === vid
                   ? el("span", {}, el("strong", {}, v.display_name || v.name), " (shown below)")
                   : link(`#/pipelines/details/${enc(pid)}/version/${enc(v.pipeline_version_id)}`, v.display_name || v.name)),
                 ["Description", v => v.description || ""],
                 versions.column("created_at", v => when(v.created_at)),
               ], rows, { empty: "no version" }),
               versions.pager(answer.next_page_token || "", answer.total_size)];
  if (!vid) return out;
  const v = await kfp(`pipelines/${enc(pid)}/versions/${enc(vid)}`);
  const spec = await get(`pipelines/${enc(pid)}/versions/${enc(vid)}`);  // its graph and YAML
  out.push(el("h2", {}, `Version ${v.display_name || v.name}`),
           el("p", { class: "meta" }, [v.description, `uploaded ${when(v.created_at)}`, `id ${v.pipeline_version_id}`]
                                      .filter(Boolean).join(" · ")),
           el("h3", {}, "Graph"),
           spec.graph ? drawGraph(graphModel({ graph: spec.graph, tasks: [], edges: [] }, true), null, null)
                      : muted("This spec has no graph kflab can draw."),
           el("h3", { id: "spec-h" }, "Pipeline spec"),
           el("pre", { class: "spec", role: "region", tabindex: "0", "aria-labelledby": "spec-h", "data-keep-scroll": "spec" }, spec.yaml));
  return out;
}
