#!/usr/bin/env python3
"""Check a kflab lab by RUNNING one small workload per component; write one row per check.

The verify role copies this file to the node (for an existing cluster: the lab's folder on the
controller) and runs it with the node's python3 and kubectl: standard library only, every
kubectl call an argv list (no shell). Usage: kflab_verify.py CONFIG.json

Rows, in order: node, controllers, then one per selected component (cert-manager, pipelines,
katib, training-operator, kserve, notebooks, trainer) and gpu when enabled. The workloads
start together and are then polled, each against its own timeout. A row is {name, ok,
seconds, message, hint}; the contract is written down in playbooks/roles/verify/README.md. A
workload that passed is deleted; one that failed is LEFT IN PLACE so the hint's `kubectl
describe` finds it (the next run deletes it first). The exit code is 0 whenever the results
file was written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

SCHEMA = 1
FIELD_MANAGER = "kflab-verify"
LABELS = {"app.kubernetes.io/managed-by": "kflab", "app.kubernetes.io/part-of": "kflab-verify"}
IMAGE_PLACEHOLDER = "KFLAB_VERIFY_IMAGE"
POLL_S = 5.0

# -- the workloads' programs (run inside the pinned images) --------------------------------
TRIAL = ("python3 -c 'import sys; x = float(sys.argv[1]); "
         "print(\"score=%.6f\" % (1 - (x - 0.5) ** 2))' ${trialParameters.x}")

RENDEZVOUS = """\
import os, socket, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.create_server(("", port))
    server.settimeout(300)
    seen = {0}
    while len(seen) < world:
        conn, _ = server.accept()
        with conn:
            seen.add(int(conn.recv(16).decode()))
            conn.sendall(b"ok")
    print("master: all %d ranks met: %s" % (world, sorted(seen)))
else:
    deadline = time.time() + 300
    while True:
        try:
            with socket.create_connection((addr, port), timeout=10) as conn:
                conn.sendall(str(rank).encode())
                assert conn.recv(2) == b"ok"
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(2)
    print("worker %d: met the master at %s:%d" % (rank, addr, port))
