// kflab ui: the page's boot. Each view lives in its own module under views/ and adds its
// routes; the router draws the one the address names and redraws it when the server's event
// stream (/events) says the records changed: no reload, no polling.

import { route, start } from "./router.js";
import * as runs from "./views/runs.js";
import * as run from "./views/run.js";
import * as compare from "./views/compare.js";
import * as pipelines from "./views/pipelines.js";
import * as kfpExperiments from "./views/kfpexperiments.js";
import * as recurring from "./views/recurring.js";
import * as katib from "./views/katib.js";
import * as jobs from "./views/jobs.js";
import * as serving from "./views/serving.js";
import * as labs from "./views/labs.js";

// The token (or the launch file's one-time code) that opened this page is in the page's
// cookie now: take it out of the address bar and this history entry (lab/webui/server.py).
if (/[?&](token|code)=/.test(location.search)) {
  history.replaceState(history.state, "", location.pathname + location.hash);
}

// KFP's own addresses first (kfp.Client prints them), then kflab's
for (const m of [run, runs, compare, pipelines, kfpExperiments, recurring, katib, jobs, serving, labs]) {
  for (const [pattern, view] of m.routes) route(pattern, view);
}
start();
