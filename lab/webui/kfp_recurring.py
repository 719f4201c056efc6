"""Recurring runs of the local KFP API and the scheduler that triggers them while `kflab ui`
runs, as KFP 2.16 does:

- the API: apiserver/server/job_server.go (CreateRecurringRun, Get, List, Enable, Disable,
  Delete), api_converter.go toModelJob (its checks: max_concurrency 1..10, a cron robfig
  parses, an interval of at least 1 s) and toApiRecurringRun (the answer's shape);
- the triggers: the ScheduledWorkflow controller (backend/src/crd/controller/
  scheduledworkflow): controller.go syncHandler (a run is submitted when the schedule is
  enabled, fewer than max_concurrency of its runs are active, and the next time is due),
  util/scheduled_workflow.go (next time, index, names `<name>-<index>-<fnv32a>`), the
  schedules in kfp_cron.py, and the runtime parameters' [[RunUUID]], [[ScheduledTime]],
  [[CurrentTime]], [[Index]] and {{$.scheduledTime.strftime('...')}} placeholders
  (common/util/parameter_formatter.go).

The scheduler is one thread that sleeps until the next trigger is due (no polling): it is
woken when a recurring run is created, enabled, disabled or deleted, and when one of the
API's runs ends (a run held back by max_concurrency may go). Only runs a server before this
one started are watched by a resync every 30 s (the controller's own default,
recurringRunResyncIntervalSeconds). One scheduler per state folder: a second `kflab ui` on
the same folder waits for the first one's lock (kfp-api/scheduler.lock).
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from lab import state
from lab.kube.conditions import now
from lab.webui import kfp_cron, kfp_list
from lab.webui.kfp_runs import FINISHED, RUN_FIELDS
from lab.webui.kfp_store import ApiError, invalid, list_error, listed, new_id, not_found

RESYNC = 30.0  # scheduledworkflow main.go recurringRunResyncIntervalSeconds default
FIELDS = ("recurring_run_id", "display_name", "description", "pipeline_version_id",
          "pipeline_spec", "pipeline_version_reference", "runtime_config", "service_account",
          "max_concurrency", "trigger", "mode", "created_at", "updated_at", "status", "error",
          "no_catchup", "namespace", "experiment_id")


def fnv32a(text: str) -> int:
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def swf_name(display: str, suffix: str) -> str:
    """template.go toSWFCRDResourceGeneratedName (lower-case letters, digits, '-', at most
    25) plus the 5 characters Kubernetes' generateName adds."""
    base = re.sub(r"[^a-z0-9-]+", "", display.lower())[:25].lstrip("-") or "job-"
    return base + suffix[:5]  # (a leading '-' dropped: the run's name must start with one)


def _stamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_parameter(value: Any, run_id: str, scheduled: int, current: int,
                     index: int) -> Any:
    """parameter_formatter.go Format, for string values."""
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        text = m.group(0)
        stamp = {"[[ScheduledTime]]": scheduled, "[[CurrentTime]]": current}
        if text.startswith("[[RunUUID]]"):
            return run_id
        for key, epoch in stamp.items():
            if text.startswith(key):
                return datetime.fromtimestamp(epoch, UTC).strftime("%Y%m%d%H%M%S")
        if text.startswith("[[Index]]"):
            return str(index)
        for prefix, epoch in (("{{$.scheduledTime.strftime('", scheduled),
                              ("{{$.currentTime.strftime('", current)):
            if text.startswith(prefix):
                fmt = text[len(prefix):].removesuffix("')}}")
                return datetime.fromtimestamp(epoch, UTC).strftime(fmt)
        return text

    return re.sub(r"\[\[(.*?)\]\]|\{\{\$\.(.*?)\}\}", sub, value)


