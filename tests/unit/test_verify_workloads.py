"""The verify role's workloads (playbooks/roles/verify/files/kflab_verify.py), offline.

- every object it creates validates against the real CRD schema (custom kinds, from the
  rendered lab) or strictly against Kubernetes' (core kinds); only pinned images;
- the shipped KFP pipeline spec is what its source compiles to, parses as KFP IR, and the
  CreateRun body fits the KFP 2.16 v2beta1 API;
- the programs the workloads run do what the checks expect, run here for real: the Katib
  trial's metric line through Katib's StdOut wrapping and default filter, the PyTorchJob
  rendezvous of a master and a worker, the model file and a prediction of the V1 body;
- the runner's rows: a pass is cleaned up, a failure is kept and named, a timeout says what
  it waited for. That part drives kflab_verify with a STAND-IN cluster (a Python object
  answering the few kubectl calls): k3s, controllers and a kubelet cannot run here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from lab.backends.local.procs import free_port
from lab.components.catalog import REPO_ROOT, load

FILES = REPO_ROOT / "playbooks" / "roles" / "verify" / "files"
CATALOG = load()
K8S = kubernetes_validate.latest_version()


def _module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


kv = _module("kflab_verify", FILES / "kflab_verify.py")


def config(tmp: Path | None = None, components: list[str] | None = None,
           gpu: bool = True) -> dict[str, Any]:
    """The configuration the role writes (tasks/cluster.yml), from the real catalog."""
    named = yaml.safe_load((REPO_ROOT / "manifests" / "versions.yaml").read_text())[
        "images"]["verify"]  # the role reads them by name, as here
    images = {"python": named["python"], "sklearn": named["sklearn"],
              "notebook": named["notebook"], "cuda": named["gpu"]["cuda"]}
    return {"kubectl": ["kubectl"], "namespace": CATALOG.lab_namespace,
            "kfp_namespace": "kubeflow",
            "components": components or [c.name for c in CATALOG.components if not c.gpu_only],
            "gpu": gpu, "images": images, "pipeline_spec": str(FILES / "pipeline.json"),
            "timeouts": {}, "ready": {c.name: list(c.ready) for c in CATALOG.components},
            "out": str((tmp or Path("/nonexistent")) / "verify.json")}


def all_objects() -> list[dict[str, Any]]:
    return [obj for check in kv.selected(config()) for obj in check.objects()]


def test_checks_follow_the_components_and_the_gpu() -> None:
    assert [c.name for c in kv.selected(config())] == [
        "cert-manager", "pipelines", "katib", "training-operator", "kserve", "notebooks",
        "trainer", "gpu"]
    assert [c.name for c in kv.selected(config(components=["katib"], gpu=False))] == ["katib"]


def test_every_workload_object_validates(shared: Path) -> None:
    """Custom kinds against their CRD's schema in the rendered lab; core kinds strictly."""
    from tests.unit.test_overlays import all_crds, validate

    crds = all_crds(shared / "upstream" / "kubeflow-manifests-26.03")
    kinds = set()
    for obj in all_objects():
        group, _, version = obj["apiVersion"].rpartition("/")
        if group and "." in group:
            assert (group, version, obj["kind"]) in crds, f"no CRD for {obj['kind']}"
        validate(obj, crds)
        kinds.add(obj["kind"])
        assert obj["metadata"]["namespace"] == CATALOG.lab_namespace
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "kflab-verify"
    assert kinds == {"Issuer", "Certificate", "Experiment", "PyTorchJob", "PersistentVolumeClaim",
                     "Job", "InferenceService", "Notebook", "Pod", "TrainJob"}


def test_a_workload_with_a_wrong_field_is_refused(shared: Path) -> None:
    """The validation above can fail: a PyTorchJob whose worker count is a string."""
    from tests.unit.test_overlays import all_crds, validate

    crds = all_crds(shared / "upstream" / "kubeflow-manifests-26.03")
    job = kv.TrainingOperator(config()).objects()[0]
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        validate(job, crds)


