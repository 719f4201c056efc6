// What the views read: /ui-api/ (the backend API the CLI uses) and, for KFP objects, the
// KFP v2beta1 API at /apis/v2beta1/ (the routes the KFP UI itself calls). Every answer a
// view read while drawing is kept, so a refresh that brings nothing new redraws nothing.

export class Refused extends Error {}   // 403: the tab's token is not this server's
export class Missing extends Error {}   // 404

let fetched = [];
export function startDraw() { fetched = []; }
export function drawnFrom() { return JSON.stringify(fetched); }

// A fetch that a busy machine's dropped connection does not end: a network error (not an
// HTTP answer) is tried again twice, after 0.2 s and 0.6 s, before the view says so.
async function fetchAgain(url) {
  for (const wait of [200, 600]) {
    try { return await fetch(url, { credentials: "same-origin" }); }
    catch { await new Promise(r => setTimeout(r, wait)); }
  }
  return fetch(url, { credentials: "same-origin" });
}

async function read(url, label) {
  const res = await fetchAgain(url);
  let data = null;
  try { data = await res.json(); } catch { data = null; }
  if (res.status === 403) throw new Refused((data && data.message) || "refused");
  if (res.status === 404) throw new Missing((data && data.message) || `${label}: not found`);
  if (!res.ok) throw new Error((data && data.message) || `${label}: ${res.status} ${res.statusText}`);
  fetched.push(data);
  return data;
}

export function get(path) { return read("/ui-api/" + path, path); }

// GET /apis/v2beta1/PATH?QUERY (query: an object; empty values are left out)
export function kfp(path, query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) if (v !== "" && v != null) q.set(k, v);
  const qs = q.toString();
  return read("/apis/v2beta1/" + path + (qs ? "?" + qs : ""), path);
}

// A v2beta1 filter (backend/api/v2beta1/filter.proto) of string predicates.
export function filter(...predicates) {
  const ps = predicates.filter(Boolean);
  return ps.length ? JSON.stringify({ predicates: ps }) : "";
}

// Whether this server answers the KFP API (the local backend does; on a cluster KFP's own
// API is Kubeflow's, `kflab open pipelines`): asked once.
let info = null;
export async function serverInfo() {
  if (!info) {
    const res = await fetchAgain("/ui-api/info");
    if (res.status === 403) throw new Refused("refused");
    info = res.ok ? await res.json() : { kfp_api: false, backend: "" };
  }
  return info;
}