"""

# A TrainJob node has the variables torchrun reads (PET_*), not RANK and friends: the same
# meeting, with the Trainer's names mapped onto the ones above.
PET_RENDEZVOUS = ("import os; e = os.environ; e.update(RANK=e['PET_NODE_RANK'], "
                  "WORLD_SIZE=e['PET_NNODES'], MASTER_ADDR=e['PET_MASTER_ADDR'], "
                  "MASTER_PORT=e['PET_MASTER_PORT'])\n" + RENDEZVOUS)

TRAIN_MODEL = (
    "import os, joblib; from sklearn.datasets import load_iris; "
    "from sklearn.linear_model import LogisticRegression; "
    "X, y = load_iris(return_X_y=True); os.makedirs('/mnt/model/model', exist_ok=True); "
    "joblib.dump(LogisticRegression(max_iter=500).fit(X, y), '/mnt/model/model/model.joblib'); "
    "print('model written')")
PREDICT_BODY = {"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}

MATMUL = ("import torch; a = torch.randn(2048, 2048, device='cuda'); s = (a @ a).sum().item(); "
          "torch.cuda.synchronize(); print('CUDA matmul ok on %s (torch %s, CUDA %s)' % "
          "(torch.cuda.get_device_name(0), torch.__version__, torch.version.cuda))")
GPU_SCRIPT = ('nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader '
              '&& exec python -c "$1"')


def meta(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(LABELS), **extra}


def small(cpu: str = "50m", memory: str = "64Mi", cpu_max: str = "1",
          memory_max: str = "512Mi") -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu_max, "memory": memory_max}}


# -- kubectl ------------------------------------------------------------------------------
class Kubectl:
    """kubectl as an argv prefix (`k3s kubectl`, or `kubectl --kubeconfig X`)."""

    def __init__(self, prefix: list[str]) -> None:
        self.prefix = list(prefix)

    def run(self, *args: str, stdin: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([*self.prefix, *args], input=stdin, capture_output=True,
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, 124, "", f"kubectl timed out after "
                                               f"{timeout:.0f}s: {' '.join(args[:4])}")
        except OSError as exc:
            return subprocess.CompletedProcess(args, 127, "", f"cannot run kubectl: {exc}")

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist (other errors raise)."""
        ns = ["-n", namespace] if namespace else []
        proc = self.run("get", kind, name, *ns, "-o", "json")
        if proc.returncode != 0:
            if "NotFound" in proc.stderr or "not found" in proc.stderr:
                return None
            raise KubectlError(proc.stderr.strip())
        return json.loads(proc.stdout)

    def items(self, kind: str, namespace: str | None = None,
              selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", kind, "-o", "json"]
        args += ["-n", namespace] if namespace else []
        args += ["-l", selector] if selector else []
        proc = self.run(*args)
        if proc.returncode != 0:
            raise KubectlError(proc.stderr.strip())
        return json.loads(proc.stdout).get("items", [])

    def apply(self, objects: list[dict[str, Any]]) -> None:
        doc = {"apiVersion": "v1", "kind": "List", "items": objects}
        proc = self.run("apply", "--server-side", "--force-conflicts",
                        f"--field-manager={FIELD_MANAGER}", "-f", "-", stdin=json.dumps(doc))
        if proc.returncode != 0:
            raise KubectlError(proc.stderr.strip())

    def delete(self, obj: dict[str, Any], wait: bool = False) -> None:
        args = ["delete", obj["kind"], obj["metadata"]["name"], "--ignore-not-found",
                f"--wait={'true' if wait else 'false'}"]
        if obj["metadata"].get("namespace"):
            args += ["-n", obj["metadata"]["namespace"]]
        self.run(*args, "--timeout=120s" if wait else "--timeout=30s", timeout=150)

    def raw(self, verb: str, path: str, body: Any = None) -> tuple[bool, str]:
        """`kubectl get|create|delete --raw PATH`: the API server's own proxy to a Service."""
        if body is None:
            proc = self.run(verb, "--raw", path)
        else:
            proc = self.run(verb, "--raw", path, "-f", "-", stdin=json.dumps(body))
        return proc.returncode == 0, (proc.stdout if proc.returncode == 0 else proc.stderr)

    def logs(self, pod: str, namespace: str, container: str | None = None) -> str:
        args = ["logs", pod, "-n", namespace, "--tail=20"]
        if container:
            args += ["-c", container]
        proc = self.run(*args)
        return proc.stdout if proc.returncode == 0 else ""


class KubectlError(Exception):
    pass


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None


def is_true(obj: dict[str, Any] | None, kind: str) -> bool:
    c = condition(obj, kind)
    return bool(c) and c.get("status") == "True"


def pod_problems(k: Kubectl, namespace: str, *, prefix: str = "",
                 selector: str | None = None) -> str:
    """Why pods are not running, in a phrase each (image pulls, crashes, scheduling)."""
    try:
        pods = k.items("pods", namespace, selector)
    except KubectlError as exc:
        return f"cannot list pods: {exc}"
    found = []
    for pod in pods:
        name = pod["metadata"]["name"]
        if prefix and not name.startswith(prefix):
            continue
        status = pod.get("status") or {}
        sched = next((c for c in status.get("conditions") or []
                      if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
        if sched:
            found.append(f"pod {name} not scheduled: {sched.get('message', sched.get('reason'))}")
            continue
        for cs in (status.get("initContainerStatuses") or []) + \
                (status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if "waiting" in state and state["waiting"].get("reason") not in (None,
                                                                             "PodInitializing",
                                                                             "ContainerCreating"):
                w = state["waiting"]
                found.append(f"pod {name} container {cs['name']}: {w.get('reason')}: "
                             f"{(w.get('message') or '')[:200]}")
            elif "terminated" in state and state["terminated"].get("exitCode", 0) != 0:
                t = state["terminated"]
                found.append(f"pod {name} container {cs['name']} exited "
                             f"{t.get('exitCode')} ({t.get('reason')})")
        if status.get("phase") == "Pending" and not found:
            found.append(f"pod {name} is Pending")
    return "; ".join(found[:3])


# -- checks -------------------------------------------------------------------------------
class Check:
    """One row: start() applies, poll() returns None while waiting or (ok, message)."""

    name = ""
    kind = ""
    resource = ""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.ns: str = cfg["namespace"]
        self.timeout = float(cfg.get("timeouts", {}).get(self.name, 600))
        self.t0 = 0.0
        self.last_error = ""  # the latest kubectl error while polling (said on timeout)

    def objects(self) -> list[dict[str, Any]]:
        return []

    def start(self, k: Kubectl) -> None:
        k.apply(self.objects())

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        raise NotImplementedError

    def waiting(self, k: Kubectl) -> str:
        """What the workload is still waiting for (for the timeout message)."""
        return pod_problems(k, self.ns, prefix=self.resource) or "no pod problem reported"

    def clean(self, k: Kubectl, wait: bool = False) -> None:
        for obj in reversed(self.objects()):
            k.delete(obj, wait=wait)

    def hint(self) -> str:
        return (f"kflab logs {self.kind.lower()} {self.resource} -n {self.ns}; "
                f"kubectl -n {self.ns} describe {self.kind.lower()} {self.resource}")


class CertManager(Check):
    name = "cert-manager"
    kind = "Certificate"
    resource = "kflab-verify-cert"

    def objects(self) -> list[dict[str, Any]]:
        return [
            {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
             "metadata": meta("kflab-verify-selfsigned", self.ns), "spec": {"selfSigned": {}}},
            {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
             "metadata": meta(self.resource, self.ns),
             "spec": {"secretName": "kflab-verify-cert-tls", "duration": "1h",
                      "dnsNames": [f"kflab-verify.{self.ns}.svc"],
                      "issuerRef": {"name": "kflab-verify-selfsigned", "kind": "Issuer"}}},
        ]

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        cert = k.get("certificate", self.resource, self.ns)
        if is_true(cert, "Ready"):
            return True, "a self-signed Certificate was issued (Ready)"
        return None

    def waiting(self, k: Kubectl) -> str:
        c = condition(k.get("certificate", self.resource, self.ns), "Ready")
        return f"Certificate Ready={c.get('status')}: {c.get('message')}" if c else \
            "the Certificate has no Ready condition (is cert-manager's controller running?)"

    def clean(self, k: Kubectl, wait: bool = False) -> None:
        super().clean(k, wait)
        k.delete({"kind": "Secret", "metadata": {"name": "kflab-verify-cert-tls",
                                                 "namespace": self.ns}}, wait=wait)

    def hint(self) -> str:
        return (f"kubectl -n {self.ns} describe certificate {self.resource}; "
                "kubectl -n cert-manager logs deploy/cert-manager")


class Pipelines(Check):
    """A real KFP run of a two-task pipeline, submitted to the KFP API through the API
    server's service proxy (no port-forward, no credentials beyond the kubeconfig)."""

    name = "pipelines"
    kind = "run"
    resource = "kflab-verify"

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self.kfp_ns = cfg.get("kfp_namespace", "kubeflow")
        self.api = f"/api/v1/namespaces/{self.kfp_ns}/services/ml-pipeline:8888/proxy/apis/v2beta1"
        self.run_id = ""
        self.submit_error = ""

    def spec(self) -> dict[str, Any]:
        with open(self.cfg["pipeline_spec"]) as fh:
            text = fh.read()
        return json.loads(text.replace(IMAGE_PLACEHOLDER, self.cfg["images"]["python"]))

    def body(self) -> dict[str, Any]:
        return {"display_name": self.resource, "description": "kflab verify (deleted after)",
                "pipeline_spec": self.spec()}

    def start(self, k: Kubectl) -> None:
        self.submit(k)

    def submit(self, k: Kubectl) -> None:
        ok, out = k.raw("create", f"{self.api}/runs", self.body())
        if not ok:  # the API server may still be starting: poll() retries
            self.submit_error = out.strip()[-300:]
            return
        self.run_id = json.loads(out).get("run_id", "")

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        if not self.run_id:
            self.submit(k)
            return None
        ok, out = k.raw("get", f"{self.api}/runs/{self.run_id}")
        if not ok:
            return None
        run = json.loads(out)
        state = run.get("state")
        if state in ("FAILED", "CANCELED", "SKIPPED"):
            err = (run.get("error") or {}).get("message") or "no error message"
            return False, f"run {self.run_id} ended {state}: {err[:300]}"
        if state != "SUCCEEDED":
            return None
        tasks = {t.get("display_name"): t.get("state")
                 for t in (run.get("run_details") or {}).get("task_details") or []}
        if tasks.get("produce") == tasks.get("consume") == "SUCCEEDED":
            return True, (f"run {self.run_id} SUCCEEDED: produce passed a parameter to "
                          "consume")
        return False, f"run {self.run_id} SUCCEEDED but its tasks are {tasks}"

    def waiting(self, k: Kubectl) -> str:
        if not self.run_id:
            return f"the KFP API did not accept the run: {self.submit_error or 'no answer'}"
        pods = pod_problems(k, self.kfp_ns, selector=f"pipeline/runid={self.run_id}")
        return f"run {self.run_id} not finished" + (f": {pods}" if pods else "")

    def clean(self, k: Kubectl, wait: bool = False) -> None:
        if self.run_id:
            k.raw("delete", f"{self.api}/runs/{self.run_id}")

    def hint(self) -> str:
        run = self.run_id or "RUN_ID"
        return (f"kflab logs run {run} -n {self.kfp_ns}; kubectl -n {self.kfp_ns} get pods "
                f"-l pipeline/runid={run}; kubectl -n {self.kfp_ns} logs deploy/ml-pipeline")


class Katib(Check):
    name = "katib"
    kind = "Experiment"
    resource = "kflab-verify-hpo"

    def objects(self) -> list[dict[str, Any]]:
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "spec": {"backoffLimit": 0, "template": {
                   "metadata": {"labels": dict(LABELS)},
                   "spec": {"restartPolicy": "Never", "containers": [{
                       "name": "trial", "image": self.cfg["images"]["python"],
                       "command": ["sh", "-c", TRIAL], "resources": small()}]}}}}
        return [{
            "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
            "metadata": meta(self.resource, self.ns),
            "spec": {
                "objective": {"type": "maximize", "objectiveMetricName": "score"},
                "algorithm": {"algorithmName": "random"},
                "maxTrialCount": 2, "parallelTrialCount": 2, "maxFailedTrialCount": 1,
                "parameters": [{"name": "x", "parameterType": "double",
                                "feasibleSpace": {"min": "0.1", "max": "0.9"}}],
                "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
                "trialTemplate": {"primaryContainerName": "trial",
                                  "trialParameters": [{"name": "x", "reference": "x"}],
                                  "trialSpec": job},
            }}]

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        exp = k.get("experiment", self.resource, self.ns)
        status = (exp or {}).get("status") or {}
        if is_true(exp, "Failed"):
            return False, f"Experiment Failed: {condition(exp, 'Failed').get('message')}"
        if not is_true(exp, "Succeeded"):
            return None
        done = int(status.get("trialsSucceeded") or 0)
        best = (status.get("currentOptimalTrial") or {}).get("observation") or {}
        metrics = {m.get("name"): m.get("latest") for m in best.get("metrics") or []}
        if done >= 2 and "score" in metrics:
            return True, f"2 trials Succeeded; best score {metrics['score']}"
        return False, (f"Experiment Succeeded with {done} trial(s) succeeded and best metrics "
                       f"{metrics or 'none'} (metrics collector not injected? the namespace "
                       f"needs katib.kubeflow.org/metrics-collector-injection=enabled)")

    def waiting(self, k: Kubectl) -> str:
        exp = k.get("experiment", self.resource, self.ns)
        status = (exp or {}).get("status") or {}
        counts = ", ".join(f"{key}={status[key]}" for key in
                           ("trials", "trialsRunning", "trialsSucceeded", "trialsFailed",
                            "trialsEarlyStopped") if key in status)
        pods = pod_problems(k, self.ns, prefix=self.resource)
        return "; ".join(x for x in (counts or "no trials yet", pods) if x)


class TrainingOperator(Check):
    name = "training-operator"
    kind = "PyTorchJob"
    resource = "kflab-verify-ddp"

    def objects(self) -> list[dict[str, Any]]:
        def replica() -> dict[str, Any]:
            return {"replicas": 1, "restartPolicy": "Never", "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {"containers": [{
                    "name": "pytorch", "image": self.cfg["images"]["python"],
                    "command": ["python3", "-c", RENDEZVOUS], "resources": small()}]}}}
        return [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                 "metadata": meta(self.resource, self.ns),
                 "spec": {"runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None"},
                          "pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}}}]

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        job = k.get("pytorchjob", self.resource, self.ns)
        if is_true(job, "Failed"):
            return False, f"PyTorchJob Failed: {condition(job, 'Failed').get('message')}"
        if is_true(job, "Succeeded"):
            replicas = ((job or {}).get("status") or {}).get("replicaStatuses") or {}
            line = k.logs(f"{self.resource}-master-0", self.ns).strip().splitlines()
            return True, ("PyTorchJob Succeeded (" + ", ".join(
                f"{r}: {s.get('succeeded', 0)} succeeded" for r, s in sorted(replicas.items()))
                + ")" + (f"; {line[-1]}" if line else ""))
        return None

    def hint(self) -> str:
        return (f"kflab logs pytorchjob {self.resource} -n {self.ns} --replica worker-0; "
                f"kubectl -n {self.ns} describe pytorchjob {self.resource}")


class Trainer(Check):
    """Kubeflow Trainer v2: a TrainJob of two nodes on the torch-distributed runtime."""

    name = "trainer"
    kind = "TrainJob"
    resource = "kflab-verify-trainjob"

    def objects(self) -> list[dict[str, Any]]:
        return [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                 "metadata": meta(self.resource, self.ns),
                 "spec": {"runtimeRef": {"name": "torch-distributed"},
                          "labels": dict(LABELS),
                          "trainer": {"numNodes": 2, "image": self.cfg["images"]["python"],
                                      "command": ["python3", "-c", PET_RENDEZVOUS],
                                      "resourcesPerNode": small()}}}]

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        job = k.get("trainjob", self.resource, self.ns)
        if is_true(job, "Failed"):
            return False, f"TrainJob Failed: {condition(job, 'Failed').get('message')}"
        if is_true(job, "Complete"):
            jobs = ((job or {}).get("status") or {}).get("jobsStatus") or []
            pods = k.items("pods", self.ns, f"jobset.sigs.k8s.io/jobset-name={self.resource},"
                                            "batch.kubernetes.io/job-completion-index=0")
            line = k.logs(pods[0]["metadata"]["name"], self.ns).strip().splitlines() \
                if pods else []
            return True, ("TrainJob Complete (" + ", ".join(
                f"{j.get('name')}: {j.get('succeeded', 0)} succeeded" for j in jobs) + ")"
                + (f"; {line[-1]}" if line else ""))
        return None

    def hint(self) -> str:
        return (f"kflab logs trainjob {self.resource} -n {self.ns} --replica node-1; "
                f"kubectl -n {self.ns} describe trainjob {self.resource}; kubectl -n kubeflow "
                "logs deploy/kubeflow-trainer-controller-manager")