def test_only_pinned_images() -> None:
    def images(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [v for k, v in node.items() if k == "image"] + \
                [i for v in node.values() for i in images(v)]
        if isinstance(node, list):
            return [i for v in node for i in images(v)]
        return []

    pinned = {i for group in CATALOG.images.values() for i in group}
    used = set(images(all_objects()))
    spec = kv.Pipelines(config()).spec()
    used |= {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert used and used <= pinned, used - pinned
    assert "KFLAB_VERIFY_IMAGE" not in json.dumps(spec)


def test_pipeline_json_is_what_its_source_compiles_to() -> None:
    source = _module("verify_pipeline", FILES / "verify_pipeline.py")
    assert json.loads((FILES / "pipeline.json").read_text()) == source.compiled()


def test_pipeline_spec_is_kfp_ir_with_two_uncached_tasks() -> None:
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    spec = kv.Pipelines(config()).spec()
    ir = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())  # unknown field: error
    tasks = ir.root.dag.tasks
    assert sorted(tasks) == ["consume", "produce"]
    assert not any(t.caching_options.enable_cache for t in tasks.values())
    assert tasks["consume"].dependent_tasks == ["produce"]


def test_create_run_body_fits_the_kfp_api(shared: Path) -> None:
    swagger = json.loads((shared / "upstream" / "kfp-api-2.16.0" / "v2beta1" / "swagger" /
                          "run.swagger.json").read_text())
    assert "/apis/v2beta1/runs" in swagger["paths"]
    fields = swagger["definitions"]["v2beta1Run"]["properties"]
    body = kv.Pipelines(config()).body()
    assert set(body) <= set(fields), set(body) - set(fields)
    assert fields["pipeline_spec"]["type"] == "object" and isinstance(body["pipeline_spec"], dict)


def test_katib_trial_prints_a_metric_through_katibs_stdout_wrapping(tmp_path: Path) -> None:
    """Katib (v1beta1 inject webhook) keeps `sh -c` and appends ` 1>FILE 2>&1 && ...` to the
    script, after substituting ${trialParameters.x}; its StdOut collector's default filter
    then reads `name=value` lines from FILE."""
    trial = kv.Katib(config()).objects()[0]["spec"]["trialTemplate"]["trialSpec"]
    command = trial["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["sh", "-c"] and len(command) == 3
    metrics = tmp_path / "metrics.log"
    script = command[2].replace("${trialParameters.x}", "0.3") + f" 1>{metrics} 2>&1"
    subprocess.run(["sh", "-c", script], check=True, timeout=60)
    default_filter = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
    found = {m.group(1): float(m.group(2)) for m in re.finditer(default_filter,
                                                                metrics.read_text())}
    assert found == {"score": pytest.approx(0.96)}


def test_trainjob_nodes_meet_with_the_trainers_variables() -> None:
    """The nodes' program with the env Trainer's torch plugin sets (PET_*), as two real
    processes on loopback."""
    port = free_port()
    base = {**os.environ, "PET_NNODES": "2", "PET_MASTER_ADDR": "127.0.0.1",
            "PET_MASTER_PORT": str(port)}
    command = kv.Trainer(config()).objects()[0]["spec"]["trainer"]["command"]
    node1 = subprocess.Popen(command, env={**base, "PET_NODE_RANK": "1"},
                             stdout=subprocess.PIPE, text=True)
    node0 = subprocess.run(command, env={**base, "PET_NODE_RANK": "0"}, capture_output=True,
                           text=True, timeout=60, check=False)
    out, _ = node1.communicate(timeout=60)
    assert node0.returncode == 0 and node1.returncode == 0, node0.stderr
    assert "master: all 2 ranks met: [0, 1]" in node0.stdout
    assert f"worker 1: met the master at 127.0.0.1:{port}" in out


def test_pytorchjob_master_and_worker_meet() -> None:
    """The replicas' program with the env the training operator sets (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT), as two real processes on loopback."""
    port = free_port()
    base = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port)}
    job = kv.TrainingOperator(config()).objects()[0]
    command = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"][0]["command"]
    worker = subprocess.Popen(command, env={**base, "RANK": "1"}, stdout=subprocess.PIPE,
                              text=True)
    time.sleep(1)  # the worker starts first and retries, as it may in a cluster
    master = subprocess.run(command, env={**base, "RANK": "0"}, capture_output=True,
                            text=True, timeout=60, check=False)
    out, _ = worker.communicate(timeout=60)
    assert master.returncode == 0 and worker.returncode == 0, master.stderr
    assert "master: all 2 ranks met: [0, 1]" in master.stdout
    assert f"worker 1: met the master at 127.0.0.1:{port}" in out


