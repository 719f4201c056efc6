"""The KFP v2beta1 REST API on the local backend: what `kfp.Client(host=...)` calls.

Pipelines, versions and experiments are small JSON records under `<state>/kfp-api/`; a run
is a `PipelineRun` started by `kflab pipeline run` in a process of its own (the same engine,
record and lease as the CLI's, so it shows in `kflab get runs` and outlives a closed UI),
and read back from the backend in the API's `V2beta1Run` shape (KFP 2.16
backend/api/v2beta1/run.proto). Field names and enums follow the 2.16 swagger files; the
tests validate every exchange against them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import yaml

from lab import state
from lab.kube.conditions import now

PREFIX = "/apis/v2beta1"
FINISHED = ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELED")
KIND = "PipelineRun"


class ApiError(Exception):
    """An error answered as google.rpc.Status (HTTP status, gRPC code, message)."""

    def __init__(self, http: int, message: str) -> None:
        super().__init__(message)
        self.http = http

    def body(self) -> dict[str, Any]:
        code = {400: 3, 404: 5, 409: 6, 501: 12}.get(self.http, 13)
        return {"code": code, "message": str(self), "details": []}


def _new_id() -> str:
    return str(uuid.uuid4())


class KfpApi:
    """Answers one request at a time: `handle(method, path, query, content_type, body)`."""

    def __init__(self, root: Path, backend: Any, namespace: str = "default") -> None:
        self.root = Path(root)
        self.backend = backend
        self.namespace = namespace
        self.dir = state.path(self.root, "kfp-api")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}  # run id -> its kflab process
        self.lock = threading.Lock()  # one write at a time: names stay unique
        self.routes: list[tuple[str, re.Pattern[str], Any]] = [
            ("GET", re.compile(r"/healthz"), self.healthz),
            ("POST", re.compile(r"/pipelines/upload"), self.upload_pipeline),
            ("POST", re.compile(r"/pipelines/upload_version"), self.upload_version),
            ("GET", re.compile(r"/pipelines"), self.list_pipelines),
            ("GET", re.compile(r"/pipelines/(?P<pid>[\w-]+)"), self.get_pipeline),
            ("GET", re.compile(r"/pipelines/(?P<pid>[\w-]+)/versions"), self.list_versions),
            ("GET", re.compile(r"/pipelines/(?P<pid>[\w-]+)/versions/(?P<vid>[\w-]+)"),
             self.get_version),
            ("POST", re.compile(r"/experiments"), self.create_experiment),
            ("GET", re.compile(r"/experiments"), self.list_experiments),
            ("GET", re.compile(r"/experiments/(?P<eid>[\w-]+)"), self.get_experiment),
            ("POST", re.compile(r"/runs"), self.create_run),
            ("GET", re.compile(r"/runs"), self.list_runs),
            ("GET", re.compile(r"/runs/(?P<rid>[\w-]+)"), self.get_run),
        ]

    # -- dispatch ---------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], content_type: str,
               body: bytes) -> tuple[int, dict[str, Any]]:
        sub = path[len(PREFIX):] if path.startswith(PREFIX) else None
        known = False
        for verb, pattern, fn in self.routes if sub is not None else []:
            m = pattern.fullmatch(sub.rstrip("/") or "/")
            if not m:
                continue
            known = True
            if verb != method:
                continue
            try:
                if method == "GET":
                    return 200, fn(query=query, content_type=content_type, body=body,
                                   **m.groupdict())
                with self.lock:
                    return 200, fn(query=query, content_type=content_type, body=body,
                                   **m.groupdict())
            except ApiError as exc:
                return exc.http, exc.body()
        err = ApiError(405 if known else 404,
                       f"{method} {path}: not served by kflab's local KFP API"
                       if not known else f"{method} not allowed on {path}")
        return err.http, err.body()

    # -- records ----------------------------------------------------------------------------

    def _rec(self, what: str, rid: str) -> Path:
        return state.path(self.dir, what, f"{rid}.json")

    def _read(self, what: str, rid: str, label: str) -> dict[str, Any]:
        try:
            found = state.read_json(self._rec(what, rid), check=_shape(what))
        except state.StateError:
            found = None
        if found is None:
            raise ApiError(404, f"{label} {rid} not found")
        return found

    def _all(self, what: str) -> list[dict[str, Any]]:
        folder = self.dir / what
        out = []
        for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:  # a damaged record (moved aside as NAME.corrupt) is left out of the list
                out.append(state.read_json(p, check=_shape(what)))
            except state.StateError:
                continue
        return sorted((o for o in out if o), key=lambda o: o.get("created_at", ""))

    @staticmethod
    def _json(body: bytes) -> dict[str, Any]:
        try:
            data = json.loads(body or b"{}")
        except ValueError as exc:
            raise ApiError(400, f"the request body is not JSON: {str(exc)[:200]}") from None
        except RecursionError:
            raise ApiError(400, "the request body is not JSON kflab reads: nested too "
                                "deeply") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return data

    # -- health -----------------------------------------------------------------------------

    def healthz(self, **_: Any) -> dict[str, Any]:
        return {"multi_user": False, "pipeline_store": "database"}

    # -- pipelines --------------------------------------------------------------------------

    def _uploaded_spec(self, content_type: str, body: bytes) -> tuple[dict[str, Any], str]:
        """The pipeline spec of a multipart `uploadfile` (the YAML the compiler wrote)."""
        if not content_type.startswith("multipart/form-data"):
            raise ApiError(400, "upload a pipeline as multipart/form-data field 'uploadfile'")
        msg = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        for part in msg.iter_parts():
            if part.get_param("name", header="content-disposition") == "uploadfile":
                raw = part.get_payload(decode=True) or b""
                # kflab's bounded loader: an alias bomb, deep nesting or a python tag is
                # refused before it is expanded (yaml.safe_load_all would hand back a graph
                # that saving or running expands to billions of values)
                from lab.errors import InputError
                from lab.yamlio import load_documents

                try:
                    docs = [d.data for d in load_documents(raw, "uploadfile",
                                                           duplicates="keep") if d.data]
                except InputError as exc:
                    raise ApiError(400, f"uploadfile: {str(exc).splitlines()[0]}"
                                   ) from None
                if len(docs) == 2:
                    docs = [{"pipeline_spec": docs[0], "platform_spec": docs[1]}]
                spec = docs[0] if docs else None
                _documents(spec)  # refuses what is not a compiled pipeline
                return spec, part.get_filename() or "pipeline.yaml"
        raise ApiError(400, "missing form field 'uploadfile'")

    def upload_pipeline(self, query: dict[str, str], content_type: str, body: bytes,
                        **_: Any) -> dict[str, Any]:
        spec, filename = self._uploaded_spec(content_type, body)
        name = query.get("name") or query.get("display_name") or filename
        if any(p["name"] == name for p in self._all("pipelines")):
            raise ApiError(409, f"a pipeline named '{name}' already exists: upload a version")
        pipeline = {"pipeline_id": _new_id(), "name": name,
                    "display_name": query.get("display_name") or name,
                    "description": query.get("description", ""), "created_at": now(),
                    "namespace": query.get("namespace") or ""}
        state.write_json(self._rec("pipelines", pipeline["pipeline_id"]), pipeline)
        self._add_version(pipeline["pipeline_id"], name, query.get("description", ""), spec)
        return pipeline

    def upload_version(self, query: dict[str, str], content_type: str, body: bytes,
                       **_: Any) -> dict[str, Any]:
        pid = query.get("pipelineid") or ""
        if not pid:
            raise ApiError(400, "upload_version needs the query parameter 'pipelineid'")
        self._read("pipelines", pid, "pipeline")
        spec, filename = self._uploaded_spec(content_type, body)
        return self._add_version(pid, query.get("name") or filename,
                                 query.get("description", ""), spec)

    def _add_version(self, pid: str, name: str, description: str,
                     spec: dict[str, Any]) -> dict[str, Any]:
        version = {"pipeline_id": pid, "pipeline_version_id": _new_id(), "name": name,
                   "display_name": name, "description": description, "created_at": now(),
                   "pipeline_spec": spec}
        state.write_json(self._rec("versions", version["pipeline_version_id"]), version)
        return version

    def list_pipelines(self, **_: Any) -> dict[str, Any]:
        found = self._all("pipelines")
        return {"pipelines": found, "total_size": len(found), "next_page_token": ""}

    def get_pipeline(self, pid: str, **_: Any) -> dict[str, Any]:
        return self._read("pipelines", pid, "pipeline")

    def list_versions(self, pid: str, **_: Any) -> dict[str, Any]:
        self._read("pipelines", pid, "pipeline")
        found = [v for v in self._all("versions") if v["pipeline_id"] == pid]
        return {"pipeline_versions": found, "total_size": len(found), "next_page_token": ""}

    def get_version(self, pid: str, vid: str, **_: Any) -> dict[str, Any]:
        version = self._read("versions", vid, "pipeline version")
        if version["pipeline_id"] != pid:
            raise ApiError(404, f"pipeline {pid} has no version {vid}")
        return version

    # -- experiments ------------------------------------------------------------------------

    def create_experiment(self, body: bytes, **_: Any) -> dict[str, Any]:
        data = self._json(body)
        name = data.get("display_name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "an experiment needs a display_name")
        if any(e["display_name"] == name for e in self._all("experiments")):
            raise ApiError(409, f"an experiment named '{name}' already exists")
        exp = {"experiment_id": _new_id(), "display_name": name,
               "description": data.get("description") or "", "created_at": now(),
               "namespace": data.get("namespace") or "", "storage_state": "AVAILABLE"}
        state.write_json(self._rec("experiments", exp["experiment_id"]), exp)
        return exp

    def _default_experiment(self) -> str:
        for exp in self._all("experiments"):
            if exp["display_name"] == "Default":
                return exp["experiment_id"]
        return self.create_experiment(body=json.dumps({"display_name": "Default"}).encode())[
            "experiment_id"]

    def list_experiments(self, query: dict[str, str], **_: Any) -> dict[str, Any]:
        found = _filtered(self._all("experiments"), query.get("filter"))
        return {"experiments": found, "total_size": len(found), "next_page_token": ""}

    def get_experiment(self, eid: str, **_: Any) -> dict[str, Any]:
        return self._read("experiments", eid, "experiment")

    # -- runs -------------------------------------------------------------------------------

    def create_run(self, query: dict[str, str], body: bytes, **_: Any) -> dict[str, Any]:
        data = self._json(body)
        display = data.get("display_name")
        if not isinstance(display, str) or not display:
            raise ApiError(400, "a run needs a display_name")
        eid = data.get("experiment_id") or query.get("experiment_id") or \
            self._default_experiment()
        self._read("experiments", eid, "experiment")
        ref = data.get("pipeline_version_reference") or {}
        if not isinstance(ref, dict):
            raise ApiError(400, "pipeline_version_reference must be an object: "
                                "{pipeline_id, pipeline_version_id}")
        spec = data.get("pipeline_spec")
        if bool(spec) == bool(ref):
            raise ApiError(400, "give either pipeline_spec or pipeline_version_reference")
        if ref:
            spec = self._version_spec(ref)
        docs = _documents(spec)
        config = data.get("runtime_config") or {}
        if not isinstance(config, dict):
            raise ApiError(400, "runtime_config must be an object: {parameters: {...}}")
        params = config.get("parameters") or {}
        if not isinstance(params, dict):
            raise ApiError(400, "runtime_config.parameters must be a mapping")
        if config.get("pipeline_root"):
            raise ApiError(400, "runtime_config.pipeline_root is not supported locally: "
                                "outputs go to the state folder's pipeline-root")
        rid = _new_id()
        from lab.kube.names import slug

        name = f"{slug(display, KIND, fallback='run')[:54].strip('-')}-{rid[:8]}"
        spec_file = state.path(self.dir, "specs", f"{rid}.yaml")
        spec_file.parent.mkdir(parents=True, exist_ok=True)
        spec_file.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        record = {"run_id": rid, "name": name, "namespace": self.namespace,
                  "experiment_id": eid, "display_name": display,
                  "description": data.get("description") or "",
                  "pipeline_version_reference": ref or None,
                  "runtime_config": {"parameters": params},
                  "pipeline_spec": None if ref else spec, "created_at": now()}
        state.write_json(self._rec("runs", rid), record)
        self.procs[rid] = self._start(name, spec_file, params, rid)
        return self._view(record)

    def dag_of(self, name: str) -> dict[str, list[str]] | None:
        """{task: [upstream tasks]} of the root DAG of the spec a run of this API ran."""
        for record in self._all("runs"):
            if record["name"] == name:
                spec_file = state.path(self.dir, "specs", f"{record['run_id']}.yaml")
                if not spec_file.is_file():
                    return None
                docs = list(yaml.safe_load_all(spec_file.read_text()))
                tasks = ((docs[0].get("root") or {}).get("dag") or {}).get("tasks") or {}
                return {n: list(t.get("dependentTasks") or []) for n, t in tasks.items()}
        return None

    def _version_spec(self, ref: dict[str, Any]) -> dict[str, Any]:
        pid = ref.get("pipeline_id") or ""
        vid = ref.get("pipeline_version_id")
        if not vid:
            versions = self.list_versions(pid=pid)["pipeline_versions"]
            if not versions:
                raise ApiError(404, f"pipeline {pid} has no version")
            vid = versions[-1]["pipeline_version_id"]
        return self.get_version(pid=pid, vid=vid)["pipeline_spec"]

    def _start(self, name: str, spec_file: Path, params: dict[str, Any], rid: str
               ) -> subprocess.Popen[bytes]:
        """`kflab pipeline run` in a process of its own: the CLI's engine and record."""
        argv = [sys.executable, "-m", "lab.cli", "--state", str(self.root), "pipeline",
                "run", str(spec_file), "--name", name, "--backend", "local"]
        for key, value in params.items():
            argv += ["-p", f"{key}={json.dumps(value)}"]
        log = state.path(self.dir, "runs", f"{rid}.log")
        with open(log, "wb") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)

    def list_runs(self, query: dict[str, str], **_: Any) -> dict[str, Any]:
        eid = query.get("experiment_id")
        records = self._all("runs")
        runs = [self._view(r) for r in records if not eid or r.get("experiment_id") == eid]
        known = {r["name"] for r in records}
        if not eid:  # runs started by `kflab pipeline run` and scenarios are runs too
            runs += [_run_shape(o) for o in self.backend.list(KIND, self.namespace)
                     if o["metadata"]["name"] not in known]
        runs.sort(key=lambda r: r.get("created_at", ""))
        return {"runs": runs, "total_size": len(runs), "next_page_token": ""}

    def get_run(self, rid: str, **_: Any) -> dict[str, Any]:
        try:
            record = state.read_json(self._rec("runs", rid), check=_shape("runs"))
        except state.StateError:
            record = None
        if record is not None:
            return self._view(record)
        for obj in self.backend.list(KIND, self.namespace):
            if (obj.get("status") or {}).get("run_id") == rid:
                return _run_shape(obj)
        raise ApiError(404, f"run {rid} not found")

    def _view(self, record: dict[str, Any]) -> dict[str, Any]:
        obj = self.backend.get(KIND, record["name"], record["namespace"])
        run = _run_shape(obj) if obj else {"state": "PENDING", "run_details":
                                           {"task_details": []}}
        if obj is None:
            proc = self.procs.get(record["run_id"])
            if proc is None or proc.poll() is not None:  # refused before it ran, or gone
                log = state.path(self.dir, "runs", f"{record['run_id']}.log")
                text = log.read_text(errors="replace").strip() if log.exists() else ""
                run["state"] = "FAILED"
                run["error"] = {"code": 3, "details": [], "message": text[-2000:] or
                                "no record of the run: it was deleted, or its kflab "
                                "process ended before it recorded the run"}
        run.update({k: record[k] for k in ("run_id", "experiment_id", "display_name",
                                           "description", "runtime_config", "created_at")})
        if record.get("pipeline_version_reference"):
            run["pipeline_version_reference"] = record["pipeline_version_reference"]
        if record.get("pipeline_spec"):
            run["pipeline_spec"] = record["pipeline_spec"]
        for task in run["run_details"]["task_details"]:
            task["run_id"] = record["run_id"]
        return run


