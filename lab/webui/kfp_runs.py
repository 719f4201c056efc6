"""Experiments and runs of the local KFP API, as KFP 2.16 answers them:
apiserver/server/experiment_server.go and run_server.go, the rules in
resource/resource_manager.go (DeleteExperiment, ArchiveExperiment, ArchiveRun, UnarchiveRun,
DeleteRun, TerminateRun, RetryRun), storage/experiment_store.go and run_store.go, and the
shapes of api_converter.go (toApiExperiment, toApiRun).

A run here is a `kflab pipeline run` process (the CLI's engine and record). Every process
the API starts is waited for by a thread of its own, so none is left a zombie and the
recurring runs' scheduler hears when one ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

import yaml

from lab import state
from lab.kube.conditions import now
from lab.webui import kfp_list
from lab.webui.kfp_pipelines import documents
from lab.webui.kfp_store import (
    ApiError,
    already_exists,
    bad_request,
    failed_precondition,
    invalid,
    kfp_error,
    list_error,
    listed,
    new_id,
    not_found,
)

KIND = "PipelineRun"
FINISHED = ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELED")
EPOCH = "1970-01-01T00:00:00Z"  # a zero time as toApiRun writes it (time.Unix(0, 0))
DEFAULT_EXPERIMENT = "Default"  # resource_manager.go CreateDefaultExperiment
RUN_FIELDS = ("experiment_id", "run_id", "display_name", "storage_state", "description",
              "pipeline_version_id", "pipeline_spec", "pipeline_version_reference",
              "runtime_config", "service_account", "created_at", "scheduled_at",
              "finished_at", "state", "error", "run_details", "recurring_run_id",
              "state_history")
EXPERIMENT_FIELDS = ("experiment_id", "display_name", "description", "created_at",
                     "namespace", "storage_state", "last_run_created_at")
STOP_GRACE = 10.0  # seconds a run's process has to stop its tasks and record CANCELED




class Experiments:
    def __init__(self, api: Any) -> None:
        self.api = api
        self.records = api.records

    def _get(self, eid: str) -> dict[str, Any]:
        found = self.records.get("experiments", eid)
        if found is None:
            raise not_found("Experiment", eid)
        return found

    def create(self, body: bytes, **_: Any) -> dict[str, Any]:
        """ExperimentServer.CreateExperiment; names are unique (experiment_store.go)."""
        data = self.api.json_body(body, EXPERIMENT_FIELDS)
        name = data.get("display_name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "[ExperimentServer]: Failed to create a experiment due to "
                           "conversion error: InternalServerError: Failed to convert API "
                           "experiment to model experiment: Invalid input error: Experiment "
                           "must have a non-empty name",
                           external="Experiment must have a non-empty name")
        return _experiment_view(self._create(name, str(data.get("description") or "")))

    def _create(self, name: str, description: str) -> dict[str, Any]:
        if any(e["display_name"] == name for e in self.records.all("experiments")):
            raise already_exists(f"Failed to create a new experiment. The name {name} already "
                                 "exists. Please specify a new name").wrap(
                "Failed to create a experiment")
        exp = {"experiment_id": new_id(), "display_name": name, "description": description,
               "created_at": now(), "namespace": "", "storage_state": "AVAILABLE",
               "last_run_created_at": EPOCH}
        self.records.put("experiments", exp, exp["experiment_id"])
        return exp

    def default_id(self) -> str:
        """The default experiment ("Default", resource_manager.go CreateDefaultExperiment),
        made when first needed (under the API's lock: a list may ask for it too)."""
        with self.api.lock:
            for exp in self.records.all("experiments"):
                if exp["display_name"] == DEFAULT_EXPERIMENT:
                    return str(exp["experiment_id"])
            return str(self._create(DEFAULT_EXPERIMENT, "All runs created without specifying "
                                                        "an experiment will be grouped here.")
                       ["experiment_id"])

    def get(self, eid: str, **_: Any) -> dict[str, Any]:
        try:
            return _experiment_view(self._get(eid))
        except ApiError as exc:
            raise exc.wrap("Failed to fetch experiment") from None

    def list(self, query: dict[str, str], **_: Any) -> dict[str, Any]:
        """ExperimentServer.ListExperiments."""
        try:
            opts = kfp_list.options(kfp_list.EXPERIMENTS, query)
        except kfp_list.ListError as exc:
            raise list_error(exc).wrap("Failed to create list options") from None
        rows = [_experiment_view(e) for e in self.records.all("experiments")]
        page, total, token = kfp_list.page(opts, rows)
        return listed("experiments", page, total, token)

    def delete(self, eid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go DeleteExperiment: never the default one; its runs stay
        (experiment_store.go DeleteExperiment drops only the experiment)."""
        exp = self.records.get("experiments", eid)
        if exp is not None and exp["display_name"] == DEFAULT_EXPERIMENT:
            raise bad_request(invalid(f"Experiment id cannot be equal to the default id "
                                      f"{eid}"), f"Failed to delete experiment {eid}. The "
                              "default experiment cannot be deleted")
        if exp is None:
            raise not_found("Experiment", eid).wrap(
                f"Failed to delete experiment {eid} due to error fetching it")
        self.records.drop("experiments", eid)
        return {}

    def archive(self, eid: str, **_: Any) -> dict[str, Any]:
        """experiment_store.go ArchiveExperiment: the experiment, every run in it, and its
        recurring runs disabled, in one go."""
        exp = self._existing(eid, "archive")
        exp["storage_state"] = "ARCHIVED"
        self.records.put("experiments", exp, eid)
        for run in self.api.runs.all_views():
            if run.get("experiment_id") == eid and run.get("storage_state") != "ARCHIVED":
                self.api.runs.set_storage(run["run_id"], "ARCHIVED")
        self.api.recurring.disable_in(eid)
        return {}

    def unarchive(self, eid: str, **_: Any) -> dict[str, Any]:
        """experiment_store.go UnarchiveExperiment: its runs stay archived."""
        exp = self._existing(eid, "unarchive")
        exp["storage_state"] = "AVAILABLE"
        self.records.put("experiments", exp, eid)
        return {}

    def _existing(self, eid: str, verb: str) -> dict[str, Any]:
        """KFP archives and unarchives an id it does not know without a word (an UPDATE of
        no row); kflab answers 404, so a mistyped id is not taken for done."""
        found = self.records.get("experiments", eid)
        if found is None:
            raise not_found("Experiment", eid).wrap(f"Failed to {verb} experiment {eid}")
        return found

    def touch(self, eid: str, created_at: str) -> None:
        """experiment_store.go SetLastRunTimestamp."""
        exp = self.records.get("experiments", eid)
        if exp is not None:
            exp["last_run_created_at"] = created_at
            self.records.put("experiments", exp, eid)


def _experiment_view(e: dict[str, Any]) -> dict[str, Any]:
    """api_converter.go toApiExperiment, empty text left out (EmitUnpopulated false)."""
    out = {k: e[k] for k in ("experiment_id", "display_name", "description", "created_at",
                             "namespace", "storage_state") if e.get(k)}
    out["last_run_created_at"] = e.get("last_run_created_at") or EPOCH
    return out


class Runs:
    def __init__(self, api: Any) -> None:
        self.api = api
        self.records = api.records
        self.backend = api.backend
        self.procs: dict[str, subprocess.Popen[bytes]] = {}  # run id -> its kflab process
        self.exits: dict[str, int] = {}  # run id -> exit code of its process (reaped)
        self.on_exit: list[Any] = []  # callbacks(run id) when a run's process ends

    # -- creating ---------------------------------------------------------------------------

    def create(self, query: dict[str, str], body: bytes, **_: Any) -> dict[str, Any]:
        """RunServer.CreateRun -> resource_manager.go CreateRun."""
        data = self.api.json_body(body, RUN_FIELDS)
        outer = "Failed to create a new run"
        display = data.get("display_name")
        if not isinstance(display, str) or not display:
            raise invalid("The run name is empty. Please specify a valid name").wrap(
                "Failed to create a run due to invalid name").wrap(outer)
        eid = data.get("experiment_id") or query.get("experiment_id") or ""
        if eid:
            if self.records.get("experiments", eid) is None:
                raise not_found("Experiment", eid).wrap(
                    f"Failed to fetch namespace for experiment {eid}").wrap(
                    "Failed to create a run due to invalid experimentId and namespace "
                    "combination").wrap(outer)
        else:
            eid = self.api.experiments.default_id()
        return self.start_run(data, eid)

    def start_run(self, data: dict[str, Any], eid: str, *, recurring_run_id: str = "",
                  scheduled_at: str = "", name: str = "") -> dict[str, Any]:
        """Check a run's pipeline and arguments, record it, start its process."""
        ref = data.get("pipeline_version_reference") or {}
        if not isinstance(ref, dict):
            raise ApiError(400, "pipeline_version_reference must be an object: "
                                "{pipeline_id, pipeline_version_id}")
        spec = data.get("pipeline_spec")
        if bool(spec) == bool(ref):
            raise ApiError(400, "give either pipeline_spec or pipeline_version_reference")
        if ref:
            try:
                spec = self.api.pipelines.spec_of(ref)
            except ApiError as exc:
                raise exc.wrap("Failed to create a run due to error fetching manifest").wrap(
                    "Failed to create a new run") from None
        docs = documents(spec)
        config = data.get("runtime_config") or {}
        if not isinstance(config, dict):
            raise ApiError(400, "runtime_config must be an object: {parameters: {...}}")
        params = config.get("parameters") or {}
        if not isinstance(params, dict):
            raise ApiError(400, "runtime_config.parameters must be a mapping")
        if config.get("pipeline_root"):
            raise ApiError(400, "runtime_config.pipeline_root is not supported locally: "
                                "outputs go to the state folder's pipeline-root")
        rid = new_id()
        from lab.kube.names import slug

        name = name or f"{slug(data['display_name'], KIND, fallback='run')[:54].strip('-')}-" \
                       f"{rid[:8]}"
        spec_file = state.path(self.api.dir, "specs", f"{rid}.yaml")
        spec_file.parent.mkdir(parents=True, exist_ok=True)
        spec_file.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        created = now()
        record = {"run_id": rid, "name": name, "namespace": self.api.namespace,
                  "experiment_id": eid, "display_name": data["display_name"],
                  "description": data.get("description") or "",
                  "pipeline_version_reference": ref or None,
                  "runtime_config": {"parameters": params},
                  "pipeline_spec": None if ref else spec, "created_at": created,
                  "scheduled_at": scheduled_at or created, "storage_state": "AVAILABLE",
                  "recurring_run_id": recurring_run_id}
        self.records.put("runs", record, rid)
        self.api.experiments.touch(eid, created)
        self._start(record)
        return self.view(record)

    def _start(self, record: dict[str, Any]) -> None:
        """`kflab pipeline run` in a process of its own: the CLI's engine and record."""
        rid = record["run_id"]
        spec_file = state.path(self.api.dir, "specs", f"{rid}.yaml")
        argv = [sys.executable, "-m", "lab.cli", "--state", str(self.api.root), "pipeline",
                "run", str(spec_file), "--name", record["name"], "--backend", "local"]
        for key, value in (record.get("runtime_config") or {}).get("parameters", {}).items():
            argv += ["-p", f"{key}={json.dumps(value)}"]
        log = state.path(self.api.dir, "runs", f"{rid}.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[rid] = proc
        self.exits.pop(rid, None)
        threading.Thread(target=self._reap, args=(rid, proc), daemon=True,
                         name=f"kfp-run-{rid[:8]}").start()

    def _reap(self, rid: str, proc: subprocess.Popen[bytes]) -> None:
        """Wait for the run's process (no zombie is left), then tell who listens."""
        code = proc.wait()
        if self.procs.get(rid) is proc:
            self.exits[rid] = code
        for callback in list(self.on_exit):
            with contextlib.suppress(Exception):
                callback(rid)

    def running(self, rid: str) -> bool:
        proc = self.procs.get(rid)
        return proc is not None and rid not in self.exits and proc.poll() is None

    # -- reading ----------------------------------------------------------------------------

    def _record(self, rid: str) -> dict[str, Any] | None:
        return self.records.get("runs", rid)

    def _gone(self, record: dict[str, Any]) -> bool:
        """A run whose PipelineRun was deleted outside the API (`kflab delete run`): KFP's
        DeleteRun, so it is deleted here too."""
        return bool(record.get("seen")) and not self.running(record["run_id"]) and \
            self.backend.get(KIND, record["name"], record["namespace"]) is None

    def all_views(self) -> list[dict[str, Any]]:
        """Every run: the API's (read through their PipelineRun) and those started by
        `kflab pipeline run` and labs (runs too, in the default experiment)."""
        out, known = [], set()
        for record in self.records.all("runs"):
            known.add(record["name"])
            if self._gone(record):
                self._forget(record)
                continue
            out.append(self.view(record))
        default = None
        for obj in self.backend.list(KIND, self.api.namespace):
            if obj["metadata"]["name"] in known:
                continue
            default = default or self.api.experiments.default_id()
            out.append(_run_shape(obj, default))
        return out

    def list(self, query: dict[str, str], **_: Any) -> dict[str, Any]:
        """RunServer.ListRuns; `experiment_id` narrows to one experiment (404 when it does
        not exist, run_server.go listRuns)."""
        try:
            opts = kfp_list.options(kfp_list.RUNS, query)
        except kfp_list.ListError as exc:
            raise list_error(exc).wrap("Failed to create list options") from None
        eid = query.get("experiment_id") or ""
        if eid and self.records.get("experiments", eid) is None:
            raise not_found("Experiment", eid).wrap(
                f"Failed to list runs due to error fetching namespace for experiment {eid}. "
                "Try filtering based on namespace").wrap("Failed to list runs")
        rows = [r for r in self.all_views() if not eid or r.get("experiment_id") == eid]
        page, total, token = kfp_list.page(opts, rows)
        return listed("runs", page, total, token)

    def find(self, rid: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(the API's record, the PipelineRun) of a run id; a run started outside the API
        has no record."""
        record = self._record(rid)
        if record is not None:
            if self._gone(record):
                self._forget(record)
                return None, None
            return record, self.backend.get(KIND, record["name"], record["namespace"])
        for obj in self.backend.list(KIND, self.api.namespace):
            if str((obj.get("status") or {}).get("run_id")) == rid:
                return None, obj
        return None, None

    def get(self, rid: str, **_: Any) -> dict[str, Any]:
        record, obj = self.find(rid)
        if record is not None:
            return self.view(record)
        if obj is not None:
            return _run_shape(obj, self.api.experiments.default_id())
        raise not_found("Run", rid).wrap(f"Failed to fetch run {rid}").wrap(
            "Failed to get a run")

    def name_of(self, rid: str) -> str | None:
        record, obj = self.find(rid)
        if record is not None:
            return str(record["name"])
        return str(obj["metadata"]["name"]) if obj is not None else None

    def dag_of(self, name: str) -> dict[str, list[str]] | None:
        """{task: [upstream tasks]} of the root DAG of the spec a run of this API ran."""
        for record in self.records.all("runs"):
            if record["name"] == name:
                spec_file = state.path(self.api.dir, "specs", f"{record['run_id']}.yaml")
                if not spec_file.is_file():
                    return None
                docs = list(yaml.safe_load_all(spec_file.read_text()))
                tasks = ((docs[0].get("root") or {}).get("dag") or {}).get("tasks") or {}
                return {n: list(t.get("dependentTasks") or []) for n, t in tasks.items()}
        return None

    def view(self, record: dict[str, Any]) -> dict[str, Any]:
        """The API's run: its PipelineRun's state and tasks, the API's own fields."""
        rid = record["run_id"]
        obj = self.backend.get(KIND, record["name"], record["namespace"])
        if obj is not None and not record.get("seen"):
            record["seen"] = True
            with contextlib.suppress(state.StateError):
                self.records.put("runs", record, rid)
        retried = record.get("retried_at")
        if obj is not None and retried and (obj.get("status") or {}).get(
                "created_at", "") < retried and self.running(rid):
            obj = None  # retried: the earlier attempt's record until the new one is made
            run: dict[str, Any] = {"state": "RUNNING", "finished_at": EPOCH}
        else:
            run = _run_shape(obj, record["experiment_id"]) if obj else {
                "state": "PENDING", "finished_at": EPOCH}
        if obj is None and record.get("terminated"):  # stopped before it recorded a run
            run.update(state="CANCELED", finished_at=record["terminated"])
        elif obj is None and not self.running(rid):  # refused before it ran, or gone
            log = state.path(self.api.dir, "runs", f"{rid}.log")
            text = log.read_text(errors="replace").strip() if log.exists() else ""
            run["state"] = "FAILED"
            run["error"] = {"code": 3, "details": [], "message": text[-2000:] or
                            "the run's kflab process ended before it recorded the run"}
        run.update({k: record[k] for k in ("run_id", "experiment_id", "display_name",
                                           "created_at") if record.get(k)})
        for key in ("description", "recurring_run_id", "scheduled_at"):
            if record.get(key):
                run[key] = record[key]
        run["storage_state"] = record.get("storage_state") or "AVAILABLE"
        params = (record.get("runtime_config") or {}).get("parameters") or {}
        if params:
            run["runtime_config"] = {"parameters": params}
        else:
            run.pop("runtime_config", None)
        if record.get("pipeline_version_reference"):
            run["pipeline_version_reference"] = record["pipeline_version_reference"]
        elif record.get("pipeline_spec"):
            run["pipeline_spec"] = record["pipeline_spec"]
        for task in (run.get("run_details") or {}).get("task_details") or []:
            task["run_id"] = rid
        run["state_history"] = _history(run, ((obj or {}).get("status") or {}).get(
            "created_at"))
        return run

    # -- changing ---------------------------------------------------------------------------

    def _adopt(self, rid: str) -> dict[str, Any]:
        """The API's record of a run, made for one started outside the API when the API
        first changes it (its storage state lives there)."""
        record, obj = self.find(rid)
        if record is not None:
            return record
        if obj is None:
            raise not_found("Run", rid).wrap(f"Failed to fetch run {rid}")
        status = obj.get("status") or {}
        record = {"run_id": rid, "name": obj["metadata"]["name"],
                  "namespace": obj["metadata"].get("namespace", self.api.namespace),
                  "experiment_id": self.api.experiments.default_id(),
                  "display_name": obj["metadata"]["name"], "description": "",
                  "pipeline_version_reference": None,
                  "runtime_config": {"parameters": (obj.get("spec") or {}).get("arguments")
                                     or {}},
                  "pipeline_spec": None, "created_at": status.get("created_at") or now(),
                  "storage_state": "AVAILABLE", "seen": True, "adopted": True}
        self.records.put("runs", record, rid)
        return record

    def set_storage(self, rid: str, storage: str) -> None:
        record = self._adopt(rid)
        record["storage_state"] = storage
        self.records.put("runs", record, rid)

    def archive(self, rid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go ArchiveRun (archiving twice is no error, as in KFP)."""
        try:
            self.set_storage(rid, "ARCHIVED")
        except ApiError as exc:
            raise exc.wrap(f"Failed to archive run {rid} as it failed to be retrieved").wrap(
                "Failed to archive a run") from None
        return {}

    def unarchive(self, rid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go UnarchiveRun: not while its experiment is archived."""
        try:
            record = self._adopt(rid)
        except ApiError as exc:
            raise exc.wrap(f"Failed to unarchive run {rid} as it does not exist").wrap(
                "Failed to unarchive a run") from None
        exp = self.records.get("experiments", record["experiment_id"])
        if exp is not None and exp.get("storage_state") == "ARCHIVED":
            raise failed_precondition(
                "Unarchive the experiment first to allow the run to be restored",
                f"Failed to unarchive run {rid} as experiment {record['experiment_id']} must "
                "be un-archived first").wrap("Failed to unarchive a run")
        record["storage_state"] = "AVAILABLE"
        self.records.put("runs", record, rid)
        return {}

    def delete(self, rid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go DeleteRun: the workflow is deleted (a running run stops)
        and so is the run's record."""
        record, obj = self.find(rid)
        if record is None and obj is None:
            raise not_found("Run", rid).wrap(f"Failed to fetch run {rid}").wrap(
                f"Failed to delete run {rid} as it does not exist").wrap(
                "Failed to delete a run")
        name = record["name"] if record else obj["metadata"]["name"]  # type: ignore[index]
        ns = record["namespace"] if record else obj["metadata"].get(  # type: ignore[index]
            "namespace", self.api.namespace)
        if record is not None:
            self._stop_process(rid, "the KFP API (delete_run)")
        self.backend.delete(KIND, name, ns)
        if record is not None:
            self._forget(record)
        return {}

    def _forget(self, record: dict[str, Any]) -> None:
        rid = record["run_id"]
        with self.api.lock, contextlib.suppress(state.StateError):
            self.records.drop("runs", rid)
            for extra in (state.path(self.api.dir, "specs", f"{rid}.yaml"),
                          state.path(self.api.dir, "runs", f"{rid}.log")):
                if extra.exists():
                    state.remove(self.api.dir, extra)

    def terminate(self, rid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go TerminateRun: only a run not yet finished
        (run_store.go TerminateRun); its tasks stop and it ends CANCELED."""
        outer = "Failed to terminate a run"
        record, obj = self.find(rid)
        if record is None and obj is None:
            raise not_found("Run", rid).wrap(f"Failed to fetch run {rid}").wrap(
                f"Failed to terminate run {rid} due to error fetching the run").wrap(outer)
        current = self.view(record) if record else _run_shape(obj, "")  # type: ignore[arg-type]
        if current["state"] in FINISHED:
            raise invalid(f"Failed to terminate a run {rid}. Row not found").wrap(
                f"Failed to terminate run {rid}").wrap(outer)
        name = record["name"] if record else obj["metadata"]["name"]  # type: ignore[index]
        ns = record["namespace"] if record else obj["metadata"].get(  # type: ignore[index]
            "namespace", self.api.namespace)
        from lab.backends.local import owners

        owners.stop(self.api.root, KIND, ns, name, by="the KFP API (terminate_run)",
                    grace=STOP_GRACE)
        if record is not None:
            self._stop_process(rid, "the KFP API (terminate_run)")
            if self.backend.get(KIND, name, ns) is None:  # stopped before it recorded
                record["terminated"] = now()
                self.records.put("runs", record, rid)
        return {}

    def _stop_process(self, rid: str, by: str) -> None:
        """Stop the run's kflab process (its group: it signals its tasks) and reap it."""
        proc = self.procs.get(rid)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)

    def retry(self, rid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go RetryRun: only a failed (or terminated) run, which runs again
        under the same id (util/workflow.go GenerateRetryExecution: Failed/Error only).
        Locally the run runs again in place; tasks whose results KFP's cache holds are
        reused from it."""
        outer = "Failed to retry a run"
        record, obj = self.find(rid)
        if record is None and obj is None:
            raise not_found("Run", rid).wrap(f"Failed to fetch run {rid}").wrap(
                f"Failed to retry run {rid} due to error fetching the run").wrap(outer)
        current = self.view(record) if record else _run_shape(obj, "")  # type: ignore[arg-type]
        if current["state"] not in ("FAILED", "CANCELED"):
            raise bad_request(kfp_error(13, "workflow cannot be retried",
                                        "workflow cannot be retried"),
                              "Workflow must be Failed/Error to retry").wrap(
                f"Failed to retry run {rid}").wrap(outer)
        if record is None or record.get("adopted"):
            raise ApiError(400, f"run {rid} was started by `kflab pipeline run`, not through "
                                "this API: run that command again to retry it")
        record["retried_at"] = now()
        self.records.put("runs", record, rid)
        self._start(record)
        return {}


def _history(run: dict[str, Any], started: Any) -> list[dict[str, Any]]:
    """The run's state_history as KFP's persistence agent reports it (resource_manager.go
    ReportWorkflowResource): PENDING when created, RUNNING when its workflow started, then
    its final state."""
    out = [{"update_time": run.get("created_at") or EPOCH, "state": "PENDING"}]
    if started and run.get("state") != "PENDING":
        out.append({"update_time": started, "state": "RUNNING"})
    if run.get("state") in FINISHED:
        out.append({"update_time": run.get("finished_at") or EPOCH, "state": run["state"]})
    return out


def _run_shape(obj: dict[str, Any], experiment_id: str) -> dict[str, Any]:
    """A PipelineRun record as a V2beta1Run (api_converter.go toApiRun: the fields the API
    defines, zero times as the epoch, empty ones left out)."""
    status = obj.get("status") or {}
    rid = str(status.get("run_id") or obj["metadata"]["name"])
    created = status.get("created_at") or obj["metadata"].get("creationTimestamp") or EPOCH
    run: dict[str, Any] = {
        "run_id": rid, "experiment_id": experiment_id,
        "display_name": obj["metadata"]["name"], "storage_state": "AVAILABLE",
        "state": status.get("state") or "PENDING", "created_at": created,
        "scheduled_at": created, "finished_at": status.get("finished_at") or EPOCH,
    }
    arguments = (obj.get("spec") or {}).get("arguments") or {}
    if arguments:
        run["runtime_config"] = {"parameters": arguments}
    tasks = [_task_shape(rid, t) for t in (status.get("run_details") or {})
             .get("task_details") or []]
    if tasks:
        run["run_details"] = {"task_details": tasks}
    if status.get("error"):
        run["error"] = {"code": 2, "message": str(status["error"].get("message", "")),
                        "details": []}
    run["state_history"] = _history(run, status.get("created_at"))
    return {k: v for k, v in run.items() if v not in (None, "")}


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