class KServe(Check):
    """A model file made in the cluster (Job, sklearn image) on a PVC, then an
    InferenceService in Standard mode answering a V1 prediction."""

    name = "kserve"
    kind = "InferenceService"
    resource = "kflab-verify-sklearn"

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self.isvc_started = False
        self.last_answer = ""

    def storage(self) -> list[dict[str, Any]]:
        return [
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": meta("kflab-verify-model", self.ns),
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "64Mi"}}}},
            {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": meta("kflab-verify-model", self.ns),
             "spec": {"backoffLimit": 1, "template": {
                 "metadata": {"labels": dict(LABELS)},
                 "spec": {"restartPolicy": "Never", "containers": [{
                     "name": "train", "image": self.cfg["images"]["sklearn"],
                     "command": ["python", "-c", TRAIN_MODEL],
                     "resources": small(memory="128Mi"),
                     "volumeMounts": [{"name": "model", "mountPath": "/mnt/model"}]}],
                     "volumes": [{"name": "model", "persistentVolumeClaim": {
                         "claimName": "kflab-verify-model"}}]}}}},
        ]

    def isvc(self) -> dict[str, Any]:
        return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": meta(self.resource, self.ns, annotations={
                    "serving.kserve.io/deploymentMode": "Standard"}),
                "spec": {"predictor": {"model": {
                    "modelFormat": {"name": "sklearn"}, "protocolVersion": "v1",
                    "storageUri": "pvc://kflab-verify-model/model",
                    "resources": small(cpu="50m", memory="128Mi", memory_max="1Gi")}}}}

    def objects(self) -> list[dict[str, Any]]:
        return [*self.storage(), self.isvc()]

    def start(self, k: Kubectl) -> None:
        k.apply(self.storage())  # the InferenceService follows once the model file exists

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        if not self.isvc_started:
            job = k.get("job", "kflab-verify-model", self.ns)
            if is_true(job, "Failed"):
                return False, ("the Job writing the model file failed: "
                               f"{pod_problems(k, self.ns, prefix='kflab-verify-model')}")
            if not is_true(job, "Complete"):
                return None
            k.apply([self.isvc()])
            self.isvc_started = True
            return None
        isvc = k.get("inferenceservice", self.resource, self.ns)
        if not is_true(isvc, "Ready"):
            return None
        path = (f"/api/v1/namespaces/{self.ns}/services/{self.resource}-predictor:80/proxy"
                f"/v1/models/{self.resource}:predict")
        ok, out = k.raw("create", path, PREDICT_BODY)
        if not ok:
            self.last_answer = out.strip()[-200:]
            return None  # endpoints may lag the Ready condition: retry until the timeout
        try:
            predictions = json.loads(out)["predictions"]
        except (ValueError, KeyError, TypeError):
            return False, f"the V1 predict answer has no predictions: {out[:200]}"
        if len(predictions) == len(PREDICT_BODY["instances"]):
            return True, f"Ready; V1 predict answered {predictions}"
        return False, f"V1 predict answered {predictions} for 2 instances"

    def waiting(self, k: Kubectl) -> str:
        if not self.isvc_started:
            return ("the model-writing Job did not complete: "
                    + (pod_problems(k, self.ns, prefix="kflab-verify-model") or "no pod problem "
                       "reported (PVC unbound? kubectl get pvc)"))
        c = condition(k.get("inferenceservice", self.resource, self.ns), "Ready")
        parts = [f"InferenceService Ready={c.get('status')}: {c.get('reason')} "
                 f"{c.get('message') or ''}".strip() if c else "no Ready condition yet",
                 pod_problems(k, self.ns, prefix=f"{self.resource}-predictor"),
                 f"last predict error: {self.last_answer}" if self.last_answer else ""]
        return "; ".join(p for p in parts if p)

    def hint(self) -> str:
        return (f"kflab logs inferenceservice {self.resource} -n {self.ns}; kubectl -n "
                f"{self.ns} describe inferenceservice {self.resource}; kubectl -n kubeflow "
                "logs deploy/kserve-controller-manager")


