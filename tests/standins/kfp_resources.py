"""STAND-IN: the rest of KFP 2.16's v2beta1 API that kfp.Client's documented calls reach,
beside kfp.py's runs: pipelines and versions (upload, list, get, get by name, delete),
experiments (get, archive, unarchive, delete), runs (list with filter, sort and pages,
archive, unarchive, terminate, retry, a run of an uploaded version), recurring runs (create,
get, list, enable, disable, delete). Each answer is what kubeflow/pipelines 2.16.0 writes
(backend/src/apiserver, cited per rule); kflab's contract test (tests/integration/
test_kfp_contract.py) compares the local API's answers with these.

Written from upstream's code, not from kflab's: the filter is read as
list_request_util.go parseAPIFilter and filter.go read it, for the operations the contract
uses (EQUALS, NOT_EQUALS, IS_SUBSTRING on text fields); pages are list.go's (page_size 0 is
20, a next_page_token is base64 of the JSON list.token); errors are google.rpc.Status with
the user-facing message in details (common/util/error.go UserError.GRPCStatus), uploads'
errors apiv1beta1.Error (pipeline_upload_server.go writeErrorToResponse).

Not covered: recurring runs never trigger (the stand-in cluster runs no ScheduledWorkflow
controller), terminate of a running run (no Argo workflow to patch), retry of a failed run,
GREATER/LESS_THAN and IN predicates, sorting by anything but created_at and display_name,
namespaces.
"""

from __future__ import annotations

import base64
import calendar
import json
import time
import urllib.parse
import uuid
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

import yaml

STAMP = "%Y-%m-%dT%H:%M:%SZ"
EPOCH = "1970-01-01T00:00:00Z"
OPS = {1: "EQUALS", 2: "NOT_EQUALS", 9: "IS_SUBSTRING"}
# model/*.go APIToModelFieldMap, the text fields the contract filters on
FIELDS = {"runs": {"display_name", "name", "state", "storage_state", "experiment_id",
                   "run_id", "recurring_run_id", "description"},
          "experiments": {"display_name", "name", "storage_state", "experiment_id"},
          "pipelines": {"display_name", "name", "pipeline_id"},
          "versions": {"display_name", "name", "pipeline_version_id"},
          "jobs": {"display_name", "name", "recurring_run_id"}}
# API field -> model column (the ones the contract sorts and filters by)
COLUMNS = {"display_name": "DisplayName", "name": "DisplayName", "created_at": "CreatedAtInSec",
           "state": "State", "storage_state": "StorageState", "experiment_id": "ExperimentUUID",
           "run_id": "UUID", "recurring_run_id": "JobUUID", "description": "Description",
           "pipeline_id": "UUID", "pipeline_version_id": "UUID"}
API_OF = {"Name": "name", "DisplayName": "display_name", "CreatedAtInSec": "created_at",
          "State": "state", "StorageState": "storage_state", "ExperimentUUID": "experiment_id",
          "JobUUID": "recurring_run_id", "Description": "description"}


def now() -> str:
    return time.strftime(STAMP, time.gmtime())


def status(code: int, internal: str, external: str) -> dict[str, Any]:
    """UserError.GRPCStatus through grpc-gateway: message the internal error, details the
    user-facing one."""
    return {"code": code, "message": internal, "details": [
        {"@type": "type.googleapis.com/google.rpc.Status", "code": code, "message": external}]}


def not_found(kind: str, rid: str, *wraps: str) -> tuple[int, Any, str]:
    """util.NewResourceNotFoundError, wrapped by its callers (innermost last)."""
    text = f"ResourceNotFoundError: {kind} {rid} not found"
    for w in wraps:
        text = f"{w}: {text}"
    return 404, status(5, text, f"{kind} {rid} not found"), "googlerpcStatus"


def invalid(message: str, *wraps: str) -> tuple[int, Any, str]:
    """util.NewInvalidInputError, wrapped."""
    text = f"Invalid input error: {message}"
    for w in wraps:
        text = f"{w}: {text}"
    return 400, status(3, text, message), "googlerpcStatus"