def _run_shape(obj: dict[str, Any]) -> dict[str, Any]:
    """A PipelineRun record as a V2beta1Run (the fields the API defines, no others)."""
    status = obj.get("status") or {}
    rid = str(status.get("run_id") or obj["metadata"]["name"])
    run: dict[str, Any] = {
        "run_id": rid, "display_name": obj["metadata"]["name"],
        "storage_state": "AVAILABLE", "state": status.get("state") or "PENDING",
        "created_at": status.get("created_at") or obj["metadata"].get("creationTimestamp"),
        "run_details": {"task_details": [_task_shape(rid, t) for t in
                                         (status.get("run_details") or {})
                                         .get("task_details") or []]},
        "runtime_config": {"parameters": (obj.get("spec") or {}).get("arguments") or {}},
    }
    if status.get("finished_at"):
        run["finished_at"] = status["finished_at"]
    if status.get("error"):
        run["error"] = {"code": 2, "message": str(status["error"].get("message", "")),
                        "details": []}
    return {k: v for k, v in run.items() if v is not None}


def _task_shape(rid: str, task: dict[str, Any]) -> dict[str, Any]:
    out = {"run_id": rid, "task_id": f"{rid}-{task.get('display_name')}",
           "display_name": task.get("display_name"), "state": task.get("state"),
           "start_time": task.get("start_time"), "end_time": task.get("end_time")}
    if task.get("start_time"):
        out["create_time"] = task["start_time"]
    if task.get("error"):
        err = task["error"]
        out["error"] = {"code": 2, "details": [], "message": str(
            err.get("message", err) if isinstance(err, dict) else err)}
    return {k: v for k, v in out.items() if v is not None}