class Notebook(Check):
    """A Notebook server from the lab's notebook image: the controller makes its StatefulSet
    and Service, and JupyterLab answers its API under NB_PREFIX through the API server's
    service proxy (Kubeflow's images run without a token behind that prefix)."""

    name = "notebooks"
    kind = "Notebook"
    resource = "kflab-verify-nb"

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self.last_answer = ""

    def objects(self) -> list[dict[str, Any]]:
        return [{"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
                 "metadata": meta(self.resource, self.ns),
                 "spec": {"template": {"spec": {"containers": [{
                     "name": self.resource, "image": self.cfg["images"]["notebook"],
                     "resources": small(cpu="100m", memory="256Mi", memory_max="1Gi")}]}}}}]

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        nb = k.get("notebook", self.resource, self.ns)
        if int(((nb or {}).get("status") or {}).get("readyReplicas") or 0) < 1:
            return None
        prefix = f"/notebook/{self.ns}/{self.resource}"
        ok, out = k.raw("get", f"/api/v1/namespaces/{self.ns}/services/{self.resource}:80"
                               f"/proxy{prefix}/api")
        if not ok:
            self.last_answer = out.strip()[-200:]
            return None  # the Service's endpoints may lag readyReplicas: retry
        try:
            version = json.loads(out)["version"]
        except (ValueError, KeyError, TypeError):
            return False, f"{prefix}/api answered without a Jupyter version: {out[:200]}"
        return True, f"ready (1 replica); Jupyter Server {version} answered {prefix}/api"

    def waiting(self, k: Kubectl) -> str:
        parts = [pod_problems(k, self.ns, prefix=self.resource),
                 f"last API error: {self.last_answer}" if self.last_answer else ""]
        return "; ".join(p for p in parts if p) or "no ready replica and no pod problem reported"

    def hint(self) -> str:
        return (f"kubectl -n {self.ns} describe notebook {self.resource}; kubectl -n {self.ns} "
                f"logs {self.resource}-0; kubectl -n notebook-controller-system logs "
                "deploy/notebook-controller-deployment")