def lean(obj: dict[str, Any]) -> dict[str, Any]:
    """protojson with EmitUnpopulated false (apiserver/common/utils.go CustomMarshaler)."""
    return {k: v for k, v in obj.items() if v not in (None, "", {}, [], False)}


def shown(run: dict[str, Any]) -> dict[str, Any]:
    """api_converter.go toApiRun: the version reference or else the spec, runtime_config only
    with parameters, run_details only with tasks, empty text left out."""
    out = dict(run)
    if out.get("pipeline_version_reference"):
        out.pop("pipeline_spec", None)
    if not (out.get("runtime_config") or {}).get("parameters"):
        out.pop("runtime_config", None)
    if not (out.get("run_details") or {}).get("task_details"):
        out.pop("run_details", None)
    out = lean(out)
    out.setdefault("finished_at", EPOCH)
    return out


class Resources:
    def __init__(self, api: Any) -> None:
        self.api = api
        self.pipelines: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}

    # --- lists (list_request_util.go, list.go, filter.go) ---------------------------------

    def listed(self, kind: str, items: list[dict[str, Any]], q: dict[str, str], key: str,
               id_field: str, wrap: str) -> tuple[int, Any, str]:
        token = q.get("page_token") or ""
        state: dict[str, Any] = {}
        if token:
            try:
                state = json.loads(base64.b64decode(token, validate=True))
            except ValueError as exc:  # token.unmarshal
                return 400, status(3, f"{wrap}: InvalidInputError: Invalid package token: "
                                      f"{exc}", "Invalid package token"), "googlerpcStatus"
        groups: dict[str, dict[str, list[str]]] = state.get("Filter") or {}
        if q.get("filter"):
            try:  # parseAPIFilter: url.QueryUnescape, then protojson
                doc = json.loads(urllib.parse.unquote_plus(q["filter"]))
            except ValueError as exc:
                return invalid(f"failed to parse valid filter from {json.dumps(q['filter'])}"
                               f": proto: syntax error: {exc}", wrap)
            groups = {}
            for p in doc.get("predicates") or []:
                op = p.get("operation")
                op = OPS.get(op, op) if isinstance(op, int) else op
                if p.get("key") not in FIELDS[kind]:  # filter.go ReplaceKeys
                    return invalid("no support for filtering on unrecognized field "
                                   f"{json.dumps(p.get('key'))}", wrap)
                group = {"EQUALS": "EQ", "NOT_EQUALS": "NEQ", "IS_SUBSTRING": "SUBSTRING"}[op]
                column = "Name" if kind in ("pipelines", "versions") and p["key"] == "name" \
                    else COLUMNS.get(p["key"], p["key"])
                groups.setdefault(group, {}).setdefault(column, []).append(
                    p.get("string_value", p.get("stringValue")))
        for group, columns in groups.items():  # filter.go AddToSelect
            for column, values in columns.items():
                field = API_OF.get(column, column)
                for value in values:
                    if group == "EQ":
                        items = [i for i in items if str(i.get(field, "")) == value]
                    elif group == "NEQ":
                        items = [i for i in items if str(i.get(field, "")) != value]
                    else:
                        items = [i for i in items if value in str(i.get(field, ""))]
        total = len(items)  # the stores count the filtered rows, whatever the page
        words = (q.get("sort_by") or "").lower().split()
        column = state.get("SortByFieldName") if token else \
            COLUMNS.get(words[0], words[0]) if words else "CreatedAtInSec"
        desc = bool(state.get("IsDesc")) if token else (len(words) == 2 and
                                                        words[1] == "desc")

        def order(item: dict[str, Any]) -> tuple[Any, str]:
            value = item.get(API_OF.get(column, column)) or ""
            if column == "CreatedAtInSec":
                value = calendar.timegm(time.strptime(value, STAMP)) if value else 0
            return value, item[id_field]

        items.sort(key=order, reverse=desc)
        if token:  # list.go AddSortingToSelect: from the token's row on
            mark = (state["SortByFieldValue"], state["KeyFieldValue"])
            items = [i for i in items if (order(i) <= mark if desc else order(i) >= mark)]
        size = min(int(q.get("page_size") or 0) or 20, 200)  # list.go validatePageSize
        shown, rest = items[:size], items[size:]
        body: dict[str, Any] = {key: shown, "total_size": total}
        if rest:  # list.go NextPageToken: base64 of the JSON token
            value, ident = order(rest[0])
            body["next_page_token"] = base64.b64encode(json.dumps({
                "SortByFieldName": column, "SortByFieldValue": value, "KeyFieldName": "UUID",
                "KeyFieldValue": ident, "IsDesc": desc, "Filter": groups or None}).encode()
            ).decode()
        schema = {"runs": "v2beta1ListRunsResponse",
                  "experiments": "v2beta1ListExperimentsResponse",
                  "pipelines": "v2beta1ListPipelinesResponse",
                  "versions": "v2beta1ListPipelineVersionsResponse",
                  "jobs": "v2beta1ListRecurringRunsResponse"}[kind]
        return 200, lean(body), schema

    # --- requests ---------------------------------------------------------------------------

    def answer(self, method: str, path: str, q: dict[str, str], raw: bytes,
               ctype: str) -> tuple[int, Any, str] | None:
        parts = path.rstrip("/").split("/")[3:]
        verb = ""
        if parts and ":" in parts[-1]:
            parts[-1], verb = parts[-1].split(":", 1)
        body = json.loads(raw) if raw and ctype.startswith("application/json") else {}
        route = (method, parts[0] if parts else "", len(parts), verb)
        handler = {
            ("POST", "pipelines", 2, ""): self.upload if parts[1:] == ["upload"] else
            self.upload_version if parts[1:] == ["upload_version"] else None,
            ("GET", "pipelines", 1, ""): lambda: self.listed(
                "pipelines", [lean(p) for p in self.pipelines.values()], q, "pipelines",
                "pipeline_id", "Failed to list pipelines due invalid list options"),
            ("GET", "pipelines", 2, ""): lambda: self.get_pipeline(parts[1]),
            ("GET", "pipelines", 3, ""): (lambda: self.by_name(parts[2]))
            if parts[1:2] == ["names"] else (lambda: self.list_versions(parts[1], q)),
            ("GET", "pipelines", 4, ""): lambda: self.get_version(parts[3]),
            ("DELETE", "pipelines", 2, ""): lambda: self.delete_pipeline(parts[1], q),
            ("DELETE", "pipelines", 4, ""): lambda: self.delete_version(parts[1], parts[3]),
            ("GET", "experiments", 1, ""): lambda: self.listed(
                "experiments", [lean(e) for e in self.api.experiments.values()], q,
                "experiments", "experiment_id", "Failed to create list options"),
            ("GET", "experiments", 2, ""): lambda: self.get_experiment(parts[1]),
            ("DELETE", "experiments", 2, ""): lambda: self.delete_experiment(parts[1]),
            ("POST", "experiments", 2, "archive"): lambda: self.archive_experiment(parts[1]),
            ("POST", "experiments", 2, "unarchive"): lambda: self.set_experiment(
                parts[1], "AVAILABLE"),
            ("GET", "runs", 1, ""): lambda: self.list_runs(q),
            ("POST", "runs", 2, "archive"): lambda: self.archive_run(parts[1], "ARCHIVED"),
            ("POST", "runs", 2, "unarchive"): lambda: self.archive_run(parts[1], "AVAILABLE"),
            ("POST", "runs", 2, "terminate"): lambda: self.terminate(parts[1]),
            ("POST", "runs", 2, "retry"): lambda: self.retry(parts[1]),
            ("POST", "recurringruns", 1, ""): lambda: self.create_job(body),
            ("GET", "recurringruns", 1, ""): lambda: self.listed(
                "jobs", [self.job_view(j) for j in self.jobs.values()
                         if not q.get("experiment_id")
                         or j["experiment_id"] == q["experiment_id"]],
                q, "recurringRuns", "recurring_run_id", "Failed to list recurring runs due "
                "to error parsing the listing options"),
            ("GET", "recurringruns", 2, ""): lambda: self.get_job(parts[1]),
            ("DELETE", "recurringruns", 2, ""): lambda: self.delete_job(parts[1]),
            ("POST", "recurringruns", 2, "enable"): lambda: self.mode(parts[1], True),
            ("POST", "recurringruns", 2, "disable"): lambda: self.mode(parts[1], False),
        }.get(route)
        if handler is None:
            return None
        if route[:3] == ("POST", "pipelines", 2):
            return handler(q, raw, ctype)  # type: ignore[operator]
        return handler()  # type: ignore[operator]

    # --- pipelines (pipeline_upload_server.go, pipeline_server.go) ------------------------

    def _file(self, raw: bytes, ctype: str) -> tuple[dict[str, Any] | None, str]:
        msg = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + raw)
        for part in msg.iter_parts():
            if part.get_param("name", header="content-disposition") == "uploadfile":
                docs = [d for d in yaml.safe_load_all(part.get_payload(decode=True)) if d]
                spec = docs[0] if len(docs) == 1 else {"pipeline_spec": docs[0],
                                                       "platform_spec": docs[1]}
                return spec, part.get_filename() or ""
        return None, ""

    @staticmethod
    def upload_error(code: int, message: str) -> tuple[int, Any, str]:
        """writeErrorToResponse: apiv1beta1.Error."""
        return code, {"error_message": message, "error_details": message}, ""

    def upload(self, q: dict[str, str], raw: bytes, ctype: str) -> tuple[int, Any, str]:
        spec, filename = self._file(raw, ctype)
        if spec is None:
            return self.upload_error(400, "Failed to read pipeline from file")
        name = q.get("name") or q.get("display_name") or filename  # buildPipelineName
        if any(p["name"] == name for p in self.pipelines.values()):
            return self.upload_error(409, "Failed to create a pipeline and a pipeline version")
        pid = str(uuid.uuid4())
        self.pipelines[pid] = {"pipeline_id": pid, "name": name,
                               "display_name": q.get("display_name") or name,
                               "description": q.get("description", ""), "created_at": now()}
        self._version(pid, name, self.pipelines[pid]["display_name"],
                      q.get("description", ""), spec)
        return 200, lean(self.pipelines[pid]), "v2beta1Pipeline"

    def _version(self, pid: str, name: str, display: str, description: str,
                 spec: dict[str, Any]) -> dict[str, Any]:
        vid = str(uuid.uuid4())
        self.versions[vid] = {"pipeline_id": pid, "pipeline_version_id": vid, "name": name,
                              "display_name": display, "description": description,
                              "created_at": now(), "pipeline_spec": spec}
        return self.versions[vid]

    def upload_version(self, q: dict[str, str], raw: bytes, ctype: str
                       ) -> tuple[int, Any, str]:
        spec, filename = self._file(raw, ctype)
        pid = q.get("pipelineid") or ""
        if spec is None or pid not in self.pipelines:
            return self.upload_error(400, "Failed to create a pipeline version")
        name = q.get("name") or q.get("display_name") or filename
        if any(v["name"] == name and v["pipeline_id"] == pid for v in self.versions.values()):
            return self.upload_error(409, "Failed to create a pipeline version")
        version = self._version(pid, name, q.get("display_name") or name,
                                q.get("description", ""), spec)
        return 200, lean(version), "v2beta1PipelineVersion"

    def get_pipeline(self, pid: str) -> tuple[int, Any, str]:
        if pid not in self.pipelines:
            return not_found("Pipeline", pid, f"Failed to get pipeline with id {pid}",
                             f"Failed to get a pipeline {pid}. Check error stack")
        return 200, lean(self.pipelines[pid]), "v2beta1Pipeline"

    def by_name(self, name: str) -> tuple[int, Any, str]:
        """GetPipelineByName: by the name column."""
        name = urllib.parse.unquote(name)
        for p in self.pipelines.values():
            if p["name"] == name:
                return 200, lean(p), "v2beta1Pipeline"
        return not_found("Namespace/Pipeline", f"/{name}",
                         f"Failed to get a pipeline named {name} in namespace ",
                         f"Failed to get a pipeline with name {name} and namespace . "
                         "Check error stack.")

    def list_versions(self, pid: str, q: dict[str, str]) -> tuple[int, Any, str]:
        items = [lean(v) for v in self.versions.values() if v["pipeline_id"] == pid]
        return self.listed("versions", items, q, "pipeline_versions", "pipeline_version_id",
                           "Failed to list pipeline versions due invalid list options")

    def get_version(self, vid: str) -> tuple[int, Any, str]:
        if vid not in self.versions:
            return not_found("PipelineVersion", vid)
        return 200, lean(self.versions[vid]), "v2beta1PipelineVersion"

    def delete_pipeline(self, pid: str, q: dict[str, str]) -> tuple[int, Any, str]:
        """resource_manager.go DeletePipeline."""
        if pid not in self.pipelines:
            return not_found("Pipeline", pid)
        versions = [v for v in self.versions if self.versions[v]["pipeline_id"] == pid]
        if versions and q.get("cascade") != "true":
            return invalid(f"Failed to delete pipeline with id {pid} as it has existing "
                           f"pipeline versions (e.g. {versions[-1]}). Set cascade=true to "
                           "delete all versions", f"Failed to delete pipeline {pid}. Check "
                           "error stack")
        for v in versions:
            del self.versions[v]
        del self.pipelines[pid]
        return 200, {}, ""

    def delete_version(self, pid: str, vid: str) -> tuple[int, Any, str]:
        if vid not in self.versions:
            return not_found("PipelineVersion", vid)
        del self.versions[vid]
        return 200, {}, ""

    def spec_of(self, ref: dict[str, Any]) -> dict[str, Any] | None:
        """fetchTemplateFromPipelineSpec: the version's spec (else the latest version's)."""
        vid = ref.get("pipeline_version_id")
        if not vid:
            ids = [v for v, d in self.versions.items() if d["pipeline_id"] ==
                   ref.get("pipeline_id")]
            vid = ids[-1] if ids else ""
        version = self.versions.get(vid or "")
        return version["pipeline_spec"] if version else None

    # --- experiments (experiment_server.go, experiment_store.go) --------------------------

    def get_experiment(self, eid: str) -> tuple[int, Any, str]:
        exp = self.api.experiments.get(eid)
        if exp is None:
            return not_found("Experiment", eid, "Failed to fetch experiment")
        return 200, lean(exp), "v2beta1Experiment"

    def delete_experiment(self, eid: str) -> tuple[int, Any, str]:
        if eid not in self.api.experiments:
            return not_found("Experiment", eid,
                             f"Failed to delete experiment {eid} due to error fetching it")
        del self.api.experiments[eid]
        return 200, {}, ""

    def set_experiment(self, eid: str, storage: str) -> tuple[int, Any, str]:
        if eid in self.api.experiments:  # an UPDATE ... WHERE UUID = id
            self.api.experiments[eid]["storage_state"] = storage
        return 200, {}, ""

    def archive_experiment(self, eid: str) -> tuple[int, Any, str]:
        """ArchiveExperiment: the experiment, its runs, its jobs disabled."""
        self.set_experiment(eid, "ARCHIVED")
        with self.api.lock:
            for run in self.api.runs.values():
                if run["experiment_id"] == eid:
                    run["storage_state"] = "ARCHIVED"
        for job in self.jobs.values():
            if job["experiment_id"] == eid:
                job["enabled"] = False
        return 200, {}, ""

    # --- runs (run_server.go, resource_manager.go) ----------------------------------------

    def list_runs(self, q: dict[str, str]) -> tuple[int, Any, str]:
        with self.api.lock:
            items = [shown(json.loads(json.dumps(r))) for r in self.api.runs.values()
                     if not q.get("experiment_id") or r["experiment_id"] == q["experiment_id"]]
        return self.listed("runs", items, q, "runs", "run_id", "Failed to create list options")

    def archive_run(self, rid: str, storage: str) -> tuple[int, Any, str]:
        run = self.api.runs.get(rid)
        verb = "archive" if storage == "ARCHIVED" else "unarchive"
        if run is None:
            return not_found("Run", rid, f"Failed to fetch run {rid}",
                             f"Failed to {verb} run {rid} as it does not exist",
                             f"Failed to {verb} a run")
        exp = self.api.experiments.get(run["experiment_id"]) or {}
        if storage == "AVAILABLE" and exp.get("storage_state") == "ARCHIVED":
            message = (f"Failed to unarchive run {rid} as experiment {run['experiment_id']} "
                       "must be un-archived first")
            return 400, status(9, f"Failed to unarchive a run: FailedPreconditionError: "
                                  f"{message}: Unarchive the experiment first to allow the "
                                  "run to be restored", message), "googlerpcStatus"
        run["storage_state"] = storage
        return 200, {}, ""

    def terminate(self, rid: str) -> tuple[int, Any, str]:
        """run_store.go TerminateRun: only PENDING/RUNNING/PAUSED rows."""
        run = self.api.runs.get(rid)
        if run is None:
            return not_found("Run", rid)
        if run["state"] not in ("PENDING", "RUNNING", "PAUSED"):
            return invalid(f"Failed to terminate a run {rid}. Row not found",
                           f"Failed to terminate run {rid}", "Failed to terminate a run")
        return 501, status(12, "the KFP stand-in has no workflow to terminate",
                           "not covered"), "googlerpcStatus"

    def retry(self, rid: str) -> tuple[int, Any, str]:
        """RetryRun -> workflow.go GenerateRetryExecution: Failed/Error only."""
        run = self.api.runs.get(rid)
        if run is None:
            return not_found("Run", rid)
        if run["state"] != "FAILED":
            message = "Workflow must be Failed/Error to retry"
            return 409, status(10, f"Failed to retry a run: Failed to retry run {rid}: "
                                   f"BadRequestError: {message}: workflow cannot be retried",
                               message), "googlerpcStatus"
        return 501, status(12, "the KFP stand-in does not retry", "not covered"), \
            "googlerpcStatus"

    # --- recurring runs (job_server.go, api_converter.go toModelJob/toApiRecurringRun) ------

    def create_job(self, body: dict[str, Any]) -> tuple[int, Any, str]:
        concurrency = int(body.get("max_concurrency") or 0)
        if not 1 <= concurrency <= 10:
            return invalid("Max concurrency of a recurring run must be at least 1 and at most "
                           f"10. Received {concurrency}", "Failed to create a recurring run "
                           "due to conversion error")
        jid = str(uuid.uuid4())
        trigger = body.get("trigger") or {}
        for part in trigger.values():
            if isinstance(part, dict) and "interval_second" in part:
                part["interval_second"] = str(part["interval_second"])
        self.jobs[jid] = {
            "recurring_run_id": jid, "display_name": body.get("display_name"),
            "description": body.get("description"), "enabled": body.get("mode") == "ENABLE",
            "created_at": now(), "updated_at": now(), "max_concurrency": str(concurrency),
            "no_catchup": bool(body.get("no_catchup")), "trigger": trigger,
            # CreateJob: job.Namespace = the pod's namespace in single-user mode
            "namespace": "kubeflow",
            "experiment_id": body.get("experiment_id") or next(iter(self.api.experiments)),
            "runtime_config": body.get("runtime_config"),
            "pipeline_spec": body.get("pipeline_spec"),
            "pipeline_version_reference": body.get("pipeline_version_reference")}
        return 200, self.job_view(self.jobs[jid]), "v2beta1RecurringRun"

    @staticmethod
    def job_view(job: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in job.items() if k != "enabled"}
        out["status"] = "ENABLED" if job["enabled"] else "DISABLED"
        out["mode"] = "ENABLE" if job["enabled"] else "DISABLE"
        if not (out.get("runtime_config") or {}).get("parameters"):
            out.pop("runtime_config", None)
        out = lean(out)
        out.setdefault("trigger", {})
        return out

    def get_job(self, jid: str) -> tuple[int, Any, str]:
        if jid not in self.jobs:
            return not_found("Job", jid, "Failed to fetch a recurring run")
        return 200, self.job_view(self.jobs[jid]), "v2beta1RecurringRun"

    def mode(self, jid: str, enable: bool) -> tuple[int, Any, str]:
        if jid not in self.jobs:
            return not_found("Job", jid)
        self.jobs[jid]["enabled"] = enable
        self.jobs[jid]["updated_at"] = now()
        return 200, {}, ""

    def delete_job(self, jid: str) -> tuple[int, Any, str]:
        if jid not in self.jobs:
            return not_found("Job", jid)
        del self.jobs[jid]
        return 200, {}, ""
