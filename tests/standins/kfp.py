"""STAND-INS for Kubeflow Pipelines' services, for the cluster backend's tests:

- the KFP v2beta1 REST API (ml-pipeline:8888), the endpoints kflab uses only: experiments
  (list with a display_name filter, create) and runs (create with an inline pipeline_spec,
  get, list by experiment with a display_name filter and sort_by created_at, delete), plus
  /apis/v2beta1/healthz. Responses follow the API's own schema (the 2.16.0 swagger; the tests
  validate every response against it). A run executes with kfp.local (kfp_run.py) and moves
  PENDING -> RUNNING -> SUCCEEDED/FAILED; task_details list the pipeline's tasks with their
  ML Metadata execution ids and output artifact ids, as KFP's persistence agent fills them.
- ML Metadata (metadata-grpc-service:8080): GetExecutionsByID, GetEventsByExecutionIDs,
  GetArtifactsByID over gRPC, holding what KFP's launcher records: per task an execution
  (custom properties display_name, task_name, outputs), OUTPUT events keyed by output name,
  artifacts with uri, type and metadata as custom properties. Message definitions are kflab's
  own minimal ones (lab/backends/cluster/pipelines/mlmd.py), so this stand-in cannot catch a
  wrong field number there: those were checked by hand against ml-metadata's proto.
- the object store (seaweedfs:8333, S3 API): GET of an object, path-style, the request's
  SigV4 signature checked with the stand-in's credentials (403 otherwise).

Not covered: pipelines and pipeline versions, recurring runs, archive/terminate/retry,
namespaces (multi-user), caching, paging beyond one page, filters other than EQUALS on
display_name, the UI and its artifact proxy, MLMD contexts and types.
"""

from __future__ import annotations

import datetime
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