def _documents(spec: Any) -> list[dict[str, Any]]:
    """The YAML documents of a run's pipeline: the PipelineSpec, then the PlatformSpec when
    the SDK sent both ({pipeline_spec, platform_spec}, as kfp.Client's _PipelineDoc does)."""
    if isinstance(spec, dict) and isinstance(spec.get("pipeline_spec"), dict):
        platform = spec.get("platform_spec")
        if platform is not None and not isinstance(platform, dict):
            raise ApiError(400, "platform_spec (the YAML's second document) must be a mapping")
        docs = [spec["pipeline_spec"]] + ([platform] if platform else [])
    else:
        docs = [spec]
    if not isinstance(docs[0], dict) or "root" not in docs[0]:
        raise ApiError(400, "pipeline_spec is not a compiled KFP pipeline (no 'root'): "
                            "give what kfp.compiler.Compiler().compile() writes")
    return docs


# The fields every reader of a record indexes, per record folder.
_KEYS = {"runs": ("run_id", "name", "display_name"),
         "experiments": ("experiment_id", "display_name"),
         "pipelines": ("pipeline_id", "name", "display_name"),
         "versions": ("pipeline_version_id", "pipeline_id")}


def _shape(what: str) -> Callable[[Any], str | None]:
    def problem(data: Any) -> str | None:
        bad = [k for k in _KEYS.get(what, ()) if not isinstance(data.get(k), str)]
        return f"{', '.join(bad)}: missing or not text" if bad else None
    return problem


def _filtered(items: list[dict[str, Any]], raw: str | None) -> list[dict[str, Any]]:
    """KFP's filter (backend/api/v2beta1/filter.proto): EQUALS on string fields, which is
    what the SDK sends (get_experiment by name); other operations are refused."""
    if not raw:
        return items
    try:
        predicates = json.loads(raw).get("predicates") or []
    except (ValueError, AttributeError, RecursionError):
        raise ApiError(400, f"filter is not a JSON v2beta1Filter: {raw[:200]}") from None
    if not isinstance(predicates, list) or not all(isinstance(p, dict) for p in predicates):
        raise ApiError(400, f"filter.predicates is not a list of objects: {raw[:200]}")
    for p in predicates:
        if p.get("operation") not in ("EQUALS", 1):
            raise ApiError(501, f"filter operation {p.get('operation')} is not supported "
                                "locally (only EQUALS)")
        key, value = p.get("key"), p.get("string_value", p.get("stringValue"))
        if not isinstance(key, str):
            raise ApiError(400, f"filter: a predicate's key must be a field name: {key!r}"[:200])
        items = [i for i in items if i.get(key) == value]
    return items