class Gpu(Check):
    name = "gpu"
    kind = "Pod"
    resource = "kflab-verify-gpu"

    def objects(self) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "Pod", "metadata": meta(self.resource, self.ns),
                 "spec": {"restartPolicy": "Never", "containers": [{
                     "name": "cuda", "image": self.cfg["images"]["cuda"],
                     "command": ["sh", "-c", GPU_SCRIPT, "sh", MATMUL],
                     "resources": {"requests": {"cpu": "100m", "memory": "512Mi"},
                                   "limits": {"cpu": "2", "memory": "4Gi",
                                              "nvidia.com/gpu": 1}}}]}}]

    def poll(self, k: Kubectl) -> tuple[bool, str] | None:
        pod = k.get("pod", self.resource, self.ns)
        phase = ((pod or {}).get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed"):
            return None
        lines = [ln for ln in k.logs(self.resource, self.ns).splitlines() if ln.strip()]
        if phase == "Failed":
            return False, ("the GPU pod failed: " + (" | ".join(lines[-3:]) or
                                                     pod_problems(k, self.ns,
                                                                  prefix=self.resource)))
        return True, " | ".join(lines[:1] + [ln for ln in lines if "matmul ok" in ln][:1])

    def hint(self) -> str:
        return (f"kubectl -n {self.ns} logs {self.resource}; kubectl -n {self.ns} describe pod "
                f"{self.resource}; kubectl -n kube-system logs ds/nvidia-device-plugin-daemonset")


CHECKS: dict[str, type[Check]] = {
    "cert-manager": CertManager, "pipelines": Pipelines, "katib": Katib,
    "training-operator": TrainingOperator, "kserve": KServe, "notebooks": Notebook,
    "trainer": Trainer, "gpu": Gpu}


def selected(cfg: dict[str, Any]) -> list[Check]:
    """The checks for the lab's components (catalog order) and the GPU when enabled."""
    names = [n for n in CHECKS if n in cfg.get("components", []) and n != "gpu"]
    if cfg.get("gpu"):
        names.append("gpu")
    return [CHECKS[n](cfg) for n in names]


# -- rows ---------------------------------------------------------------------------------
def row(name: str, ok: bool, seconds: float, message: str, hint: str = "") -> dict[str, Any]:
    return {"name": name, "ok": ok, "seconds": round(seconds, 1), "message": message,
            "hint": "" if ok else hint}


def check_node(k: Kubectl, timeout: float) -> dict[str, Any]:
    t0 = time.monotonic()
    bad: list[str] = []
    while True:
        try:
            nodes = k.items("nodes")
            bad = [n["metadata"]["name"] for n in nodes if not is_true(n, "Ready")]
            if nodes and not bad:
                return row("node", True, time.monotonic() - t0,
                           f"{len(nodes)} node(s) Ready")
            why = f"not Ready: {', '.join(bad)}" if bad else "no nodes"
        except KubectlError as exc:
            why = f"the API server did not answer: {exc}"[:300]
        if time.monotonic() - t0 > timeout:
            return row("node", False, time.monotonic() - t0, why,
                       "kubectl describe nodes; on the node: journalctl -u k3s")
        time.sleep(POLL_S)


def check_controllers(k: Kubectl, cfg: dict[str, Any], timeout: float
                      ) -> tuple[dict[str, Any], set[str]]:
    """Every Deployment the catalog lists for the selected components is Available; returns
    the row and the components whose controllers are not."""
    t0 = time.monotonic()
    wanted = {c: refs for c, refs in (cfg.get("ready") or {}).items()
              if c in cfg.get("components", [])}
    while True:
        missing: dict[str, list[str]] = {}
        for comp, refs in wanted.items():
            for ref in refs:
                ns, name = ref.split("/", 1)
                try:
                    dep = k.get("deployment", name, ns)
                except KubectlError:
                    dep = None
                if not is_true(dep, "Available"):
                    missing.setdefault(comp, []).append(ref)
        total = sum(len(r) for r in wanted.values())
        if not missing:
            return row("controllers", True, time.monotonic() - t0,
                       f"{total} Deployment(s) Available"), set()
        if time.monotonic() - t0 > timeout:
            first = next(iter(missing.values()))[0]
            ns, name = first.split("/", 1)
            return row("controllers", False, time.monotonic() - t0,
                       "not Available: " + "; ".join(f"{c}: {', '.join(r)}"
                                                     for c, r in missing.items()),
                       f"kubectl -n {ns} describe deployment {name}; "
                       f"kubectl -n {ns} logs deploy/{name}"), set(missing)
        time.sleep(POLL_S)


def run_workloads(k: Kubectl, checks: list[Check], skip: set[str]) -> list[dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for c in checks:  # leftovers of an earlier run (a failure kept for inspection) go first
        if c.name in skip:
            results[c.name] = row(c.name, False, 0, "skipped: its controllers are not "
                                  "Available (see the controllers row)", c.hint())
            continue
        c.clean(k, wait=True)
    pending = []
    for c in checks:
        if c.name in results:
            continue
        c.t0 = time.monotonic()
        try:
            c.start(k)
            pending.append(c)
        except KubectlError as exc:
            results[c.name] = row(c.name, False, time.monotonic() - c.t0,
                                  f"could not create the workload: {str(exc)[:400]}", c.hint())
    while pending:
        for c in list(pending):
            try:
                outcome = c.poll(k)
            except KubectlError as exc:
                outcome = None
                c.last_error = str(exc)[:300]
            elapsed = time.monotonic() - c.t0
            if outcome is None and elapsed > c.timeout:
                try:
                    why = c.waiting(k)
                except KubectlError as exc:
                    why = str(exc)[:300]
                if c.last_error:
                    why += f"; last kubectl error: {c.last_error}"
                outcome = (False, f"not done after {c.timeout:.0f}s: {why}")
            if outcome is not None:
                ok, message = outcome
                if not ok:
                    message += " (left in place for inspection; the next verify removes it)"
                results[c.name] = row(c.name, ok, elapsed, message, c.hint())
                pending.remove(c)
                if ok:
                    c.clean(k)
        if pending:
            time.sleep(POLL_S)
    return [results[c.name] for c in checks]


def verify(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    k = Kubectl(cfg["kubectl"])
    timeouts = cfg.get("timeouts", {})
    rows = [check_node(k, float(timeouts.get("node", 120)))]
    if not rows[0]["ok"]:
        return rows
    controllers, broken = check_controllers(k, cfg, float(timeouts.get("controllers", 300)))
    rows.append(controllers)
    return rows + run_workloads(k, selected(cfg), broken)


def write(path: str, rows: list[dict[str, Any]], started: float) -> None:
    doc = {"schema": SCHEMA, "ok": all(r["ok"] for r in rows), "started": started,
           "finished": time.time(), "rows": rows}
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".verify-")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: kflab_verify.py CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[1]) as fh:
        cfg = json.load(fh)
    started = time.time()
    rows = verify(cfg)
    write(cfg["out"], rows, started)
    for r in rows:
        print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['name']:<18} {r['seconds']:>7.1f}s  "
              f"{r['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
