"""STAND-IN for the Kubeflow controllers (and the kubelet's container runtime) of the stand-in
cluster: Katib's experiment/trial controllers, the Training Operator, KServe's controller.

It watches the API server (a 0.5 s poll of each kind; the backend under test uses real
watches) and, for each new generation of an Experiment, PyTorchJob, TFJob, TrainJob,
InferenceService or Notebook:
1. reads the pod templates as the controller would, and prepares their volumes the way the
   kubelet would: ConfigMaps fetched from the API server and written out (items at their
   paths), emptyDirs as fresh folders; paths under each mountPath are mapped to those folders
   (this machine has no mount namespaces);
2. runs the workload here with kflab's local engines (tests/standins/run_local.py, one
   process each), which implement the same upstream semantics the local backend offers:
   Optuna-driven Katib search with the StdOut metrics collector, the Training Operator's
   replica env contract, KServe's own model server;
3. writes what the upstream controller writes, through the status subresource with the
   object's resourceVersion (controller-runtime's Status().Update): Katib's Experiment
   conditions (Created, Running, Succeeded/Failed), trial counts and currentOptimalTrial, one
   Trial object per trial with its observation; the Training Operator's conditions and
   replicaStatuses; KServe's Ready/PredictorReady/IngressReady, url, address and
   observedGeneration. The status content comes from the local engines, whose shapes follow
   the CRDs (the v1.36 server validates every write against them).
It also creates the Pods those controllers would (bound to the stand-in node, labelled as
upstream labels them) and the predictor Service, and registers each container's log and
port with the kubelet stand-in. Deleting a resource stops its processes and removes its pods
(the garbage collector's part).

Not covered: scheduling, resource limits, restarts by the kubelet, one emptyDir per pod (the
replicas of one job share a folder here), suggestion/db-manager pods, Knative.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import logging
import posixpath
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.standins.cluster import NODE

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
MANAGER = "kubeflow-controller-standin"
MANUAL = "manual-"  # namespaces where a test plays the controller itself
KINDS = {"Experiment": "kubeflow.org/v1beta1", "PyTorchJob": "kubeflow.org/v1",
         "TFJob": "kubeflow.org/v1", "InferenceService": "serving.kserve.io/v1beta1",
         "Notebook": "kubeflow.org/v1", "TrainJob": "trainer.kubeflow.org/v1alpha1"}
# training job kind -> (its replica specs' key, the operator-name label of its pods)
TRAINING = {"PyTorchJob": ("pytorchReplicaSpecs", "pytorchjob-controller"),
            "TFJob": ("tfReplicaSpecs", "tfjob-controller")}


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    out["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "annotations")
                       if k in meta}
    return out



def _random_suffix() -> str:
    """The API server's generateName suffix: 5 of these characters (apiserver
    pkg/storage/names/generate.go, utilrand.String: no vowels, no 0/1/3)."""
    import random

    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))



def replica_set_name(dep: dict[str, Any]) -> str:
    """`<deployment>-<pod-template-hash>` (deployment_util.go: the hash of the template,
    10 safe characters); here a digest of the template stands for that hash."""
    import hashlib

    digest = hashlib.sha256(json.dumps((dep.get("spec") or {}).get("template") or {},
                                       sort_keys=True).encode()).hexdigest()
    safe = "".join("bcdfghjklmnpqrstvwxz2456789"[int(c, 16) % 27] for c in digest[:10])
    return f"{dep['metadata']['name']}-{safe}"


def deployment_conditions(rs: str, available: bool, done: bool, failure: str | None,
                          stamp: str) -> list[dict[str, Any]]:
    """The Deployment's conditions as kubernetes v1.34 pkg/controller/deployment writes
    them: Available (sync.go calculateStatus: MinimumReplicasAvailable "Deployment has
    minimum availability." / MinimumReplicasUnavailable "Deployment does not have minimum
    availability."); Progressing (progress.go syncRolloutStatus, util/deployment_util.go
    NewReplicaSetAvailable 'ReplicaSet "RS" has successfully progressed.', ReplicaSetUpdated
    'ReplicaSet "RS" is progressing.', and past progressDeadlineSeconds False
    ProgressDeadlineExceeded 'ReplicaSet "RS" has timed out progressing.'); ReplicaFailure
    True copied from the ReplicaSet's (replica_set.go manageReplicas: FailedCreate, the pod
    creation error)."""
    conds = [
        {"type": "Available", "status": "True" if available else "False",
         "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
         "message": "Deployment has minimum availability." if available
         else "Deployment does not have minimum availability.",
         "lastUpdateTime": stamp, "lastTransitionTime": stamp}]
    if failure == "deadline":
        conds.append({"type": "Progressing", "status": "False",
                      "reason": "ProgressDeadlineExceeded",
                      "message": f'ReplicaSet "{rs}" has timed out progressing.',
                      "lastUpdateTime": stamp, "lastTransitionTime": stamp})
    else:
        conds.append({"type": "Progressing", "status": "True",
                      "reason": "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                      "message": f'ReplicaSet "{rs}" '
                                 + ("has successfully progressed." if done
                                    else "is progressing."),
                      "lastUpdateTime": stamp, "lastTransitionTime": stamp})
    if failure == "replicas":
        conds.append({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                      "message": f'pods "{rs}-" is forbidden: exceeded quota: kflab-class, '
                                 "requested: pods=1, used: pods=12, limited: pods=12",
                      "lastUpdateTime": stamp, "lastTransitionTime": stamp})
    return conds

class Controllers:
    def __init__(self, cluster: Any, root: Path) -> None:
        self.cluster = cluster
        self.kube = cluster.kube()
        self.kubelet = cluster.kubelet
        self.root = root
        self.state = root / "engine-state"
        self.seen: dict[tuple[str, str, str], str] = {}
        self.stop_flag = threading.Event()
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.guards: list[threading.Thread] = []

    # --- plumbing ---------------------------------------------------------------------------

    def local(self) -> Any:
        from lab.backends.local import LocalBackend

        return LocalBackend(str(self.state))

    def start(self) -> None:
        threading.Thread(target=self._loop, daemon=True).start()

    def stop(self) -> None:
        """Stop reconciling, end the local engines, then wait for the reconcilers still running
        (before the API servers stop: one still writing a status then would fail)."""
        self.stop_flag.set()
        try:
            self.local().down()
        except Exception as exc:
            log.warning("stopping local engines: %s", exc)
        for guard in list(self.guards):
            guard.join(30)

    def _loop(self) -> None:
        from lab.kube.objects import list_objects

        while not self.stop_flag.is_set():
            for kind, api in KINDS.items():
                try:
                    items = list_objects(self.kube, api, kind, None)
                except Exception as exc:  # the API server may be down on purpose (a test)
                    log.info("list %s: %s", kind, exc)
                    continue
                present = set()
                for obj in items:
                    meta = obj["metadata"]
                    if meta["namespace"].startswith(MANUAL):
                        continue
                    key = (kind, meta["namespace"], meta["name"])
                    present.add(key)
                    stamp = f"{meta['uid']}/{meta.get('generation')}"
                    if self.seen.get(key) != stamp and not meta.get("deletionTimestamp"):
                        self.seen[key] = stamp
                        guard = threading.Thread(target=self._guard, args=(kind, obj),
                                                 daemon=True)
                        self.guards = [g for g in self.guards if g.is_alive()] + [guard]
                        guard.start()
                for key in [k for k in self.seen if k[0] == kind and k not in present]:
                    del self.seen[key]
                    self._guard_gone(key)
            time.sleep(0.5)

    def _guard(self, kind: str, obj: dict[str, Any]) -> None:
        try:
            getattr(self, f"_run_{kind.lower()}")(obj)
        except Exception as exc:
            if self.stop_flag.is_set():  # the world is being torn down under it
                log.info("stand-in controller for %s stopped: %r", kind, exc)
                return
            log.exception("stand-in controller for %s", kind)
            self.errors.append(f"{kind} {obj['metadata']['name']}: {exc!r}")

    def _guard_gone(self, key: tuple[str, str, str]) -> None:
        kind, ns, name = key
        try:
            self.local().delete(kind, name, ns)
            self._delete_pods(ns, self._owner_selector(kind, name))
        except Exception as exc:
            self.errors.append(f"cleanup {kind} {name}: {exc!r}")

    @staticmethod
    def _owner_selector(kind: str, name: str) -> str:
        from lab.kube.logs import selector_for

        return selector_for(kind, name)

    # --- what a kubelet does for a pod's volumes --------------------------------------------

    def _volumes(self, ns: str, pod_spec: dict[str, Any], where: Path) -> dict[str, Path]:
        from lab.kube.objects import Ref, get

        out: dict[str, Path] = {}
        for v in pod_spec.get("volumes") or []:
            folder = where / v["name"]
            folder.mkdir(parents=True, exist_ok=True)
            if "configMap" in v:
                cm = get(self.kube, Ref("v1", "ConfigMap", v["configMap"]["name"], ns))
                data = {k: val.encode() for k, val in (cm.get("data") or {}).items()}
                data |= {k: base64.b64decode(val)
                         for k, val in (cm.get("binaryData") or {}).items()}
                items = v["configMap"].get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    target = folder / item["path"]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data[item["key"]])
            elif "hostPath" in v:
                folder = Path(v["hostPath"]["path"])
            out[v["name"]] = folder
        return out

    @staticmethod
    def _map_paths(container: dict[str, Any], volumes: dict[str, Path]) -> None:
        """Rewrite paths under each mountPath to its folder (no mount namespace here)."""
        mounts = {m["mountPath"]: volumes[m["name"]]
                  for m in container.get("volumeMounts") or [] if m["name"] in volumes}

        def tr(value: Any) -> Any:
            """Each mount path, where it starts a path (a whole word, after `=`, or inside
            a `sh -c` line), becomes its folder."""
            if not isinstance(value, str):
                return value
            for mp in sorted(mounts, key=len, reverse=True):
                value = re.sub(r"(?<![\w./-])" + re.escape(mp) + r"(?=/|$|[\s'\"])",
                               lambda _m, mp=mp: str(mounts[mp]), value)
            return value

        for key in ("command", "args"):
            if key in container:
                container[key] = [tr(a) for a in container[key]]
        if "workingDir" in container:
            container["workingDir"] = tr(container["workingDir"])
        container.pop("volumeMounts", None)

    def _prepare(self, ns: str, pod_spec: dict[str, Any], where: Path) -> Path:
        """Volumes out, paths mapped; returns the work folder (the emptyDir) or `where`."""
        volumes = self._volumes(ns, pod_spec, where)
        for c in pod_spec.get("containers") or []:
            self._map_paths(c, volumes)
        pod_spec.pop("volumes", None)
        return volumes.get("kflab-work", where)

    def _run_local(self, obj: dict[str, Any], base: Path, folder: Path) -> subprocess.Popen:
        manifest = folder / "manifest.json"
        manifest.write_text(json.dumps(obj))
        out = (folder / "run_local.log").open("ab")
        return subprocess.Popen([sys.executable, "-m", "tests.standins.run_local",
                                 str(self.state), str(manifest), str(base)],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT)

    def _folder(self, obj: dict[str, Any]) -> Path:
        meta = obj["metadata"]
        path = self.root / "objects" / obj["kind"].lower() / meta["namespace"] / \
            f"{meta['name']}-{meta['uid'][:8]}-{meta.get('generation')}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    # --- API writes as the controllers make them --------------------------------------------

    def put_status(self, api: str, kind: str, ns: str, name: str,
                   status: dict[str, Any]) -> None:
        """Status().Update: PUT the status subresource with the current resourceVersion."""
        from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

        res = self.kube.resource(api, kind)
        for _ in range(10):
            try:
                live = self.kube.dynamic.get(res, name=name, namespace=ns).to_dict()
            except NotFoundError:
                return
            if live.get("status") == status:
                return
            live["status"] = status
            try:
                self.kube.dynamic.replace(res.status, body=live, name=name, namespace=ns)
                return
            except ConflictError:
                time.sleep(0.1)
            except NotFoundError:
                return

    def _pod(self, ns: str, name: str, labels: dict[str, str], spec: dict[str, Any],
             owner: dict[str, Any]) -> None:
        from lab.kube.objects import apply

        spec = copy.deepcopy(spec)
        spec["nodeName"] = NODE
        meta = owner["metadata"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": ns, "labels": labels,
                            "ownerReferences": [{"apiVersion": owner["apiVersion"],
                                                 "kind": owner["kind"], "name": meta["name"],
                                                 "uid": meta["uid"], "controller": True}]},
               "spec": spec}
        apply(self.kube, pod, manager=MANAGER, force=True)

    def _pod_phase(self, ns: str, name: str, phase: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = "True" if phase == "Running" else "False"
        self.put_status("v1", "Pod", ns, name, {
            "phase": phase, "hostIP": "127.0.0.1", "podIP": "127.0.0.1", "startTime": stamp,
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": stamp}]})

    def _delete_pods(self, ns: str, selector: str) -> None:
        from lab.kube.logs import pods

        res = self.kube.resource("v1", "Pod")
        for pod in pods(self.kube, ns, selector):
            # the kubelet's last word on a deleted pod: remove it now (grace period 0)
            with contextlib.suppress(Exception):
                self.kube.dynamic.delete(res, name=pod["metadata"]["name"], namespace=ns,
                                         body={"apiVersion": "v1", "kind": "DeleteOptions",
                                               "gracePeriodSeconds": 0})

    def _register_logs(self, ns: str, pod: str, spec: dict[str, Any], source: Any) -> None:
        for c in spec.get("containers") or []:
            self.kubelet.logs[(ns, pod, c["name"])] = source

    # --- Training Operator --------------------------------------------------------------------

    def _run_pytorchjob(self, job: dict[str, Any]) -> None:
        self._run_training(job)

    def _run_tfjob(self, job: dict[str, Any]) -> None:
        self._run_training(job)

    def _run_training(self, job: dict[str, Any]) -> None:
        kind = job["kind"]
        key, operator = TRAINING[kind]
        meta = job["metadata"]
        ns, name = meta["namespace"], meta["name"]
        folder = self._folder(job)
        local_obj = _strip(job)
        base = folder
        for rep in local_obj["spec"][key].values():
            base = self._prepare(ns, rep["template"]["spec"], folder)
        api = KINDS[kind]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.put_status(api, kind, ns, name, {"conditions": [{
            "type": "Created", "status": "True", "reason": f"{kind}Created",
            "message": f"{kind} {name} is created.", "lastUpdateTime": stamp,
            "lastTransitionTime": stamp}], "replicaStatuses": {}, "startTime": stamp})
        pods = []
        # common/pod.go createNewPod: GenLabels (operator-name, job-name), replica-type
        # (lower case), replica-index, and job-role=master for the master role (PyTorchJob:
        # Master; TFJob IsMasterRole: Chief or Master when there is one, else Worker 0);
        # the pod's name is GenGeneralName: <job>-<type>-<index>.
        specs = job["spec"][key]
        chief = any(r in specs for r in ("Chief", "Master"))
        for rtype, rep in specs.items():
            for i in range(int(rep.get("replicas", 1))):
                pod = f"{name}-{rtype.lower()}-{i}"
                labels = {"training.kubeflow.org/job-name": name,
                          "training.kubeflow.org/replica-type": rtype.lower(),
                          "training.kubeflow.org/replica-index": str(i),
                          "training.kubeflow.org/operator-name": operator}
                master = (rtype == "Master" if kind == "PyTorchJob" else
                          rtype in ("Chief", "Master") if chief else
                          (rtype == "Worker" and i == 0))
                if master:
                    labels["training.kubeflow.org/job-role"] = "master"
                self._pod(ns, pod, labels, rep["template"]["spec"], job)
                self._pod_phase(ns, pod, "Running")
                replica = f"{rtype.lower()}-{i}"
                self._register_logs(ns, pod, rep["template"]["spec"],
                                    lambda r=replica: list(self.local().logs(
                                        kind, name, ns, r)))
                pods.append(pod)
        proc = self._run_local(local_obj, base, folder)
        while proc.poll() is None:
            self._mirror(api, kind, ns, name)
            time.sleep(0.5)
        final = self._mirror(api, kind, ns, name)
        done = "Succeeded" if any(c.get("type") == "Succeeded" and c.get("status") == "True"
                                  for c in (final or {}).get("conditions") or []) else "Failed"
        for pod in pods:
            self._pod_phase(ns, pod, done)

    # --- Kubeflow Trainer (TrainJob -> JobSet -> Job -> pods) -------------------------------

    def _run_trainjob(self, job: dict[str, Any]) -> None:
        """What Trainer v2.1 and JobSet v0.10.1 make of a torch-distributed TrainJob: one pod
        per node (`<job>-node-0-<i>-<5 random>`, labelled as JobSet and the Indexed Job label
        them), the
        node container from spec.trainer with the podTemplateOverrides merged in (trainer
        pkg/runtime/framework/plugins/jobset/builder.go Trainer, PodTemplateOverrides), and
        the TrainJob status the controller copies from the JobSet (jobset.go Status):
        written by the local engine, whose rules follow that code (lab/backends/local/
        training/trainjob.py), mirrored here through the status subresource."""
        meta = job["metadata"]
        ns, name = meta["namespace"], meta["name"]
        folder = self._folder(job)
        trainer = job["spec"].get("trainer") or {}
        pod_spec: dict[str, Any] = {"containers": [{
            "name": "node", "image": trainer.get("image", "pytorch/pytorch"),
            "command": list(trainer.get("command") or []),
            "env": list(trainer.get("env") or [])}], "volumes": []}
        for override in job["spec"].get("podTemplateOverrides") or []:
            if "node" not in [t.get("name") for t in override.get("targetJobs") or []]:
                continue
            ospec = override.get("spec") or {}
            pod_spec["volumes"] += ospec.get("volumes") or []
            for c in ospec.get("containers") or []:
                if c.get("name") == "node":
                    pod_spec["containers"][0].setdefault("volumeMounts", []).extend(
                        c.get("volumeMounts") or [])
        pod_template = copy.deepcopy(pod_spec)
        base = self._prepare(ns, pod_spec, folder)
        local_obj = _strip(job)
        local_obj["spec"].pop("podTemplateOverrides", None)
        local_obj["spec"]["trainer"]["command"] = pod_spec["containers"][0]["command"]
        api = KINDS["TrainJob"]
        nodes = int(trainer.get("numNodes") or 1)
        pods = []
        job_name = f"{name}-node-0"  # jobset v0.10.1 pkg/util/placement/placement.go:14-15
        for i in range(nodes):
            # an Indexed Job's pod: generateName "<job>-<index>-" (kubernetes v1.34
            # pkg/controller/job/indexed_job_utils.go podGenerateNameWithIndex), then the API
            # server's 5 random characters (apiserver pkg/storage/names/generate.go)
            pod = f"{job_name}-{i}-{_random_suffix()}"
            labels = {"jobset.sigs.k8s.io/jobset-name": name,
                      "jobset.sigs.k8s.io/replicatedjob-name": "node",
                      "batch.kubernetes.io/job-name": job_name, "job-name": job_name,
                      "batch.kubernetes.io/job-completion-index": str(i)}
            self._pod(ns, pod, labels, pod_template, job)
            self._pod_phase(ns, pod, "Running")
            self._register_logs(ns, pod, pod_template,
                                lambda r=f"node-{i}": list(self.local().logs(
                                    "TrainJob", name, ns, r)))
            pods.append(pod)
        proc = self._run_local(local_obj, base, folder)
        while proc.poll() is None:
            self._mirror(api, "TrainJob", ns, name)
            time.sleep(0.5)
        final = self._mirror(api, "TrainJob", ns, name)
        done = "Succeeded" if any(c.get("type") == "Complete" and c.get("status") == "True"
                                  for c in (final or {}).get("conditions") or []) else "Failed"
        for pod in pods:
            self._pod_phase(ns, pod, done)

    def _mirror(self, api: str, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        obj = self.local().get(kind, name, ns)
        status = (obj or {}).get("status")
        if status:
            self.put_status(api, kind, ns, name, status)
        return status

    # --- Katib ------------------------------------------------------------------------------

    def _run_experiment(self, exp: dict[str, Any]) -> None:
        meta = exp["metadata"]
        ns, name = meta["namespace"], meta["name"]
        folder = self._folder(exp)
        local_obj = _strip(exp)
        trial_spec = local_obj["spec"]["trialTemplate"].get("trialSpec") or {}
        pod_spec = (trial_spec.get("spec") or {}).get("template", {}).get("spec")
        base = self._prepare(ns, pod_spec, folder) if pod_spec else folder
        if pod_spec:
            self._katib_webhook(local_obj["spec"], pod_spec)
        proc = self._run_local(local_obj, base, folder)
        made: set[str] = set()
        while True:
            running = proc.poll() is None
            self._mirror_trials(exp, made)
            self._mirror("kubeflow.org/v1beta1", "Experiment", ns, name)
            if not running:
                break
            time.sleep(0.5)
        self._mirror_trials(exp, made)
        self._mirror("kubeflow.org/v1beta1", "Experiment", ns, name)

    @staticmethod
    def _katib_webhook(exp_spec: dict[str, Any], pod_spec: dict[str, Any]) -> None:
        """Katib's pod webhook on the trial's primary container (katib_webhook.py: the
        join, exactly as upstream), then what this machine needs to run the result: the
        metrics volume (/var/log/katib, an emptyDir upstream) becomes a fresh folder per
        trial, and the StdOut collector's sidecar, which prints that file, becomes a `cat`
        after the trial (the local engine reads metrics from the process's output).
        Only the StdOut collector (the default) is played; File and TfEvent trials run
        unwrapped here."""
        from tests.standins.katib_webhook import (
            DEFAULT_METRICS_FILE,
            kubelet_expand,
            wrap_worker_container,
        )

        kind = ((exp_spec.get("metricsCollectorSpec") or {}).get("collector") or {}).get(
            "kind", "StdOut")
        primary = exp_spec["trialTemplate"].get("primaryContainerName")
        if kind != "StdOut":
            return
        for c in pod_spec.get("containers") or []:
            if c.get("name") != primary:
                continue
            wrap_worker_container(c, collector=kind, metrics_file=DEFAULT_METRICS_FILE,
                                  early_stopping=bool(exp_spec.get("earlyStopping")))
            line = kubelet_expand(c["args"][0]).replace(
                posixpath.dirname(DEFAULT_METRICS_FILE), '"$KATIB_DIR"')
            c["command"] = [c["command"][0], "-c",
                            'KATIB_DIR=$(mktemp -d) && export KATIB_DIR && sh -c "$1"; rc=$?; '
                            'cat "$KATIB_DIR/metrics.log" 2>/dev/null; rm -rf "$KATIB_DIR"; '
                            'exit $rc', "sh", line]
            c.pop("args", None)

    def _mirror_trials(self, exp: dict[str, Any], made: set[str]) -> None:
        from lab.kube.objects import apply

        meta = exp["metadata"]
        ns, exp_name = meta["namespace"], meta["name"]
        server_pod = ((exp["spec"]["trialTemplate"].get("trialSpec") or {}).get("spec") or {}) \
            .get("template", {}).get("spec")
        for trial in self.local().list("Trial", ns):
            labels = trial["metadata"].get("labels") or {}
            if labels.get("katib.kubeflow.org/experiment") != exp_name:
                continue
            tname = trial["metadata"]["name"]
            if tname not in made:
                body = _strip(trial)
                body["metadata"]["ownerReferences"] = [{
                    "apiVersion": exp["apiVersion"], "kind": "Experiment", "name": exp_name,
                    "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]
                apply(self.kube, body, manager=MANAGER, force=True)
                if server_pod:
                    pod = f"{tname}-standin"
                    self._pod(ns, pod, {"katib.kubeflow.org/trial": tname,
                                        "katib.kubeflow.org/experiment": exp_name,
                                        "job-name": tname}, server_pod, body | {
                        "apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
                        "metadata": {**body["metadata"], "uid": meta["uid"]}})
                    self._register_logs(ns, pod, server_pod, lambda t=tname: list(
                        self.local().logs("Trial", t, ns)))
                made.add(tname)
            if trial.get("status"):
                self.put_status("kubeflow.org/v1beta1", "Trial", ns, tname, trial["status"])
                conds = {c["type"]: c["status"] for c in trial["status"].get("conditions") or []}
                phase = ("Succeeded" if conds.get("Succeeded") == "True" else
                         "Failed" if conds.get("Failed") == "True" else "Running")
                if server_pod:
                    self._pod_phase(ns, f"{tname}-standin", phase)

    # --- Notebook controller ---------------------------------------------------------------

    def _run_notebook(self, nb: dict[str, Any]) -> None:
        """A JupyterLab server from the local engine (serving the files mounted into the
        notebook container), behind the StatefulSet pod NAME-0 and the Service NAME:80 that
        the controller makes; the status mirrored as the controller mirrors the pod's."""
        from lab.backends.local.notebooks.handler import server_info
        from lab.kube.objects import apply

        meta = nb["metadata"]
        ns, name = meta["namespace"], meta["name"]
        folder = self._folder(nb)
        local_obj = _strip(nb)
        pod_spec = local_obj["spec"]["template"]["spec"]
        volumes = self._volumes(ns, pod_spec, folder)
        base = volumes.get("kflab-lab-files", folder)
        pod_spec.pop("volumes", None)
        for c in pod_spec.get("containers") or []:
            c.pop("volumeMounts", None)
        self._run_local(local_obj, base, folder).wait()
        local = self.local().get("Notebook", name, ns) or {}
        status = local.get("status") or {}
        apply(self.kube, {"apiVersion": "v1", "kind": "Service",
                          "metadata": {"name": name, "namespace": ns},
                          "spec": {"selector": {"statefulset": name},
                                   "ports": [{"name": f"http-{name}", "port": 80,
                                              "targetPort": 8888, "protocol": "TCP"}]}},
              manager=MANAGER, force=True)
        pod = f"{name}-0"
        spec = copy.deepcopy(nb["spec"]["template"]["spec"])
        self._pod(ns, pod, {"statefulset": name, "notebook-name": name}, spec, nb)
        self._register_logs(ns, pod, spec, lambda: list(self.local().logs("Notebook", name,
                                                                            ns)))
        if status.get("readyReplicas") == 1:
            self.kubelet.ports[(ns, pod, 8888)] = int(server_info(self.local(), name,
                                                                  ns)["port"])
        self._pod_phase(ns, pod, "Running" if status.get("readyReplicas") == 1 else "Failed")
        if status:
            self.put_status(KINDS["Notebook"], "Notebook", ns, name, status)

    # --- KServe -----------------------------------------------------------------------------

    def _predictor_deployment(self, isvc: dict[str, Any], svc: str, app: str) -> dict[str, Any]:
        """KServe's raw Deployment `<name>-predictor` (deployment_reconciler.go
        createRawDefaultDeployment): the component's labels and annotations on the Deployment
        and on its pod template -- spec.predictor.annotations among them (components/
        predictor.go buildObjectMeta) -- and the pod template's `app` label. Applied like the
        reconciler's update, so the API server moves its generation when the template
        changes."""
        from lab.kube.objects import apply

        meta = isvc["metadata"]
        predictor = isvc["spec"]["predictor"]
        labels = {"serving.kserve.io/inferenceservice": meta["name"], "component": "predictor",
                  "app": app}
        annotations = {k: str(v) for k, v in (predictor.get("annotations") or {}).items()}
        tmeta: dict[str, Any] = {"labels": labels}
        if annotations:
            tmeta["annotations"] = annotations
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": svc, "namespace": meta["namespace"], "labels": labels,
                             "ownerReferences": [{"apiVersion": isvc["apiVersion"],
                                                  "kind": "InferenceService",
                                                  "name": meta["name"], "uid": meta["uid"],
                                                  "controller": True}]},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": app}},
                         "template": {"metadata": tmeta,
                                      "spec": {"containers": [{
                                          "name": "kserve-container",
                                          "image": "kserve-model-server:standin",
                                          "ports": [{"containerPort": 8080, "name": "http1",
                                                     "protocol": "TCP"}]}]}}}}
        return apply(self.kube, body, manager=MANAGER, force=True)

    def _deployment_status(self, dep: dict[str, Any], *, old_available: bool,
                           new_available: bool | None, failure: str | None = None
                           ) -> dict[str, Any]:
        """What the deployment controller writes (k8s pkg/controller/deployment sync.go
        syncRolloutStatus, util/deployment_util.go conditions): observedGeneration, replica
        counts, Available (MinimumReplicasAvailable / MinimumReplicasUnavailable) and
        Progressing (ReplicaSetUpdated while rolling, NewReplicaSetAvailable when done).
        new_available None: the new pod is still starting. `failure` (a test playing a
        stuck rollout): "deadline" for progressDeadlineSeconds passed (Progressing False,
        ProgressDeadlineExceeded), "replicas" for pods the ReplicaSet cannot create
        (ReplicaFailure True, FailedCreate: a quota, an admission webhook)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        done = bool(new_available)
        available = done or old_available
        status = {
            "observedGeneration": dep["metadata"]["generation"],
            "replicas": 1 if done or not old_available else 2,
            "updatedReplicas": 1,
            "readyReplicas": 1 if available else 0,
            "availableReplicas": 1 if available else 0,
            "conditions": deployment_conditions(replica_set_name(dep), available, done,
                                                failure, stamp)}
        if not available:
            status["unavailableReplicas"] = 1
        self.put_status("apps/v1", "Deployment", dep["metadata"]["namespace"],
                        dep["metadata"]["name"], status)
        return status

    @staticmethod
    def _component_ready(dep_status: dict[str, Any]) -> dict[str, Any]:
        """KServe v0.16.0 inference_service_status.go:341-432 PropagateRawStatus, in its
        order: Ready False with no reason; True with Available's when Available is True
        (:360-368); Progressing False with a message makes it False with Progressing's
        reason and message, often ProgressDeadlineExceeded (:370-381); Progressing True is
        True for NewReplicaSetAvailable, else Unknown (:382-402); Available False wins over
        those (:406-414); a ReplicaFailure True wins over all (:416-424). A missing
        condition is an empty one (getDeploymentCondition :434-481)."""
        conds = {c["type"]: c for c in dep_status.get("conditions") or []}
        avail = conds.get("Available", {})
        prog = conds.get("Progressing", {})
        failure = conds.get("ReplicaFailure", {})

        def of(c: dict[str, Any], status: str) -> dict[str, Any]:
            return {"status": status, "reason": c.get("reason", ""),
                    "message": c.get("message", "")}

        out = {"status": "False", "reason": "", "message": ""}
        if avail.get("status") == "True":
            out = of(avail, "True")
        if prog.get("status") == "False":
            if prog.get("message"):
                out = of(prog, "False")
        elif prog.get("status") == "True":
            out = of(prog, "True" if prog.get("reason") == "NewReplicaSetAvailable"
                     else "Unknown")
        if avail.get("status") == "False":
            out = of(avail, "False")
        if failure.get("status") == "True":
            out = of(failure, "False")
        return out

    def _isvc_status(self, isvc: dict[str, Any], dep_status: dict[str, Any],
                     model: dict[str, Any]) -> None:
        """The InferenceService reconciler's write at v0.16.0 (controller.go Reconcile):
        - PredictorReady from PropagateRawStatus, and observedGeneration = the Deployment's
          observedGeneration; components.predictor is always there, its url only when ready;
        - the raw ingress reconciler (kube_ingress_reconciler.go Reconcile; our overlay sets
          disableIngressCreation) writes url, address.url and IngressReady True on every
          reconcile, ready or not;
        - Ready: knative's living condition set over PredictorReady and IngressReady
          (False/Unknown with the failing dependent's reason and message);
        - deploymentMode (controller.go: the resolved mode, "Standard" from our
          inferenceservice-config) and clusterServingRuntimeName (components/predictor.go:
          the runtime KServe chose);
        - modelStatus from PropagateModelStatus / UpdateModelRevisionStates (activeModelState
          has no omitempty, so "" is written; copies.failedCopies likewise 0; totalCopies
          omitted when 0)."""
        from lab.backends.local.serving import runtimes

        meta = isvc["metadata"]
        ns, name = meta["namespace"], meta["name"]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pred = self._component_ready(dep_status)

        def cond(ctype: str, c: dict[str, Any]) -> dict[str, Any]:
            """knative's apis.Condition: reason and message omitempty, and none on True
            (condition_set.go MarkTrue sets neither); severity Info outside the living set
            (PredictorReady, IngressReady, Ready)."""
            out = {"type": ctype, "status": c["status"], "lastTransitionTime": stamp}
            if ctype == "Stopped":
                out["severity"] = "Info"
            if c["status"] == "True":
                return out
            return out | {k: c[k] for k in ("reason", "message") if c.get(k)}

        ok = pred["status"] == "True"
        svc = f"{name}-predictor"
        component: dict[str, Any] = {}
        if ok:
            component["url"] = f"http://{svc}-{ns}.example.com"
        model_spec = (isvc["spec"]["predictor"].get("model") or {})
        fmt = (model_spec.get("modelFormat") or {})
        status: dict[str, Any] = {
            "observedGeneration": dep_status["observedGeneration"],
            "conditions": [cond("IngressReady", {"status": "True"}),
                           cond("PredictorReady", pred),
                           cond("Ready", {"status": "True"} if ok else pred),
                           # controller.go Reconcile: Stopped False (no force-stop annotation)
                           cond("Stopped", {"status": "False"})],
            "url": f"http://{name}-{ns}.example.com",
            "address": {"url": f"http://{svc}.{ns}.svc.cluster.local"},
            "components": {"predictor": component},
            "deploymentMode": "Standard",
            "modelStatus": model}
        with contextlib.suppress(Exception):  # a format no runtime serves: KServe names none
            status["clusterServingRuntimeName"] = model_spec.get("runtime") or runtimes.choose(
                fmt.get("name"), fmt.get("version"), model_spec.get("protocolVersion"), None)
        self.put_status(KINDS["InferenceService"], "InferenceService", ns, name, status)

    def _run_inferenceservice(self, isvc: dict[str, Any]) -> None:
        from lab.kube.objects import apply

        meta = isvc["metadata"]
        ns, name, gen = meta["namespace"], meta["name"], meta.get("generation")
        svc = f"{name}-predictor"
        app = f"isvc.{svc}"
        live = self.kube.dynamic.get(self.kube.resource(KINDS["InferenceService"],
                                                        "InferenceService"),
                                     name=name, namespace=ns).to_dict()
        was_serving = any(c.get("type") == "PredictorReady" and c.get("status") == "True"
                          for c in (live.get("status") or {}).get("conditions") or [])
        apply(self.kube, {"apiVersion": "v1", "kind": "Service",
                          "metadata": {"name": svc, "namespace": ns,
                                       "labels": {"serving.kserve.io/inferenceservice": name}},
                          "spec": {"selector": {"app": app},
                                   "ports": [{"name": "http", "port": 80,
                                              "targetPort": 8080, "protocol": "TCP"}]}},
              manager=MANAGER, force=True)
        dep = self._predictor_deployment(isvc, svc, app)
        starting = self._deployment_status(dep, old_available=was_serving, new_available=None)
        pending = {"transitionStatus": "InProgress",
                   "states": {"activeModelState": "Loaded" if was_serving else "",
                              "targetModelState": "Pending"},
                   "copies": {"failedCopies": 0, **({"totalCopies": 1} if was_serving else {})}}
        self._isvc_status(isvc, starting, pending)
        pod = f"{svc}-{gen}-standin"
        pod_spec = dep["spec"]["template"]["spec"]
        self._pod(ns, pod, {"app": app, "component": "predictor",
                            "serving.kserve.io/inferenceservice": name}, pod_spec, isvc)
        self._pod_phase(ns, pod, "Pending")
        folder = self._folder(isvc)
        local_obj = _strip(isvc)
        predictor = local_obj["spec"]["predictor"]
        model = predictor.get("model") or {}
        volumes = self._volumes(ns, predictor, folder)
        for m in model.pop("volumeMounts", []) or []:
            if m["mountPath"] == "/mnt/models" and m["name"] in volumes:
                model["storageUri"] = f"file://{volumes[m['name']]}"
        predictor.pop("volumes", None)
        proc = self._run_local(local_obj, folder, folder)
        proc.wait()
        local = self.local().get("InferenceService", name, ns) or {}
        lstatus = local.get("status") or {}
        url = str(lstatus.get("url") or "")
        port = int(url.rsplit(":", 1)[1]) if url.count(":") == 2 else None
        self._register_logs(ns, pod, pod_spec, lambda: list(
            self.local().logs("InferenceService", name, ns)))
        lmodel = lstatus.get("modelStatus") or {}
        ok = port is not None and any(c.get("type") == "Ready" and c.get("status") == "True"
                                      for c in lstatus.get("conditions") or []) \
            and lmodel.get("transitionStatus") != "BlockedByFailedLoad"
        if port is not None:
            self.kubelet.ports[(ns, pod, 8080)] = port
        self._pod_phase(ns, pod, "Running" if ok else "Failed")
        if ok:  # the new pod is Ready: the old replica set scales down (old pods go)
            from lab.kube.logs import pods

            res = self.kube.resource("v1", "Pod")
            for old in pods(self.kube, ns, f"serving.kserve.io/inferenceservice={name}"):
                if old["metadata"]["name"] != pod:
                    with contextlib.suppress(Exception):
                        self.kube.dynamic.delete(res, name=old["metadata"]["name"],
                                                 namespace=ns, body={
                                                     "apiVersion": "v1", "kind": "DeleteOptions",
                                                     "gracePeriodSeconds": 0})
        final = self._deployment_status(dep, old_available=was_serving,
                                        new_available=ok)
        if ok:
            mstatus = {"transitionStatus": "UpToDate",
                       "states": {"activeModelState": "Loaded", "targetModelState": "Loaded"},
                       "copies": {"failedCopies": 0, "totalCopies": 1}}
        else:  # the container exited with an error: UpdateModelRevisionStates(FailedToLoad)
            ready = next((c for c in lstatus.get("conditions") or []
                          if c.get("type") == "Ready"), {})
            mstatus = {"transitionStatus": "BlockedByFailedLoad",
                       "states": {"activeModelState": "Loaded" if was_serving else "",
                                  "targetModelState": "FailedToLoad"},
                       "copies": {"failedCopies": 0, **({"totalCopies": 1} if was_serving else {})},
                       "lastFailureInfo": {"reason": "ModelLoadFailed",
                                           "message": ready.get("message")
                                           or "the model server did not start",
                                           "exitCode": 1}}
        self._isvc_status(isvc, final, mstatus)