def test_model_job_writes_a_model_that_answers_the_v1_body(tmp_path: Path) -> None:
    """The Job's program (run here with this venv's scikit-learn) writes model.joblib where
    the InferenceService's storageUri points; the model answers the predict body."""
    import joblib

    check = kv.KServe(config())
    job = check.storage()[1]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    mount = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
    program = command[2].replace(mount, str(tmp_path))
    subprocess.run([sys.executable, "-c", program], check=True, timeout=120)
    uri = check.isvc()["spec"]["predictor"]["model"]["storageUri"]
    assert uri == "pvc://kflab-verify-model/model"
    model = joblib.load(tmp_path / "model" / "model.joblib")
    predictions = model.predict(kv.PREDICT_BODY["instances"]).tolist()
    assert len(predictions) == 2 and set(predictions) <= {0, 1, 2}


# -- the runner's rows, against a stand-in cluster ------------------------------------------
class StandInCluster(kv.Kubectl):
    """STAND-IN for kubectl + a cluster with controllers (none can run here): objects are
    kept in a dict; `controllers` decides the status each kind reaches when polled."""

    def __init__(self, controllers: dict[str, Any]) -> None:
        super().__init__(["kubectl"])
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.controllers = controllers
        self.deleted: list[str] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.jupyter_api = json.dumps({"version": "2.17.0"})

    def apply(self, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            self.objects[(obj["kind"].lower(), obj["metadata"]["name"])] = json.loads(
                json.dumps(obj))

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        obj = self.objects.get((kind.lower(), name))
        if obj is not None and kind.lower() in self.controllers:
            obj["status"] = self.controllers[kind.lower()](obj)
        return obj

    def items(self, kind: str, namespace: str | None = None,
              selector: str | None = None) -> list[dict[str, Any]]:
        if kind == "nodes":
            return [{"metadata": {"name": "n1"},
                     "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
        if kind == "pods":
            return [{"metadata": {"name": "kflab-verify-ddp-worker-0"},
                     "status": {"phase": "Pending", "containerStatuses": [{
                         "name": "pytorch", "state": {"waiting": {
                             "reason": "ImagePullBackOff",
                             "message": "Back-off pulling image python:3.11"}}}]}}]
        return []

    def delete(self, obj: dict[str, Any], wait: bool = False) -> None:
        if self.objects.pop((obj["kind"].lower(), obj["metadata"]["name"]), None):
            self.deleted.append(f"{obj['kind']}/{obj['metadata']['name']}")

    def raw(self, verb: str, path: str, body: Any = None) -> tuple[bool, str]:
        if verb == "create" and path.endswith("/runs"):
            self.runs["r1"] = body
            return True, json.dumps({"run_id": "r1", "state": "PENDING"})
        if verb == "get" and path.endswith("/runs/r1"):
            return True, json.dumps({"run_id": "r1", "state": "SUCCEEDED", "run_details": {
                "task_details": [{"display_name": n, "state": "SUCCEEDED"}
                                 for n in ("produce", "consume", "root")]}})
        if verb == "create" and path.endswith(":predict"):
            return True, json.dumps({"predictions": [1, 1]})
        if verb == "get" and path.endswith("/proxy/notebook/kflab-lab/kflab-verify-nb/api"):
            return True, self.jupyter_api
        if verb == "delete":
            self.deleted.append(path.rsplit("/", 1)[-1])
            return True, "{}"
        return False, "not found"

    def logs(self, pod: str, namespace: str, container: str | None = None) -> str:
        return "master: all 2 ranks met: [0, 1]\n"


def true(*kinds: str) -> Any:
    return lambda obj: {"conditions": [{"type": k, "status": "True", "message": "m"}
                                       for k in kinds]}


def test_rows_pass_and_clean_up_or_fail_and_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kv, "POLL_S", 0.01)
    cluster = StandInCluster({
        "certificate": true("Ready"),
        "experiment": lambda obj: {**true("Succeeded")(obj), "trialsSucceeded": 2,
                                   "currentOptimalTrial": {"observation": {"metrics": [
                                       {"name": "score", "latest": "0.99"}]}}},
        "pytorchjob": true("Failed"),
        "job": true("Complete"),
        "inferenceservice": true("Ready"),
        "notebook": lambda obj: {"readyReplicas": 1},
        "trainjob": lambda obj: {**true("Complete")(obj), "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0,
             "suspended": 0}]},
    })
    cfg = config(gpu=False)
    rows = kv.run_workloads(cluster, kv.selected(cfg), skip=set())
    by = {r["name"]: r for r in rows}
    assert [r["name"] for r in rows] == ["cert-manager", "pipelines", "katib",
                                         "training-operator", "kserve", "notebooks", "trainer"]
    assert all(by[n]["ok"] for n in ("cert-manager", "pipelines", "katib", "kserve",
                                     "notebooks", "trainer")), rows
    assert by["trainer"]["message"].startswith("TrainJob Complete (node: 1 succeeded)")
    assert by["notebooks"]["message"] == ("ready (1 replica); Jupyter Server 2.17.0 answered "
                                          "/notebook/kflab-lab/kflab-verify-nb/api")
    assert by["katib"]["message"] == "2 trials Succeeded; best score 0.99"
    assert by["kserve"]["message"] == "Ready; V1 predict answered [1, 1]"
    assert "produce passed a parameter to consume" in by["pipelines"]["message"]
    bad = by["training-operator"]
    assert not bad["ok"] and bad["message"].startswith("PyTorchJob Failed: m")
    assert "left in place for inspection" in bad["message"]
    assert "kubectl -n kflab-lab describe pytorchjob kflab-verify-ddp" in bad["hint"]
    assert all(r["hint"] == "" for r in rows if r["ok"])
    assert ("pytorchjob", "kflab-verify-ddp") in cluster.objects  # kept
    assert "InferenceService/kflab-verify-sklearn" in cluster.deleted  # passed: removed
    assert "Experiment/kflab-verify-hpo" in cluster.deleted and "r1" in cluster.deleted
    body = cluster.runs["r1"]
    assert body["pipeline_spec"]["pipelineInfo"]["name"] == "kflab-verify"


