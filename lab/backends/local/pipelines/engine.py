"""A KFP pipeline run on this machine, scheduled as Argo schedules it on a cluster.

The input is the compiled pipeline (the PipelineSpec IR: what `kfp.compiler` writes and a
cluster runs). Every DAG is walked as the KFP driver and Argo walk it: a task starts as soon
as the tasks it depends on have finished, so independent tasks run side by side, bounded by
the run's parallelism (slots for task processes) and by each `dsl.ParallelFor`'s own
`parallelism`; after a failure no new task starts in that DAG (Argo's failFast) except those
that run when their upstream tasks complete whatever their state (`dsl.ExitHandler`'s exit
task, `ignore_upstream_failure()`). Control flow comes from the IR as on a cluster:
`trigger_policy.condition` (dsl.If/Elif/Else, a CEL expression, lab.backends.local.pipelines
.cel), `parameter_iterator` (dsl.ParallelFor over a list given or computed), nested DAGs,
`retry_policy` (set_retry), the container's env (set_env_variable), `caching_options`.

What a task's process receives is built by kfp.local's own helpers (kfp pinned at 2.17.3):
`executor_input_utils.construct_executor_input` / `executor_input_to_dict`,
`placeholder_utils.replace_placeholders`, `executor_output_utils.get_outputs_for_task`,
`importer_handler.run_importer`, `io.IOStore` and `OrchestratorUtils` (inputs of a task, a
DAG's outputs); the process itself runs kfp's executor entry point (taskproc.py). What the
KFP driver and launcher add around a task is driver.py's; the run starts from a Plan that
plan.py checked before anything ran.
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.backends.local import procs
from lab.backends.local.pipelines import cel, driver, taskproc
from lab.backends.local.pipelines.cache import Cache, fingerprint
from lab.backends.local.pipelines.plan import Plan
from lab.backends.pipeline_memo import cached_event, read_task_outputs, stamp
from lab.errors import LabError

SUCCEEDED, FAILED, SKIPPED, CANCELED = "SUCCEEDED", "FAILED", "SKIPPED", "CANCELED"
# a task's state as MLMD records its execution (ml_metadata Execution.State names), which
# is what a PipelineTaskFinalStatus reports on a cluster
MLMD_STATE = {SUCCEEDED: "COMPLETE", FAILED: "FAILED", CANCELED: "CANCELED"}


class _Tail(threading.Thread):
    """Copies a task's log file into the run log, each line prefixed `[task] `."""

    def __init__(self, src: Path, prefix: str, out: Any, lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.src, self.prefix, self.out, self.lock = src, prefix, out, lock
        self.done = threading.Event()

    def run(self) -> None:
        pos, partial = 0, ""
        while True:
            finished = self.done.is_set()
            try:
                with open(self.src, errors="replace") as fh:
                    fh.seek(pos)
                    chunk = fh.read()
                    pos = fh.tell()
            except OSError:
                chunk = ""
            if chunk:
                lines = (partial + chunk).split("\n")
                partial = lines.pop()
                with self.lock:
                    for line in lines:
                        self.out.write(f"[{self.prefix}] {line}\n")
                    self.out.flush()
            if finished:
                if partial:
                    with self.lock:
                        self.out.write(f"[{self.prefix}] {partial}\n")
                        self.out.flush()
                return
            time.sleep(0.1)


class Run:
    """One run of a Plan; `details` is the run's task_details, kept current."""

    def __init__(self, the_plan: Plan, *, run_id: str, pipeline_root: Path, logs: Path,
                 run_log: Any, tmp: Path, parallelism: int, cache: Cache | None,
                 lease: Any, env: dict[str, str], on_change: Callable[[], None],
                 sink: Callable[[dict[str, Any]], None] | None) -> None:
        self.plan, self.run_id = the_plan, run_id
        # the Argo workflow's name on a cluster (generateName: "<pipeline name>-"), which the
        # driver passes as the run name
        self.workflow_name = f"{the_plan.spec.pipeline_info.name}-{run_id[:5]}"
        self.display_name = run_id  # the run's name, set by the runner
        self.created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.root = pipeline_root / run_id
        self.logs, self.run_log, self.tmp = logs, run_log, tmp
        self.slots = threading.BoundedSemaphore(max(1, parallelism))
        self.cache, self.lease, self.env = cache, lease, env
        self.on_change, self.sink = on_change, sink
        self.details: list[dict[str, Any]] = []
        self.lock = threading.RLock()
        self.log_lock = threading.Lock()
        self.cancel = threading.Event()
        self.running: dict[str, procs.ProcRecord] = {}  # label: the task, its start time
        self.errors: list[str] = []
        # replay.py: the cache entry behind each task node (id(node) -> key, types, folder);
        # False once a task ran that a re-run could not take from the cache
        self.memo: dict[int, dict[str, Any]] = {}
        self.replayable = cache is not None

    # --- records --------------------------------------------------------------------------

    def _node(self, display: str, state: str, **extra: Any) -> dict[str, Any]:
        node = {"display_name": display, "state": state, "outputs": None, **extra}
        with self.lock:
            self.details.append(node)
        self._changed()
        return node

    def _set(self, node: dict[str, Any], **fields: Any) -> None:
        with self.lock:
            node.update(fields)
        self._changed()
        if self.sink and "state" in fields:
            st = fields["state"]
            ev = {"event": "task-started" if st == "RUNNING" else "task-finished",
                  "task": node["display_name"]}
            if st != "RUNNING":
                ev["state"] = st
            with contextlib.suppress(Exception):
                self.sink(ev)

    def _finished(self, node: dict[str, Any]) -> None:
        """A task that ends as it is recorded (a cache hit): told to the sink as one that
        finished, with where its result came from."""
        if self.sink is None:
            return
        ev = {"event": "task-finished", "task": node["display_name"], "state": node["state"],
              **cached_event(node)}
        with contextlib.suppress(Exception):
            self.sink(ev)

    def _changed(self) -> None:
        with self.lock, contextlib.suppress(Exception):
            self.on_change()

    # --- the run ----------------------------------------------------------------------------

    def execute(self, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Run the root DAG; (succeeded, outputs). KeyboardInterrupt stops every task."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            return self._dag(self.plan.spec.root, arguments, None, "")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Cancel: no new task starts, every running task's process group is stopped."""
        self.cancel.set()
        with self.lock:
            records = list(self.running.values())
        with contextlib.suppress(Exception):
            procs.stop_all(records, grace=2.0)
        with self.lock:
            for node in self.details:
                if node["state"] in ("RUNNING", "PENDING"):
                    node["state"] = CANCELED
                    node.setdefault("end_time", stamp())
        self._changed()

    def _dag(self, comp: Any, args: dict[str, Any], parent: Any, suffix: str,
             scope: str = "") -> tuple[bool, dict[str, Any]]:
        """Run one DAG; `suffix` marks a ParallelFor iteration (`.0`, `.0.1`), `scope` is the
        path of the DAG task (sub-pipeline, condition, loop) this DAG runs in."""
        from kfp.local import io
        from kfp.pipeline_spec import pipeline_spec_pb2

        all_done = pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.TriggerStrategy \
            .ALL_UPSTREAM_TASKS_COMPLETED
        store = io.IOStore(parent=parent)
        for k, v in driver.with_defaults(comp, args).items():
            store.put_parent_input(k, v)
        tasks = dict(comp.dag.tasks)
        states: dict[str, str] = {}
        bad: set[str] = set()
        failed = False
        done: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
        running: set[str] = set()
        while len(states) < len(tasks):
            for name, task in tasks.items():
                if name in states or name in running:
                    continue
                deps = driver.depends(task, tasks)
                if not all(d in states for d in deps):
                    continue
                completes = task.trigger_policy.strategy == all_done
                if (self.cancel.is_set() or failed or any(d in bad for d in deps)) \
                        and not (completes and not self.cancel.is_set()):
                    states[name] = SKIPPED
                    bad.add(name)
                    self._node(name + suffix, SKIPPED, **_parent(scope))
                    continue
                running.add(name)
                threading.Thread(target=self._task_thread, daemon=True,
                                 args=(name, task, store, suffix, states, done, scope)).start()
            if not running:
                break
            while True:
                try:
                    name, state, outputs = done.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
            running.discard(name)
            states[name] = state
            store.put_task_status(name, state)
            if state == SUCCEEDED:
                for key, value in outputs.items():
                    store.put_task_output(name, key, value)
            elif state in (FAILED, CANCELED):
                failed = True
                bad.add(name)
        if failed or self.cancel.is_set():
            return False, {}
        return True, driver.dag_outputs(comp, store)

    def _task_thread(self, name: str, task: Any, store: Any, suffix: str,
                     states: dict[str, str], done: queue.Queue, scope: str) -> None:
        try:
            state, outputs = self._task(name, task, store, suffix, states, scope)
        except Exception as exc:  # never leave the DAG waiting
            self.errors.append(f"task '{name}{suffix}': {exc}")
            state, outputs = FAILED, {}
        done.put((name, state, outputs))

    def _arguments(self, task: Any, store: Any, states: dict[str, str]) -> dict[str, Any]:
        """The task's inputs, as the driver resolves them (PipelineTaskFinalStatus too)."""
        from kfp.local.orchestrator.orchestrator_utils import OrchestratorUtils
        from kfp.pipeline_spec import pipeline_spec_pb2

        final = {k: v for k, v in task.inputs.parameters.items() if v.HasField(
            "task_final_status")}
        spec = pipeline_spec_pb2.TaskInputsSpec()
        spec.CopyFrom(task.inputs)
        for k in final:
            del spec.parameters[k]
        if final:
            self.replayable = False  # its input names the run: its key never repeats
        args = OrchestratorUtils.make_task_arguments(task_inputs_spec=spec, io_store=store)
        for k, v in final.items():
            # as KFP 2.16's driver builds it (backend/src/v2/driver/resolve.go,
            # resolveInputParameter, TaskFinalStatus case): the producer's MLMD execution
            # state (COMPLETE, FAILED, CANCELED, ...), the run's workflow name, and an empty
            # error ("TODO: Implement fields Message and Code" there)
            producer = v.task_final_status.producer_task
            state = states.get(producer, SUCCEEDED)
            args[k] = {"state": MLMD_STATE.get(state, state),
                       "pipelineJobResourceName": self.workflow_name,
                       "pipelineTaskName": producer,
                       "error": {}}
        return args

    def _runtime_values(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """An input given one of the run's placeholders as its whole value gets the value,
        as KFP 2.16's driver resolves it (backend/src/v2/driver/resolve.go,
        resolveInputParameter: `{{$.pipeline_job_name}}` the run's display name,
        `..._resource_name` the workflow's name, `..._uuid` the run id, `{{$.pipeline_task_name}}`
        the task's name, `{{$.pipeline_task_uuid}}` its DAG's execution id (a number), the
        create/schedule times); kfp.local knows only some of them."""
        values = {"{{$.pipeline_job_name}}": self.display_name,
                  "{{$.pipeline_job_resource_name}}": self.workflow_name,
                  "{{$.pipeline_job_uuid}}": self.run_id,
                  "{{$.pipeline_task_name}}": name,
                  "{{$.pipeline_task_uuid}}": str(abs(hash((self.run_id, name))) % 10**6),
                  "{{$.pipeline_job_create_time_utc}}": self.created,
                  "{{$.pipeline_job_schedule_time_utc}}": self.created}
        out = dict(args)
        for key, value in args.items():
            if isinstance(value, str) and value in values:
                out[key] = values[value]
                self.replayable = False  # a value of this run: its key never repeats
        return out

    def _task(self, name: str, task: Any, store: Any, suffix: str, states: dict[str, str],
              scope: str = "") -> tuple[str, dict[str, Any]]:
        display = name + suffix
        path = task_path(scope, display)
        comp = self.plan.spec.components[task.component_ref.name]
        args = self._runtime_values(name, self._arguments(task, store, states))
        if task.trigger_policy.condition and not cel.evaluate(
                task.trigger_policy.condition, args):
            self._node(display, SKIPPED, start_time=stamp(), end_time=stamp(), **_parent(scope))
            return SKIPPED, {}
        if task.WhichOneof("iterator") == "parameter_iterator":
            return self._loop(name, task, comp, args, store, suffix, scope)
        if comp.WhichOneof("implementation") == "dag":
            node = self._node(display, "RUNNING", start_time=stamp(), **_parent(scope))
            args = {k: v for k, v in args.items() if v is not None}  # optional, unset
            ok, outputs = self._dag(comp, args, store, suffix, path)
            self._set(node, state=SUCCEEDED if ok else (
                CANCELED if self.cancel.is_set() else FAILED), end_time=stamp())
            return node["state"], outputs
        return self._execute(display, task, comp, args, scope)

    def _loop(self, name: str, task: Any, comp: Any, args: dict[str, Any], store: Any,
              suffix: str, scope: str = "") -> tuple[str, dict[str, Any]]:
        it = task.parameter_iterator
        if it.items.HasField("raw"):
            items = json.loads(it.items.raw)
        else:
            items = args.get(it.items.input_parameter)
            if isinstance(items, str):
                items = json.loads(items)
        if not isinstance(items, list):
            raise LabError(f"ParallelFor '{name}': items are not a list: {items!r}"[:300])
        from lab import limits

        if len(items) > limits.MAX_PARALLELFOR_ITEMS:
            raise LabError(f"ParallelFor '{name}': " + limits.limit(
                "a ParallelFor of", f"{len(items)} items", limits.MAX_PARALLELFOR_ITEMS,
                "MAX_PARALLELFOR_ITEMS"))
        limit = task.iterator_policy.parallelism_limit if task.HasField("iterator_policy") \
            else 0
        gate = threading.BoundedSemaphore(limit) if limit > 0 else contextlib.nullcontext()
        node = self._node(name + suffix, "RUNNING", start_time=stamp(),
                          iterations=len(items), **_parent(scope))
        path = task_path(scope, name + suffix)
        results: list[tuple[bool, dict[str, Any]]] = [(False, {})] * len(items)

        def one(i: int, item: Any) -> None:
            with gate:  # type: ignore[attr-defined]
                if self.cancel.is_set():
                    return
                results[i] = self._dag(comp, {**args, it.item_input: item}, store,
                                       f"{suffix}.{i}", path)

        threads = [threading.Thread(target=one, args=(i, item), daemon=True)
                   for i, item in enumerate(items)]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
        ok = all(r[0] for r in results)
        collected: dict[str, list[Any]] = {}
        if ok:
            for _, outs in results:
                for key, value in outs.items():
                    if isinstance(value, list) and value and all(
                            hasattr(v, "uri") for v in value):
                        # artifacts collected by an inner loop: one flat list, as KFP 2.16's
                        # driver collects them (backend/src/v2/driver/resolve.go,
                        # CollectInputs: a breadth-first walk into one ArtifactList)
                        collected.setdefault(key, []).extend(value)
                    else:
                        collected.setdefault(key, []).append(value)
        self._set(node, state=SUCCEEDED if ok else (
            CANCELED if self.cancel.is_set() else FAILED), end_time=stamp())
        return node["state"], collected

    def _execute(self, display: str, task: Any, comp: Any, args: dict[str, Any],
                 scope: str = "") -> tuple[str, dict[str, Any]]:
        from google.protobuf import json_format
        from kfp.local import executor_input_utils, executor_output_utils, placeholder_utils
        from kfp.pipeline_spec import pipeline_spec_pb2

        ex = self.plan.executors[comp.executor_label]
        # a task's folder, log and log prefix are its path: two tasks of one name in two
        # sub-DAGs (a sub-pipeline used twice) never share them
        path = task_path(scope, display)
        parent = _parent(scope)
        task_root = self.root / path
        task_root.mkdir(parents=True, exist_ok=True)
        if ex.WhichOneof("spec") == "importer":
            from kfp.local import importer_handler, status

            self.replayable = False
            node = self._node(display, "RUNNING", start_time=stamp(), **parent)
            outputs, st = importer_handler.run_importer(
                pipeline_resource_name=self.run_id, component_name=task.component_ref.name,
                component_spec=comp, executor_spec=ex, arguments=args,
                pipeline_root=str(self.root), unique_pipeline_id=self.run_id)
            state = SUCCEEDED if st == status.Status.SUCCESS else FAILED
            self._set(node, state=state, end_time=stamp())
            return state, outputs if state == SUCCEEDED else {}
        args = driver.as_declared(comp, args)
        executor_input = executor_input_utils.construct_executor_input(
            component_spec=comp, arguments=args, task_root=str(task_root),
            block_input_artifact=False)
        values = executor_input.inputs.parameter_values
        for unset in [k for k, v in values.items() if v.WhichOneof("kind") in (None, "null_value")]:
            # an optional input nothing was given for (an optional DAG input passed on):
            # not passed at all, the component's own default applies, as on a cluster
            del values[unset]
        ex_dict = driver.json_numbers(executor_input_utils.executor_input_to_dict(
            executor_input=executor_input, component_spec=comp))
        (task_root / "executor_input.json").write_text(json.dumps(ex_dict))
        container = ex.container
        key = None
        if self.cache is not None and task.caching_options.enable_cache:
            types = {n: pipeline_spec_pb2.ParameterType.ParameterTypeEnum.Name(
                d.parameter_type) for n, d in comp.output_definitions.parameters.items()}
            key = fingerprint(ex_dict, types, container.image,
                              [*container.command, *container.args])
            hit = self.cache.get(key)
            outputs = None
            if hit is not None:
                cached = pipeline_spec_pb2.ExecutorInput()
                try:
                    json_format.ParseDict(json.loads((hit / "executor_input.json").read_text()),
                                          cached, ignore_unknown_fields=True)
                    outputs = executor_output_utils.get_outputs_for_task(
                        executor_input=cached, component_spec=comp)
                except Exception:  # a cached folder damaged since it was written: a miss
                    outputs = None
            if hit is not None and outputs is not None:
                # KFP's API reports a task reused from the cache as SKIPPED (v2beta1
                # RuntimeState: "skipped, for example, due to caching"); MLMD keeps CACHED
                # and names the execution it reused (MLMD's cached_execution_id: cache.py)
                now = stamp()
                came = self.cache.origin(key)
                hit_node = self._node(display, SKIPPED, cached=True, start_time=now,
                                      end_time=now, **parent,
                                      **({"cached_from": came} if came else {}),
                                      outputs=read_task_outputs(hit, driver.artifact_types(comp)))
                self.memo[id(hit_node)] = {"key": key, "types": driver.artifact_types(comp),
                                           "task_root": str(hit)}
                self._finished(hit_node)
                return SUCCEEDED, outputs  # to its DAG, a cache hit is a success
        if key is None:
            self.replayable = False  # caching off for this task: it runs every time
        taskproc.warm_up_async()  # a task to run: start the fork server (an all-cached run
        # never pays for it)
        args_resolved = placeholder_utils.replace_placeholders(
            full_command=list(container.args), executor_input_dict=ex_dict,
            pipeline_resource_name=self.run_id, task_resource_name=display,
            pipeline_root=str(self.root), unique_pipeline_id=self.run_id)
        program = self.plan.programs[comp.executor_label]
        env = {**self.env, **{e.name: e.value for e in container.env}}
        env[procs.TAG] = self.lease.token
        policy = task.retry_policy
        attempts = max(0, policy.max_retry_count) + 1
        backoff = policy.backoff_duration.seconds if policy.HasField("backoff_duration") \
            else 0
        factor = policy.backoff_factor if policy.backoff_factor > 0 else 2.0
        cap = policy.backoff_max_duration.seconds \
            if policy.HasField("backoff_max_duration") else 3600
        node = self._node(display, "PENDING", **parent)
        log = self.logs / f"{path}.log"
        if (short := _gpu_shortage(container, ex_dict)) is not None:
            # A cluster keeps the pod Pending until a node has the GPUs; none will appear
            # here, so the task fails before it starts, saying why (as a Notebook or a
            # training job asking for more GPUs than the machine has is refused).
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"kflab: task {path} {short}\n")
            with self.log_lock:
                self.run_log.write(f"[{path}] not started: {short}\n")
            self._set(node, state=FAILED, start_time=stamp(), end_time=stamp())
            return FAILED, {}
        rc, ended = 1, ""
        for attempt in range(attempts):
            with self.slots:
                if self.cancel.is_set():
                    self._set(node, state=CANCELED, end_time=stamp())
                    return CANCELED, {}
                fields: dict[str, Any] = {"state": "RUNNING"}
                if attempt == 0:
                    fields["start_time"] = stamp()
                self._set(node, **fields)
                rc = self._process(path, program, args_resolved, env, log)
                ended = stamp()  # inside the slot: the next task starts after this
            if rc == 0 or self.cancel.is_set() or attempt + 1 == attempts:
                break
            delay = min(backoff * factor ** attempt, cap)
            with self.log_lock:
                self.run_log.write(f"[{path}] failed ({_exit_text(rc)}); retry "
                                   f"{attempt + 1} of {attempts - 1} in {delay:g}s\n")
            self.cancel.wait(delay)
        if self.cancel.is_set():
            self._set(node, state=CANCELED, end_time=stamp())
            return CANCELED, {}
        if rc != 0:
            with self.log_lock:
                self.run_log.write(f"[{path}] failed ({_exit_text(rc)})\n")
            self._set(node, state=FAILED, end_time=ended)
            return FAILED, {}
        try:
            driver.upload_custom_paths(task_root)
            outputs = executor_output_utils.get_outputs_for_task(
                executor_input=executor_input, component_spec=comp)
        except Exception as exc:
            self.errors.append(f"task '{display}': its outputs could not be read: {exc}")
            self._set(node, state=FAILED, end_time=ended)
            return FAILED, {}
        if key is not None:
            try:
                self.cache.put(key, task_root, self.run_id,  # type: ignore[union-attr]
                               run=self.display_name, log=log)
                self.memo[id(node)] = {"key": key, "types": driver.artifact_types(comp),
                                       "task_root": str(task_root)}
            except Exception:
                self.replayable = False
        self._set(node, state=SUCCEEDED, end_time=ended,
                  outputs=read_task_outputs(task_root, driver.artifact_types(comp)))
        return SUCCEEDED, outputs

    def _process(self, display: str, program: taskproc.Program, args: list[str],
                 env: dict[str, str], log: Path) -> int:
        log.parent.mkdir(parents=True, exist_ok=True)
        tail = _Tail(log, display, self.run_log, self.log_lock)
        tail.start()
        proc = taskproc.start(program, args, env, str(log), str(self.tmp))
        label = f"task-{proc.pid}"
        with self.lock:
            # its start time now, while the fork server cannot have reaped it yet: stop()
            # must not signal a number a later task has taken
            self.running[label] = procs.ProcRecord.of(label, proc.pid)
        try:
            with contextlib.suppress(Exception):
                self.lease.add(label, proc.pid, [taskproc.EXECUTOR_MODULE, display])
            rc = None
            while rc is None:
                rc = taskproc.exit_code(proc, 0.2)
            return rc
        finally:
            with self.lock:
                self.running.pop(label, None)
            with contextlib.suppress(Exception):
                self.lease.drop(label)
            tail.done.set()
            tail.join(timeout=5)


def task_path(scope: str, display: str) -> str:
    """A task's path in the run: its display name under the DAG tasks it runs in
    (`exit-handler-1/for-loop-2/square.0`); a root task's path is its display name. It names
    the task's folder, its log and its lines in the run log (`[PATH] ...`)."""
    return f"{scope}/{display}" if scope else display


def _parent(scope: str) -> dict[str, str]:
    """The `parent` field of a task in a sub-DAG: the path of the DAG task it runs in (the
    KFP API's parent_task_id, as a path)."""
    return {"parent": scope} if scope else {}


_PARAM = re.compile(r"^\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}$")


def _gpu_shortage(container: Any, executor_input: dict[str, Any]) -> str | None:
    """Why a task asking for more GPUs than this machine has cannot start, or None. The
    count is the container's accelerator resourceCount (a number, or an input placeholder
    resolved as the driver does: backend/src/v2/driver/driver.go initPodSpecPatch), else
    the older `count`."""
    acc = container.resources.accelerator
    raw: Any = acc.resource_count or (acc.count or "")
    if isinstance(raw, str) and (m := _PARAM.match(raw)):
        raw = ((executor_input.get("inputs") or {}).get("parameterValues") or {}).get(m[1])
    try:
        asked = int(float(raw)) if raw not in (None, "") else 0
    except (TypeError, ValueError):
        return None
    if asked <= 0:
        return None
    from lab.backends.local import gpus

    have = len(gpus.inventory())
    if asked <= have:
        return None
    return (f"asks for {asked} GPU(s) (set_accelerator_limit) but {gpus.shortage(asked, have)}"
            ": on a cluster its pod waits Pending for a node with them; run this pipeline "
            "where GPUs are (`kflab doctor` lists them)")


def _exit_text(rc: int) -> str:
    """How a task process ended, as a log line says it (multiprocessing gives -N for a
    task killed by signal N)."""
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"