@dataclass
class Mlmd:
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

    def record(self, task: dict[str, Any], run_id: str, pipeline: str) -> tuple[int, dict]:
        """An execution with its outputs and artifacts, as KFP's launcher publishes them;
        returns its id and {output name: artifact id}."""
        from lab.backends.cluster.pipelines.mlmd import messages

        m = messages()
        exe = m["Execution"](id=self.new_id(), type="system.ContainerExecution",
                             last_known_state=3 if task["state"] == "SUCCEEDED" else 4)
        exe.custom_properties["display_name"].string_value = task["name"]
        exe.custom_properties["task_name"].string_value = task["name"]
        exe.custom_properties["outputs"].struct_value.update(task["parameters"])
        outputs = {}
        for name, art in task["artifacts"].items():
            a = m["Artifact"](id=self.new_id(), type=art["type"], state=2,
                              uri=f"minio://{BUCKET}/v2/artifacts/{pipeline}/{run_id}/"
                                  f"{task['name']}/{name}")
            a.custom_properties["display_name"].string_value = name
            for k, v in art["metadata"].items():
                value = a.custom_properties[k]
                if isinstance(v, bool):
                    value.bool_value = v
                elif isinstance(v, int):
                    value.int_value = v
                elif isinstance(v, float):
                    value.double_value = v
                elif isinstance(v, str):
                    value.string_value = v
                else:
                    value.struct_value.update({"value": v})
            ev = m["Event"](artifact_id=a.id, execution_id=exe.id, type=4)
            ev.path.steps.add(key=name)
            with self.lock:
                self.artifacts[a.id] = a
                self.events.append(ev)
            outputs[name] = a.id
        with self.lock:
            self.executions[exe.id] = exe
        return exe.id, outputs

    def start(self) -> None:
        import grpc

        from lab.backends.cluster.pipelines.mlmd import RPCS, SERVICE, messages

        m = messages()

        def handler(rpc: str) -> Any:
            req_name, resp_name = RPCS[rpc]

            def answer(req: Any, _ctx: Any) -> Any:
                with self.lock:
                    if rpc == "GetExecutionsByID":
                        return m[resp_name](executions=[self.executions[i] for i in
                                                        req.execution_ids
                                                        if i in self.executions])
                    if rpc == "GetArtifactsByID":
                        return m[resp_name](artifacts=[self.artifacts[i] for i in
                                                       req.artifact_ids if i in self.artifacts])
                    ids = set(req.execution_ids)
                    return m[resp_name](events=[e for e in self.events if e.execution_id in ids])

            return grpc.unary_unary_rpc_method_handler(
                answer, request_deserializer=m[req_name].FromString,
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
    on_run: Any = None  # callback(run) when a run starts (the stand-in cluster makes a pod)

    # --- runs execute here ------------------------------------------------------------------

    def _execute(self, run_id: str) -> None:
        run = self.runs[run_id]
        folder = self.root / run_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ir.json").write_text(json.dumps(run["pipeline_spec"]))
        (folder / "params.json").write_text(json.dumps(
            (run.get("runtime_config") or {}).get("parameters") or {}))
        log = folder / "run.log"
        self.logs[run_id] = log
        with self.lock:
            run["state"] = "RUNNING"
            run["state_history"].append({"update_time": now(), "state": "RUNNING"})
            for t in run["run_details"]["task_details"]:
                t["state"] = "RUNNING"
        if self.on_run is not None:
            self.on_run(run)
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
        pipeline = (run["pipeline_spec"].get("pipelineInfo") or {}).get("name", "pipeline")
        details = []
        for task in result.get("tasks", []):
            exec_id, arts = self.mlmd.record(task, run_id, pipeline)
            for name, art in task["artifacts"].items():
                p = Path(art["path"])
                data = p.read_bytes() if p.is_file() else b""
                self.store.objects[f"{BUCKET}/v2/artifacts/{pipeline}/{run_id}/"
                                   f"{task['name']}/{name}"] = data
            details.append({
                "run_id": run_id, "task_id": str(uuid.uuid4()), "display_name": task["name"],
                "create_time": run["created_at"], "start_time": result.get("started"),
                "end_time": result.get("finished"), "state": task["state"],
                "execution_id": str(exec_id), "pod_name": f"{run_id[:8]}-{task['name']}",
                "outputs": {n: {"artifact_ids": [str(i)]} for n, i in arts.items()}})
        root_task = {"run_id": run_id, "task_id": str(uuid.uuid4()), "display_name": "root",
                     "create_time": run["created_at"], "state": result["state"]}
        with self.lock:
            run["run_details"]["task_details"] = [root_task, *details]
            run["state"] = result["state"]
            run["finished_at"] = result.get("finished") or now()
            run["state_history"].append({"update_time": now(), "state": result["state"]})
            if result.get("error"):
                run["error"] = {"code": 2, "message": result["error"]}

    # --- the REST API -----------------------------------------------------------------------

    def start(self) -> None:
        api = self

        class Handler(_Quiet):
            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else {}

            def answer(self, code: int, body: Any, schema: str) -> None:
                api.responses.append((self.command, self.path, code, (schema, body)))
                self.reply(code, body)

            def error(self, code: int, grpc_code: int, message: str) -> None:
                self.answer(code, {"code": grpc_code, "message": message},
                            "googlerpcStatus")

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                parts = url.path.rstrip("/").split("/")[3:]
                if parts == ["healthz"]:
                    self.answer(200, {"commit_sha": "standin", "tag_name": "2.16.0",
                                      "multi_user": False}, "v2beta1GetHealthzResponse")
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
                    if run is None:
                        self.error(404, 5, f"run {parts[1]} not found")
                    else:
                        self.answer(200, run, "v2beta1Run")
                else:
                    self.error(404, 5, f"the KFP stand-in does not serve {url.path}")

            def do_POST(self) -> None:
                parts = urllib.parse.urlsplit(self.path).path.rstrip("/").split("/")[3:]
                body = self._body()
                if parts == ["experiments"]:
                    if not body.get("display_name"):
                        self.error(400, 3, "Invalid input error: experiment name is empty")
                        return
                    exp = {"experiment_id": str(uuid.uuid4()),
                           "display_name": body["display_name"],
                           "description": body.get("description", ""),
                           "created_at": now(), "namespace": "",
                           "storage_state": "AVAILABLE", "last_run_created_at": now()}
                    api.experiments[exp["experiment_id"]] = exp
                    self.answer(200, exp, "v2beta1Experiment")
                elif parts == ["runs"]:
                    if not body.get("display_name") or not isinstance(
                            body.get("pipeline_spec"), dict):
                        self.error(400, 3, "Invalid input error: a run needs display_name "
                                           "and a pipeline_spec (or a pipeline version)")
                        return
                    if body.get("experiment_id") not in api.experiments:
                        self.error(404, 5, f"experiment {body.get('experiment_id')} not found")
                        return
                    spec = body["pipeline_spec"]
                    if spec.get("schemaVersion") != "2.1.0":
                        self.error(400, 3, f"unsupported schemaVersion {spec.get('schemaVersion')}")
                        return
                    tasks = list((spec.get("root") or {}).get("dag", {}).get("tasks", {}))
                    run_id = str(uuid.uuid4())
                    run = {"run_id": run_id, "display_name": body["display_name"],
                           "experiment_id": body["experiment_id"],
                           "storage_state": "AVAILABLE", "description": "",
                           "pipeline_spec": spec,
                           "runtime_config": body.get("runtime_config") or {},
                           "service_account": "pipeline-runner", "created_at": now(),
                           "scheduled_at": now(), "finished_at": "1970-01-01T00:00:00Z",
                           "state": "PENDING",
                           "state_history": [{"update_time": now(), "state": "PENDING"}],
                           "run_details": {"task_details": [
                               {"run_id": run_id, "display_name": t, "state": "PENDING",
                                "create_time": now()} for t in tasks]}}
                    with api.lock:
                        api.runs[run_id] = run
                        snapshot = json.loads(json.dumps(run))
                    threading.Thread(target=api._execute, args=(run_id,), daemon=True).start()
                    self.answer(200, snapshot, "v2beta1Run")
                else:
                    self.error(404, 5, "not served by the KFP stand-in")

            def do_DELETE(self) -> None:
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