def test_a_notebook_needs_a_ready_replica_and_a_jupyter_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kv, "POLL_S", 0.01)
    ready = {"n": 0}
    cluster = StandInCluster({"notebook": lambda obj: {"readyReplicas": ready["n"]}})
    cfg = {**config(components=["notebooks"], gpu=False), "timeouts": {"notebooks": 0.05}}
    [row] = kv.run_workloads(cluster, kv.selected(cfg), skip=set())
    assert not row["ok"] and row["message"].startswith("not done after 0s")
    assert "kubectl -n kflab-lab describe notebook kflab-verify-nb" in row["hint"]
    # ready, but what answers under NB_PREFIX is not Jupyter
    ready["n"] = 1
    cluster.jupyter_api = "<html>404</html>"
    cfg["timeouts"] = {"notebooks": 5}
    [row] = kv.run_workloads(cluster, kv.selected(cfg), skip=set())
    assert not row["ok"] and "answered without a Jupyter version: <html>404" in row["message"]
    [obj] = kv.Notebook(cfg).objects()
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
        "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:")


def test_a_timeout_says_what_it_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kv, "POLL_S", 0.01)
    cluster = StandInCluster({"pytorchjob": lambda obj: {"conditions": []}})
    cfg = {**config(components=["training-operator"], gpu=False),
           "timeouts": {"training-operator": 0.05}}
    [row] = kv.run_workloads(cluster, kv.selected(cfg), skip=set())
    assert not row["ok"] and row["message"].startswith("not done after 0s: pod "
                                                       "kflab-verify-ddp-worker-0 container "
                                                       "pytorch: ImagePullBackOff")


def test_skipped_components_and_the_results_file(tmp_path: Path) -> None:
    cluster = StandInCluster({})
    cfg = config(tmp_path, components=["katib"], gpu=False)
    rows = [kv.row("node", True, 0.04, "1 node(s) Ready")]
    rows += kv.run_workloads(cluster, kv.selected(cfg), skip={"katib"})
    assert rows[1]["name"] == "katib" and not rows[1]["ok"]
    assert rows[1]["message"].startswith("skipped: its controllers are not Available")
    kv.write(cfg["out"], rows, 1.0)
    doc = json.loads(Path(cfg["out"]).read_text())
    assert doc["schema"] == 1 and doc["ok"] is False and doc["started"] == 1.0
    assert [set(r) for r in doc["rows"]] == [{"name", "ok", "seconds", "message", "hint"}] * 2
    assert doc["rows"][0]["seconds"] == 0.0
