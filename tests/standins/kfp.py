"""STAND-INS for Kubeflow Pipelines' services, for the cluster backend's tests:

- the KFP v2beta1 REST API (ml-pipeline:8888): experiments (create) and runs (create with an
  inline pipeline_spec or a pipeline version, get, delete), plus /apis/v2beta1/healthz; the
  rest that kfp.Client's documented calls reach (pipelines, versions, list filters, sort and
  pages, archive, recurring runs...) is in kfp_resources.py. Responses follow the API's own
  schema (the 2.16.0 swagger; the tests validate every response against it). A run
  executes with kfp.local (kfp_run.py) and moves PENDING -> RUNNING -> SUCCEEDED/FAILED.
  task_details are what KFP 2.16 writes (kfp_argo.py): the persistence agent's report of
  the run's Argo nodes (drivers, a DAG node per task with an `executor` child,
  root-driver, root, the workflow's node; no execution ids, no outputs,
  no pod names) and, for cache-enabled tasks that ran, the launcher's nameless cache rows.
  Each Pod node becomes a pod in `kubeflow`, named and labelled as Argo v3.7 names it.
- ML Metadata (metadata-grpc-service:8080): GetContextByTypeAndName, GetExecutionsByContext,
  GetExecutionsByID, GetEventsByExecutionIDs, GetArtifactsByID over gRPC, holding what KFP's
  driver and launcher record (Mlmd.record_root, Mlmd.record cite the writers): the run's
  context (system.PipelineRun, named by the run id), per task an execution (display_name,
  task_name, pod_name, outputs...), OUTPUT events keyed by output name, artifacts with uri,
  type and metadata as custom properties. Message definitions are kflab's own minimal ones
  (lab/backends/cluster/pipelines/mlmd.py), so this stand-in cannot catch a wrong field
  number there: those were checked by hand against the ml-metadata protos vendored in
  kubeflow/pipelines 2.16.0 (third_party/ml-metadata).
- the object store (seaweedfs:8333, S3 API): GET of an object, path-style, the request's
  SigV4 signature checked with the stand-in's credentials (403 otherwise).

Not covered: what kfp_resources.py lists as not covered, namespaces (multi-user), caching,
the UI and its artifact proxy, MLMD types and ParentContexts, cache hits (no task is ever
served from cache here), Argo's Omitted nodes for tasks never scheduled.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STAMP = "%Y-%m-%dT%H:%M:%SZ"
BUCKET = "mlpipeline"


def now() -> str:
    return time.strftime(STAMP, time.gmtime())


def mlmd_value(m: dict[str, Any], value: Any) -> Any:
    """A JSON value as the launcher stores it in MLMD (KFP 2.16.0
    backend/src/v2/metadata/converter.go:138-171 StructValueToMLMDValue): numbers as
    doubles (:149-150), booleans as ints 0/1 (:151-152), strings as strings (:147-148),
    a list as a struct {"list": [...]} (:153-159), an object as a struct {"struct": {...}}
    (:160-166); null is refused (:167-169, "unknown/unsupported value type"), so the step
    fails."""
    v = m["Value"]()
    if isinstance(value, bool):
        v.int_value = int(value)
    elif isinstance(value, int | float):
        v.double_value = float(value)
    elif isinstance(value, str):
        v.string_value = value
    elif isinstance(value, list):
        v.struct_value.update({"list": value})
    elif isinstance(value, dict):
        v.struct_value.update({"struct": value})
    else:
        raise ValueError(f"unknown/unsupported value type {type(value).__name__}")
    return v


@dataclass
class Mlmd:
    """The MLMD store, holding what KFP 2.16's driver and launcher write (cited per field)."""

    contexts: dict[tuple[str, str], Any] = field(default_factory=dict)  # (type, name) -> ctx
    in_context: dict[int, list[int]] = field(default_factory=dict)  # context id -> executions
    executions: dict[int, Any] = field(default_factory=dict)
    artifacts: dict[int, Any] = field(default_factory=dict)
    events: list[Any] = field(default_factory=list)
    next_id: int = 1
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: Any = None
    port: int = 0

    def new_id(self) -> int:
        with self.lock:
            self.next_id += 1
            return self.next_id

    def context(self, type_name: str, name: str) -> Any:
        """metadata/client.go getOrInsertContext."""
        from lab.backends.cluster.pipelines.mlmd import messages

        with self.lock:
            found = self.contexts.get((type_name, name))
        if found is None:
            found = messages()["Context"](id=self.new_id(), name=name, type=type_name,
                                          type_id=1 if type_name == "system.Pipeline" else 2)
            with self.lock:
                self.contexts[(type_name, name)] = found
                self.in_context[found.id] = []
        return found

    def _put(self, exe: Any, pipeline: str, run_id: str) -> None:
        """PutExecution with the pipeline's and the run's contexts (metadata/client.go
        CreateExecution and PublishExecution pass both)."""
        ctxs = [self.context("system.Pipeline", pipeline),
                self.context("system.PipelineRun", run_id)]
        with self.lock:
            self.executions[exe.id] = exe
            for c in ctxs:
                if exe.id not in self.in_context[c.id]:
                    self.in_context[c.id].append(exe.id)

    def record_root(self, run_id: str, pipeline: str) -> int:
        """The root DAG's execution (driver/root_dag.go RootDAG -> CreateExecution): type
        system.DAGExecution, name `run/<run id>`, empty display_name and task_name."""
        from lab.backends.cluster.pipelines.mlmd import messages

        m = messages()
        exe = m["Execution"](id=self.new_id(), type="system.DAGExecution", type_id=11,
                             name=f"run/{run_id}", last_known_state=2)
        exe.custom_properties["display_name"].string_value = ""
        exe.custom_properties["task_name"].string_value = ""
        self._put(exe, pipeline, run_id)
        return int(exe.id)

    def record(self, task: dict[str, Any], run_id: str, pipeline: str, *, pod: str,
               parent: int, fingerprint: str) -> tuple[int, dict[str, int]]:
        """A container task's execution as the driver creates it (driver/container.go
        Container: TaskName, DisplayName = taskInfo.name; metadata/client.go CreateExecution:
        display_name, task_name, parent_dag_id, pod_name, pod_uid, namespace, image,
        cache_fingerprint) and the launcher publishes it (component/launcher_v2.go Execute ->
        metadata/client.go PublishExecution: state, `outputs` struct of output parameters,
        one OUTPUT event per output artifact, path key = output name; RecordArtifact: uri,
        type, state LIVE, display_name = output name, the artifact's metadata as custom
        properties). Returns its id and {output name: artifact id}."""
        from lab.backends.cluster.pipelines.mlmd import messages

        m = messages()
        exe = m["Execution"](id=self.new_id(), type="system.ContainerExecution", type_id=12,
                             last_known_state=3 if task["state"] == "SUCCEEDED" else 4)
        props = exe.custom_properties
        props["display_name"].string_value = task["name"]
        props["task_name"].string_value = task["name"]
        props["parent_dag_id"].int_value = parent
        props["pod_name"].string_value = pod
        props["pod_uid"].string_value = str(uuid.uuid5(uuid.NAMESPACE_URL, pod))
        props["namespace"].string_value = "kubeflow"
        props["image"].string_value = task.get("image", "")
        if fingerprint:
            props["cache_fingerprint"].string_value = fingerprint
        if task["state"] == "SUCCEEDED":
            props["outputs"].struct_value.update(task["parameters"])
        outputs = {}
        salt = uuid.uuid4()  # driver/driver.go: <pipeline root>/<task>/<salt>/<output name>
        for name, art in task["artifacts"].items():
            a = m["Artifact"](id=self.new_id(), type=art["type"], state=2,
                              uri=f"minio://{BUCKET}/v2/artifacts/{pipeline}/{run_id}/"
                                  f"{task['name']}/{salt}/{name}")
            a.custom_properties["display_name"].string_value = name
            a.custom_properties["store_session_info"].string_value = json.dumps(
                {"Provider": "minio", "Params": {"region": "minio", "endpoint":
                                                 "seaweedfs.kubeflow:8333",
                                                 "disableSSL": "true",
                                                 "fromEnv": "false",
                                                 "secretName": "mlpipeline-minio-artifact",
                                                 "accessKeyKey": "accesskey",
                                                 "secretKeyKey": "secretkey"}})
            for k, v in art["metadata"].items():
                if k != "_kfp_workspace":
                    a.custom_properties[k].CopyFrom(mlmd_value(m, v))
            ev = m["Event"](artifact_id=a.id, execution_id=exe.id, type=4)
            ev.path.steps.add(key=name)
            with self.lock:
                self.artifacts[a.id] = a
                self.events.append(ev)
            outputs[name] = int(a.id)
        self._put(exe, pipeline, run_id)
        return int(exe.id), outputs

    def start(self) -> None:
        import grpc

        from lab.backends.cluster.pipelines.mlmd import RPCS, SERVICE, messages

        m = messages()

        def answer(rpc: str, req: Any) -> Any:
            resp = m[RPCS[rpc][1]]
            with self.lock:
                if rpc == "GetContextByTypeAndName":
                    found = self.contexts.get((req.type_name, req.context_name))
                    return resp(context=found) if found is not None else resp()
                if rpc == "GetExecutionsByContext":
                    ids = self.in_context.get(req.context_id, [])
                    size = req.options.max_result_size or 20
                    first = int(req.options.next_page_token or 0)
                    page = ids[first:first + size]
                    more = first + size < len(ids)
                    return resp(executions=[self.executions[i] for i in page],
                                next_page_token=str(first + size) if more else "")
                if rpc == "GetExecutionsByID":
                    return resp(executions=[self.executions[i] for i in req.execution_ids
                                            if i in self.executions])
                if rpc == "GetArtifactsByID":
                    return resp(artifacts=[self.artifacts[i] for i in req.artifact_ids
                                           if i in self.artifacts])
                ids = set(req.execution_ids)
                return resp(events=[e for e in self.events if e.execution_id in ids])

        def handler(rpc: str) -> Any:
            return grpc.unary_unary_rpc_method_handler(
                lambda req, _ctx: answer(rpc, req),
                request_deserializer=m[RPCS[rpc][0]].FromString,
                response_serializer=lambda r: r.SerializeToString())

        from concurrent import futures

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            SERVICE, {rpc: handler(rpc) for rpc in RPCS})])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(0)


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        return

    def reply(self, code: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@dataclass
class ObjectStore:
    access: str = "standin-access"
    secret: str = "standin-secret-key"
    objects: dict[str, bytes] = field(default_factory=dict)  # "bucket/key" -> bytes
    server: ThreadingHTTPServer | None = None
    port: int = 0

    def start(self) -> None:
        store = self

        class Handler(_Quiet):
            def do_GET(self) -> None:
                from lab.backends.cluster.pipelines.objectstore import sigv4_headers

                auth = self.headers.get("Authorization") or ""
                amz = self.headers.get("x-amz-date") or ""
                m = re.search(r"SignedHeaders=([^,]+)", auth)
                try:
                    when = datetime.datetime.strptime(amz, "%Y%m%dT%H%M%SZ").replace(
                        tzinfo=datetime.UTC)
                except ValueError:
                    self.reply(403, {"error": "no x-amz-date"})
                    return
                path = urllib.parse.unquote(self.path.split("?", 1)[0])
                signed = (m.group(1).split(";") if m else [])
                extra = {h: self.headers.get(h, "") for h in signed
                         if h not in ("host", "x-amz-content-sha256", "x-amz-date")}
                want = sigv4_headers("GET", self.headers.get("Host", ""), path, "", extra,
                                     store.access, store.secret, when)["Authorization"]
                if auth != want:
                    self.reply(403, {"error": "SignatureDoesNotMatch"})
                    return
                data = store.objects.get(path.lstrip("/"))
                if data is None:
                    self.reply(404, {"error": "NoSuchKey"})
                    return
                self.reply(200, data, "application/octet-stream")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@dataclass
class KfpApi:
    root: Path
    mlmd: Mlmd
    store: ObjectStore
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)  # run id -> its log
    responses: list[tuple[str, str, int, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # callback(pod) for each pod of a run's workflow: {"name", "labels", "annotations",
    # "lines"}; the stand-in cluster creates it (tests/standins/cluster.py add_kfp)
    on_pod: Any = None
    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # run -> PodName
    cache_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)
    more: Any = None  # kfp_resources.Resources: pipelines, recurring runs, list options...

    # --- runs execute here ------------------------------------------------------------------

    def _report(self, run_id: str, wf: dict[str, Any]) -> None:
        """The persistence agent's ReportWorkflow (apiserver/server/report_server.go
        reportTasksFromExecution -> toModelTasks -> CreateOrUpdateTasks); the run's
        task_details are then every task row of the run (run_store.go joins tasks by RunUUID),
        the launcher's cache rows included."""
        from tests.standins import kfp_argo

        with self.lock:
            self.workflows[run_id] = wf
            rows = self.rows.setdefault(run_id, {})
            kfp_argo.store_tasks(kfp_argo.model_tasks(wf), rows, int(time.time()))
            details = [kfp_argo.api_task_detail(t) for t in
                       [*rows.values(), *self.cache_rows.get(run_id, [])]]
            self.runs[run_id]["run_details"] = {"task_details": details}

    def _execute(self, run_id: str) -> None:
        from tests.standins import kfp_argo

        run = self.runs[run_id]
        ir = run["pipeline_spec"]
        created = time.time()
        folder = self.root / run_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ir.json").write_text(json.dumps(ir))
        (folder / "params.json").write_text(json.dumps(
            (run.get("runtime_config") or {}).get("parameters") or {}))
        log = folder / "run.log"
        self.logs[run_id] = log
        with self.lock:
            run["state"] = "RUNNING"
            run["state_history"].append({"update_time": now(), "state": "RUNNING"})
        self._report(run_id, kfp_argo.build_workflow(run_id, ir, {}, created, None))
        with log.open("ab") as out:
            proc = subprocess.run([sys.executable, "-m", "tests.standins.kfp_run",
                                   str(folder / "ir.json"), str(folder / "params.json"),
                                   str(folder / "root"), str(folder / "out.json")],
                                  cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                  env={**__import__("os").environ, "PIP_NO_INDEX": "1",
                                       "PIP_DISABLE_PIP_VERSION_CHECK": "1"}, check=False)
        try:
            result = json.loads((folder / "out.json").read_text())
        except (OSError, ValueError):
            result = {"state": "FAILED", "error": f"runner exited {proc.returncode}",
                      "tasks": []}
        finished = time.time()
        pipeline = (ir.get("pipelineInfo") or {}).get("name", "pipeline")
        ran = [t for t in result.get("tasks", []) if t["state"] in ("SUCCEEDED", "FAILED")]
        wf = kfp_argo.build_workflow(run_id, ir, {
            t["name"]: {"phase": "Succeeded" if t["state"] == "SUCCEEDED" else "Failed",
                        "started": t.get("started") or created,
                        "finished": t.get("finished") or finished} for t in ran},
            created, finished)
        nodes = wf["status"]["nodes"]
        executor_pod = {n["name"].split(".")[-2]: kfp_argo.retrieve_pod_name(wf, n)
                        for n in nodes.values() if n["displayName"] == "executor"}
        dag = ((ir.get("root") or {}).get("dag") or {}).get("tasks") or {}
        root_exec = self.mlmd.record_root(run_id, pipeline)
        for task in ran:
            caching = bool(((dag.get(task["name"]) or {}).get("cachingOptions") or {})
                           .get("enableCache"))
            fingerprint = (hashlib.sha256(json.dumps([task["name"], dag.get(task["name"])],
                                                     sort_keys=True).encode()).hexdigest()
                           if caching else "")
            exec_id, arts = self.mlmd.record(task, run_id, pipeline,
                                             pod=executor_pod.get(task["name"], ""),
                                             parent=root_exec, fingerprint=fingerprint)
            for name, art in task["artifacts"].items():
                p = Path(art["path"])
                a = self.mlmd.artifacts[arts[name]]
                self.store.objects[a.uri.removeprefix("minio://")] = \
                    p.read_bytes() if p.is_file() else b""
            if fingerprint and task["state"] == "SUCCEEDED":
                self.cache_rows.setdefault(run_id, []).append(kfp_argo.cache_row(
                    run_id, pipeline, "", exec_id, fingerprint,
                    int(task.get("started") or created), int(finished)))
        self._report(run_id, wf)
        self._make_pods(run_id, wf, log)
        with self.lock:
            run["state"] = result["state"]
            run["finished_at"] = time.strftime(STAMP, time.gmtime(finished))
            run["state_history"].append({"update_time": now(), "state": result["state"]})
            if result.get("error"):
                run["error"] = {"code": 2, "message": result["error"]}

    def _make_pods(self, run_id: str, wf: dict[str, Any], log: Path) -> None:
        """A pod per Pod node, as Argo v3.7 creates it (workflow/controller/workflowpod.go
        createWorkflowPod: name from util.GeneratePodName, labels workflows.argoproj.io/workflow
        and /completed, annotations workflows.argoproj.io/node-id and /node-name) with the
        workflow's pod metadata label pipeline/runid (KFP apiserver/template/v2_template.go
        SetPodMetadataLabels). An executor's log is its part of the kfp.local output."""
        from tests.standins import kfp_argo

        if self.on_pod is None:
            return
        text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))
        parts: dict[str, list[str]] = {}
        current = None
        for line in text.splitlines():
            m = re.search(r"Executing task '([^']+)'", line)
            if m:
                current = m.group(1)
            if current is not None:
                parts.setdefault(current, []).append(line)
        name = wf["metadata"]["name"]
        for node in wf["status"]["nodes"].values():
            if node["type"] != "Pod":
                continue
            task = node["name"].split(".")[-2] if node["displayName"] == "executor" else None
            self.on_pod({"name": kfp_argo.retrieve_pod_name(wf, node),
                         "labels": {"workflows.argoproj.io/workflow": name,
                                    "workflows.argoproj.io/completed": "true",
                                    "pipeline/runid": run_id},
                         "annotations": {"workflows.argoproj.io/node-id": node["id"],
                                         "workflows.argoproj.io/node-name": node["name"]},
                         "lines": parts.get(task, []) if task else []})

    # --- the REST API -----------------------------------------------------------------------

    def start(self) -> None:
        from tests.standins.kfp_resources import Resources, lean, not_found, shown, status

        api = self
        self.more = Resources(self)

        class Handler(_Quiet):
            raw = b""

            def _body(self) -> Any:
                return json.loads(self.raw) if self.raw else {}

            def answer(self, code: int, body: Any, schema: str) -> None:
                api.responses.append((self.command, self.path, code, (schema, body)))
                self.reply(code, body)

            def error(self, code: int, grpc_code: int, message: str) -> None:
                """google.rpc.Status as grpc-gateway writes a UserError (error.go
                GRPCStatus): the message, and in details the user-facing one."""
                self.answer(code, status(grpc_code, message, message), "googlerpcStatus")

            def _more(self) -> bool:
                """The calls kfp_resources.py answers (pipelines, recurring runs, lists)."""
                n = int(self.headers.get("Content-Length") or 0)
                self.raw = self.rfile.read(n) if n else b""
                url = urllib.parse.urlsplit(self.path)
                q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                found = api.more.answer(self.command, url.path, q, self.raw,
                                        self.headers.get("Content-Type") or "")
                if found is not None:
                    self.answer(*found)
                return found is not None

            def do_GET(self) -> None:
                if self._more():
                    return
                url = urllib.parse.urlsplit(self.path)
                q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                parts = url.path.rstrip("/").split("/")[3:]
                if parts == ["healthz"]:
                    # apiserver/main.go: the healthz handler writes these four fields
                    self.answer(200, {"commit_sha": "standin", "tag_name": "2.16.0",
                                      "multi_user": False, "pipeline_store": "database"},
                                "v2beta1GetHealthzResponse")
                elif parts == ["experiments"]:
                    items = api._filtered(list(api.experiments.values()), q)
                    self.answer(200, {"experiments": items, "total_size": len(items)},
                                "v2beta1ListExperimentsResponse")
                elif parts == ["runs"]:
                    with api.lock:
                        items = [json.loads(json.dumps(r)) for r in api.runs.values()
                                 if not q.get("experiment_id")
                                 or r["experiment_id"] == q["experiment_id"]]
                    items = api._filtered(items, q)
                    if q.get("sort_by", "").startswith("created_at"):
                        items.sort(key=lambda r: r["created_at"],
                                   reverse=q["sort_by"].endswith("desc"))
                    self.answer(200, {"runs": items, "total_size": len(items)},
                                "v2beta1ListRunsResponse")
                elif len(parts) == 2 and parts[0] == "runs":
                    with api.lock:
                        run = json.loads(json.dumps(api.runs.get(parts[1])))
                    if run is None:  # run_store.go GetRun, wrapped by its callers
                        self.answer(*not_found("Run", parts[1], f"Failed to fetch run "
                                               f"{parts[1]}", "Failed to get a run"))
                    else:
                        self.answer(200, shown(run), "v2beta1Run")
                else:
                    self.error(404, 5, f"the KFP stand-in does not serve {url.path}")

            def do_POST(self) -> None:
                if self._more():
                    return
                parts = urllib.parse.urlsplit(self.path).path.rstrip("/").split("/")[3:]
                body = self._body()
                if parts == ["experiments"]:
                    if not body.get("display_name"):
                        self.error(400, 3, "Invalid input error: experiment name is empty")
                        return
                    if any(e["display_name"] == body["display_name"]
                           for e in api.experiments.values()):
                        # experiment_store.go CreateExperiment: names are unique
                        self.error(409, 6, "Failed to create a new experiment. The name "
                                           f"{body['display_name']} already exists. Please "
                                           "specify a new name")
                        return
                    exp = {"experiment_id": str(uuid.uuid4()),
                           "display_name": body["display_name"],
                           "description": body.get("description", ""),
                           "created_at": now(), "namespace": "",
                           "storage_state": "AVAILABLE",
                           # SetLastRunTimestamp; 0 (the epoch) until a run is made
                           "last_run_created_at": "1970-01-01T00:00:00Z"}
                    api.experiments[exp["experiment_id"]] = exp
                    self.answer(200, lean(exp), "v2beta1Experiment")
                elif parts == ["runs"]:
                    ref = body.get("pipeline_version_reference")
                    if ref and not body.get("pipeline_spec"):  # a run of an uploaded version
                        body["pipeline_spec"] = api.more.spec_of(ref)
                    if not body.get("display_name") or not isinstance(
                            body.get("pipeline_spec"), dict):
                        self.error(400, 3, "Invalid input error: a run needs display_name "
                                           "and a pipeline_spec (or a pipeline version)")
                        return
                    if body.get("experiment_id") not in api.experiments:
                        self.error(404, 5, f"experiment {body.get('experiment_id')} not found")
                        return
                    spec = body["pipeline_spec"]
                    if isinstance(spec.get("pipeline_spec"), dict):  # with a platform spec
                        spec = spec["pipeline_spec"]
                    if spec.get("schemaVersion") != "2.1.0":
                        self.error(400, 3, f"unsupported schemaVersion {spec.get('schemaVersion')}")
                        return
                    run_id = str(uuid.uuid4())
                    run = {"run_id": run_id, "display_name": body["display_name"],
                           "experiment_id": body["experiment_id"],
                           "storage_state": "AVAILABLE", "description": "",
                           "pipeline_spec": spec, "pipeline_version_reference": ref,
                           "runtime_config": body.get("runtime_config") or {},
                           "service_account": "pipeline-runner", "created_at": now(),
                           "scheduled_at": now(), "finished_at": "1970-01-01T00:00:00Z",
                           "state": "PENDING",
                           "state_history": [{"update_time": now(), "state": "PENDING"}],
                           "run_details": {}}
                    with api.lock:
                        api.runs[run_id] = run
                        snapshot = json.loads(json.dumps(run))
                        # experiment_store.go SetLastRunTimestamp
                        api.experiments[body["experiment_id"]]["last_run_created_at"] = \
                            run["created_at"]
                    threading.Thread(target=api._execute, args=(run_id,), daemon=True).start()
                    self.answer(200, shown(snapshot), "v2beta1Run")
                else:
                    self.error(404, 5, "not served by the KFP stand-in")

            def do_DELETE(self) -> None:
                if self._more():
                    return
                parts = urllib.parse.urlsplit(self.path).path.rstrip("/").split("/")[3:]
                if len(parts) == 2 and parts[0] == "runs" and parts[1] in api.runs:
                    with api.lock:
                        del api.runs[parts[1]]
                    self.answer(200, {}, "")
                else:
                    self.error(404, 5, "run not found")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def _filtered(items: list[dict[str, Any]], q: dict[str, str]) -> list[dict[str, Any]]:
        if not q.get("filter"):
            return items
        for p in json.loads(q["filter"]).get("predicates") or []:
            if p.get("operation") != "EQUALS":
                raise ValueError(f"the stand-in filters with EQUALS only, not {p}")
            items = [i for i in items if str(i.get(p["key"])) == str(p.get("string_value"))]
        return items

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