class RecurringRuns:
    def __init__(self, api: Any) -> None:
        self.api = api
        self.records = api.records
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None
        api.runs.on_exit.append(lambda _rid: self._wake.set())

    # -- the API ----------------------------------------------------------------------------

    def _get(self, jid: str) -> dict[str, Any]:
        found = self.records.get("recurringruns", jid)
        if found is None:
            raise not_found("Job", jid)
        return found

    def create(self, body: bytes, **_: Any) -> dict[str, Any]:
        """JobServer.CreateRecurringRun: toModelJob's checks, then the job."""
        data = self.api.json_body(body, FIELDS)
        conv = "Failed to create a recurring run due to conversion error"
        name = data.get("display_name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, f"{conv}: InternalServerError: Failed to convert a API "
                                "recurring run to its internal representation: Invalid input "
                                "error: Recurring run's name cannot be empty",
                           external="Recurring run's name cannot be empty")
        trigger = data.get("trigger") or {}
        if not isinstance(trigger, dict):
            raise ApiError(400, "trigger must be an object: {cron_schedule} or "
                                "{periodic_schedule}")
        mode = data.get("mode") or "MODE_UNSPECIFIED"
        if mode not in ("MODE_UNSPECIFIED", "ENABLE", "DISABLE", 0, 1, 2):
            raise ApiError(400, f'proto: invalid value for enum field mode: "{mode}"')
        try:
            concurrency = int(data.get("max_concurrency") or 0)
        except (TypeError, ValueError):
            raise ApiError(400, "proto: invalid value for int64 field max_concurrency") \
                from None
        if not 1 <= concurrency <= 10:
            raise invalid("Max concurrency of a recurring run must be at least 1 and at most "
                          f"10. Received {concurrency}").wrap(conv)
        trigger = self._checked_trigger(trigger, conv)
        eid = data.get("experiment_id") or ""
        if eid and self.records.get("experiments", eid) is None:
            raise not_found("Experiment", eid).wrap(
                f"Failed to fetch namespace for experiment {eid}").wrap(
                "Failed to create a recurring run due to invalid experimentId and namespace "
                "combination").wrap("Failed to create a recurring run")
        eid = eid or self.api.experiments.default_id()
        spec, ref = data.get("pipeline_spec"), data.get("pipeline_version_reference") or {}
        if not spec and not (isinstance(ref, dict) and ref.get("pipeline_id")):
            raise ApiError(400, "Failed to create a recurring run: Cannot create a job with "
                                "an empty pipeline ID")
        if spec:
            from lab.webui.kfp_pipelines import documents

            documents(spec)
        else:
            self.api.pipelines.spec_of(ref)  # the version (or the pipeline) must exist
        config = data.get("runtime_config") or {}
        if not isinstance(config, dict) or not isinstance(config.get("parameters") or {},
                                                          dict):
            raise ApiError(400, "runtime_config must be an object: {parameters: {...}}")
        if config.get("pipeline_root"):
            raise ApiError(400, "runtime_config.pipeline_root is not supported locally: "
                                "outputs go to the state folder's pipeline-root")
        jid = new_id()
        stamp = now()
        record = {"recurring_run_id": jid, "display_name": name,
                  "description": str(data.get("description") or ""),
                  "k8s_name": swf_name(name, jid.replace("-", "")),
                  "pipeline_spec": spec or None,
                  "pipeline_version_reference": ref or None,
                  "runtime_config": {"parameters": config.get("parameters") or {}},
                  "max_concurrency": concurrency, "trigger": trigger,
                  "enabled": mode in ("ENABLE", 1), "created_at": stamp, "updated_at": stamp,
                  "no_catchup": bool(data.get("no_catchup")), "experiment_id": eid,
                  "last_triggered": None, "last_index": 0}
        self.records.put("recurringruns", record, jid)
        self._wake.set()
        return _view(record, self.api.namespace)

    @staticmethod
    def _checked_trigger(trigger: dict[str, Any], conv: str) -> dict[str, Any]:
        """toModelTrigger and toModelJob's checks; times kept as RFC 3339."""
        out: dict[str, Any] = {}
        cron, periodic = trigger.get("cron_schedule"), trigger.get("periodic_schedule")
        for part, key in ((cron, "cron_schedule"), (periodic, "periodic_schedule")):
            if part is None:
                continue
            if not isinstance(part, dict):
                raise ApiError(400, f"trigger.{key} must be an object")
            kept = {}
            for t in ("start_time", "end_time"):
                if part.get(t):
                    if not kfp_list.epoch(part[t]) and part[t] != "1970-01-01T00:00:00Z":
                        raise ApiError(400, f"trigger.{key}.{t}: not an RFC 3339 time: "
                                            f"{str(part[t])[:50]}")
                    kept[t] = _stamp(kfp_list.epoch(part[t]))
            if key == "cron_schedule":
                try:
                    kfp_cron.parse(str(part.get("cron") or ""))
                except kfp_cron.CronError as exc:
                    raise invalid("Schedule cron is not a supported format(https://godoc.org/"
                                  f"github.com/robfig/cron). Error: {exc}").wrap(conv) from None
                kept["cron"] = str(part.get("cron"))
            else:
                try:
                    interval = int(part.get("interval_second") or 0)
                except (TypeError, ValueError):
                    raise ApiError(400, "proto: invalid value for int64 field "
                                        "interval_second") from None
                if interval < 1:
                    raise invalid(f"Found invalid period schedule interval {interval}. Set at "
                                  "interval to least 1 second").wrap(conv)
                kept["interval_second"] = interval
            out[key] = kept
        if cron is not None and periodic is not None:  # the Trigger oneof
            raise ApiError(400, "proto: oneof kubeflow.pipelines.backend.api.v2beta1.Trigger."
                                "trigger is already set")
        return out

    def get(self, jid: str, **_: Any) -> dict[str, Any]:
        try:
            return _view(self._get(jid), self.api.namespace)
        except ApiError as exc:
            raise exc.wrap("Failed to fetch a recurring run") from None

    def list(self, query: dict[str, str], **_: Any) -> dict[str, Any]:
        """JobServer.ListRecurringRuns."""
        try:
            opts = kfp_list.options(kfp_list.RECURRING_RUNS, query)
        except kfp_list.ListError as exc:
            raise list_error(exc).wrap("Failed to list recurring runs due to error parsing "
                                        "the listing options") from None
        eid = query.get("experiment_id") or ""
        if eid and self.records.get("experiments", eid) is None:
            raise not_found("Experiment", eid).wrap(
                f"Failed to list recurring runs due to error fetching namespace for "
                f"experiment {eid}. Try filtering based on namespace").wrap(
                "Failed to list jobs")
        rows = [_view(r, self.api.namespace) for r in self.records.all("recurringruns")
                if not eid or r.get("experiment_id") == eid]
        page, total, token = kfp_list.page(opts, rows)
        return listed("recurringRuns", page, total, token)

    def _mode(self, jid: str, enable: bool) -> dict[str, Any]:
        """resource_manager.go ChangeJobMode."""
        try:
            record = self._get(jid)
        except ApiError as exc:
            raise exc.wrap(f"Failed to change recurring run's mode to enable:{str(enable).lower()}"
                           f". Check if recurring run {jid} exists").wrap(
                f"Failed to {'enable' if enable else 'disable'} a recurring run") from None
        record["enabled"] = enable
        record["updated_at"] = now()
        self.records.put("recurringruns", record, jid)
        self._wake.set()
        return {}

    def enable(self, jid: str, **_: Any) -> dict[str, Any]:
        return self._mode(jid, True)

    def disable(self, jid: str, **_: Any) -> dict[str, Any]:
        return self._mode(jid, False)

    def disable_in(self, eid: str) -> None:
        """experiment_store.go ArchiveExperiment disables the experiment's jobs."""
        for record in self.records.all("recurringruns"):
            if record.get("experiment_id") == eid and record.get("enabled"):
                record["enabled"] = False
                record["updated_at"] = now()
                self.records.put("recurringruns", record, record["recurring_run_id"])
        self._wake.set()

    def delete(self, jid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go DeleteJob: the job goes; the runs it started stay."""
        try:
            self._get(jid)
        except ApiError as exc:
            raise exc.wrap(f"Failed to delete recurring run {jid}. Check if exists").wrap(
                "Failed to delete a recurring run") from None
        self.records.drop("recurringruns", jid)
        self._wake.set()
        return {}

    # -- the scheduler ----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name="kfp-recurring-runs")
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._lock_fd is not None:
            import os

            os.close(self._lock_fd)
            self._lock_fd = None

    def wake(self) -> None:
        self._wake.set()

    def _locked(self) -> bool:
        """Whether this server schedules: it holds kfp-api/scheduler.lock."""
        if self._lock_fd is not None:
            return True
        self._lock_fd = state.try_hold(state.path(self.api.dir, "scheduler.lock"))
        return self._lock_fd is not None

    def _loop(self) -> None:
        while not self._stopped.is_set():
            timeout: float | None = RESYNC
            try:
                if self._locked():
                    with self.api.lock:
                        due, poll = self.sync(int(time.time()))
                    timeout = None if due >= kfp_cron.NEVER else max(0.0, due - time.time())
                    if poll:
                        timeout = min(timeout, RESYNC) if timeout is not None else RESYNC
            except Exception as exc:  # one line, never a dead scheduler; tried again later
                sys.stderr.write(f"kflab ui: recurring runs: {type(exc).__name__}: "
                                 f"{str(exc)[:200]}\n")
            self._wake.wait(timeout)
            self._wake.clear()

    def sync(self, now_epoch: int) -> tuple[int, bool]:
        """controller.go syncHandler for every recurring run: trigger what is due. Returns
        (the next time something is due, whether a run not this server's is active)."""
        due, poll = kfp_cron.NEVER, False
        for record in self.records.all("recurringruns"):
            nxt, foreign = self._sync_one(record, now_epoch)
            due, poll = min(due, nxt), poll or foreign
        return due, poll

    def _active(self, jid: str) -> tuple[int, bool]:
        """(runs of this job not finished, whether one of them is not this server's)."""
        count, foreign = 0, False
        runs = self.api.runs
        for record in self.records.all("runs"):
            if record.get("recurring_run_id") != jid:
                continue
            if runs.view(record)["state"] not in FINISHED:
                count += 1
                foreign = foreign or record["run_id"] not in runs.procs
        return count, foreign

    def _sync_one(self, record: dict[str, Any], now_epoch: int) -> tuple[int, bool]:
        jid = record["recurring_run_id"]
        if not record.get("enabled"):
            return kfp_cron.NEVER, False
        schedule = kfp_cron.schedule_of(record)
        created = kfp_list.epoch(record["created_at"])
        while True:
            nxt = schedule.next_epoch(record.get("last_triggered"), created, now_epoch)
            active, foreign = self._active(jid)
            if active >= int(record.get("max_concurrency") or 1):
                return kfp_cron.NEVER, foreign  # woken when one of its runs ends
            if nxt > now_epoch:
                return nxt, False
            self._trigger(record, nxt, now_epoch)

    def _trigger(self, record: dict[str, Any], scheduled: int, now_epoch: int) -> None:
        """controller.go submitNewWorkflowIfNotAlreadySubmitted + UpdateStatus: one run,
        named `<name>-<index>-<fnv32a>`, then the trigger time and index move on."""
        jid = record["recurring_run_id"]
        index = int(record.get("last_index") or 0) + 1
        resource = f"{record['k8s_name']}-{index}"
        name = f"{resource}-{fnv32a(resource)}"
        run_id = new_id()
        params = {k: format_parameter(v, run_id, scheduled, now_epoch, index)
                  for k, v in ((record.get("runtime_config") or {}).get("parameters")
                               or {}).items()}
        record["last_triggered"] = scheduled
        record["last_index"] = index
        record.pop("error", None)
        data = {"display_name": name, "runtime_config": {"parameters": params}}
        if record.get("pipeline_spec"):
            data["pipeline_spec"] = record["pipeline_spec"]
        else:
            data["pipeline_version_reference"] = record["pipeline_version_reference"]
        eid = record["experiment_id"]
        if self.records.get("experiments", eid) is None:
            eid = self.api.experiments.default_id()
        try:
            self.api.runs.start_run({k: v for k, v in data.items() if k in RUN_FIELDS}, eid,
                                    recurring_run_id=jid, scheduled_at=_stamp(scheduled),
                                    name=name)
        except ApiError as exc:  # the controller would retry; here the trigger is passed
            record["error"] = {"code": exc.code, "message": str(exc), "details": []}
            sys.stderr.write(f"kflab ui: recurring run {record['display_name']}: {exc}\n")
        with contextlib.suppress(state.StateError):
            self.records.put("recurringruns", record, jid)


def _view(r: dict[str, Any], namespace: str) -> dict[str, Any]:
    """api_converter.go toApiRecurringRun: int64 as strings (protojson), empty fields left
    out."""
    trigger: dict[str, Any] = {}
    for key, part in (r.get("trigger") or {}).items():
        part = dict(part)
        if "interval_second" in part:
            part["interval_second"] = str(part["interval_second"])
        trigger[key] = part
    out: dict[str, Any] = {
        "recurring_run_id": r["recurring_run_id"], "display_name": r["display_name"],
        "description": r.get("description"),
        "status": "ENABLED" if r.get("enabled") else "DISABLED",
        "mode": "ENABLE" if r.get("enabled") else "DISABLE",
        "created_at": r["created_at"], "updated_at": r.get("updated_at") or r["created_at"],
        "max_concurrency": str(r.get("max_concurrency") or 1), "trigger": trigger,
        "no_catchup": bool(r.get("no_catchup")), "namespace": namespace,
        "experiment_id": r.get("experiment_id"), "error": r.get("error"),
    }
    params = (r.get("runtime_config") or {}).get("parameters") or {}
    if params:
        out["runtime_config"] = {"parameters": params}
    if r.get("pipeline_version_reference"):
        out["pipeline_version_reference"] = r["pipeline_version_reference"]
    elif r.get("pipeline_spec"):
        out["pipeline_spec"] = r["pipeline_spec"]
    return {k: v for k, v in out.items() if v not in (None, "", False)}
