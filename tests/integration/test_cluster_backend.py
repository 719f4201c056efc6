"""The cluster backend against real API servers: the v1.36 CRD API server holding the upstream
Kubeflow CRDs unchanged and the v1.20 kube-apiserver, behind the stand-in aggregation layer,
with a stand-in kubelet (logs, port-forward) and stand-in KFP services (tests/standins/).

In namespaces named `manual-*` the controller stand-in stays away and each test plays the
controller itself, writing status through the status subresource as the upstream controller
writes it (named in each helper). Elsewhere the controller stand-in runs the workloads, which
is how `kflab scenario test --all --backend cluster` runs every scenario here.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lab.backends.cluster import ClusterBackend
from lab.errors import LabError
from tests.conftest import SHARED, run_kflab

# A port-forward thread that dies with an exception (a tunnel not closed) fails the test.
pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")]
REPO = Path(__file__).resolve().parents[2]
SWAGGER = SHARED / "upstream" / "kfp-api-2.16.0" / "v2beta1" / "swagger"


def _backend(world: Any, tmp_path: Path, ns: str, **kw: Any) -> ClusterBackend:
    return ClusterBackend(str(tmp_path / "state"), kubeconfig=str(world.kubeconfig),
                          namespace=ns, **kw)


def _cli(world: Any, *args: str, cwd: Path | None = None, ns: str | None = None,
         timeout: float = 900) -> Any:
    env = {"KUBECONFIG": str(world.kubeconfig), "KFLAB_STATE": str(world.root / "cli-state")}
    if ns:
        env["KFLAB_NAMESPACE"] = ns
    return run_kflab(*args, cwd=cwd, env=env, timeout=timeout)


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --- the controllers, played as upstream writes status ----------------------------------------

def play_kserve(world: Any, ns: str, name: str, ready: bool, reason: str = "") -> None:
    """KServe's InferenceService reconciler (raw deployment): IngressReady, PredictorReady and
    Ready conditions (knative duck type), status.url from the ingress domain, address.url of
    the predictor Service, observedGeneration of the spec it reconciled."""
    from lab.kube.objects import Ref, get

    obj = get(world.kube(), Ref("serving.kserve.io/v1beta1", "InferenceService", name, ns))
    value = "True" if ready else "False"
    conds = [{"type": t, "status": value, "lastTransitionTime": _stamp(),
              **({} if ready else {"reason": reason, "message": "predictor pods not ready"})}
             for t in ("IngressReady", "PredictorReady", "Ready")]
    status: dict[str, Any] = {"conditions": conds,
                              "observedGeneration": obj["metadata"]["generation"]}
    if ready:
        status["url"] = f"http://{name}-{ns}.example.com"
        status["address"] = {"url": f"http://{name}-predictor.{ns}.svc.cluster.local"}
    world.controllers.put_status("serving.kserve.io/v1beta1", "InferenceService", ns, name,
                                 status)


def play_katib(world: Any, ns: str, name: str, phase: str, succeeded: int = 0) -> None:
    """Katib's experiment controller (util/status_util.go): Created (ExperimentCreated),
    Running (ExperimentRunning), then Running turns False and Succeeded is set
    (ExperimentMaxTrialsReached); trial counts and currentOptimalTrial from the trials'
    observations, metric values written as text."""
    conds = [{"type": "Created", "status": "True", "reason": "ExperimentCreated",
              "message": "Experiment is created", "lastUpdateTime": _stamp(),
              "lastTransitionTime": _stamp()}]
    status: dict[str, Any] = {"startTime": _stamp(), "conditions": conds}
    if phase in ("Running", "Succeeded"):
        conds.append({"type": "Running", "status": "True" if phase == "Running" else "False",
                      "reason": "ExperimentRunning", "message": "Experiment is running",
                      "lastUpdateTime": _stamp(), "lastTransitionTime": _stamp()})
    if phase == "Succeeded":
        conds.append({"type": "Succeeded", "status": "True",
                      "reason": "ExperimentMaxTrialsReached",
                      "message": "Experiment has succeeded because max trial count has reached",
                      "lastUpdateTime": _stamp(), "lastTransitionTime": _stamp()})
        status.update({"completionTime": _stamp(), "trials": succeeded,
                       "trialsSucceeded": succeeded,
                       "succeededTrialList": [f"{name}-t{i}" for i in range(succeeded)],
                       "currentOptimalTrial": {
                           "bestTrialName": f"{name}-t0",
                           "parameterAssignments": [{"name": "C", "value": "10"}],
                           "observation": {"metrics": [{"name": "accuracy", "min": "0.97",
                                                        "max": "0.97", "latest": "0.97"}]}}})
    world.controllers.put_status("kubeflow.org/v1beta1", "Experiment", ns, name, status)


def play_training_operator(world: Any, ns: str, name: str) -> None:
    """The Training Operator (v1 JobStatus): Created, Running, then Succeeded
    (PyTorchJobSucceeded) with Running set False; replicaStatuses count each type's pods."""
    c = [{"type": t, "status": s, "reason": f"PyTorchJob{t}", "message": m,
          "lastUpdateTime": _stamp(), "lastTransitionTime": _stamp()}
         for t, s, m in (("Created", "True", f"PyTorchJob {name} is created."),
                         ("Running", "False", f"PyTorchJob {name} is running."),
                         ("Succeeded", "True", f"PyTorchJob {name} is successfully completed."))]
    world.controllers.put_status("kubeflow.org/v1", "PyTorchJob", ns, name, {
        "conditions": c, "startTime": _stamp(), "completionTime": _stamp(),
        "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {"succeeded": 2}}})


def _isvc(name: str, min_replicas: int = 1) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name},
            "spec": {"predictor": {"minReplicas": min_replicas, "model": {
                "modelFormat": {"name": "sklearn"}, "storageUri": "file://models"}}}}


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "models").mkdir(parents=True)
    (work / "models" / "model.joblib").write_bytes(b"\x80\x04K\x01.")
    (work / "train.py").write_text("print('accuracy=0.97')\n")
    return work


# --- apply, status, conflicts -----------------------------------------------------------------

def test_apply_is_idempotent_and_the_status_is_the_controllers(world: Any,
                                                               tmp_path: Path) -> None:
    ns = "manual-idem"
    backend = _backend(world, tmp_path, ns)
    work = _workdir(tmp_path)
    first = backend.apply(_isvc("iris"), base_dir=work, wait=False)
    again = backend.apply(_isvc("iris"), base_dir=work, wait=False)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "status" not in first or not first["status"]  # kflab writes no status
    # the model folder rides in a ConfigMap mounted where KServe's servers read models
    model = again["spec"]["predictor"]["model"]
    assert "storageUri" not in model
    assert model["volumeMounts"][0]["mountPath"] == "/mnt/models"
    ns_obj = world.kube().dynamic.get(world.kube().resource("v1", "Namespace"), name=ns)
    assert ns_obj.metadata.labels["katib.kubeflow.org/metrics-collector-injection"] == "enabled"
    play_kserve(world, ns, "iris", ready=True)
    got = backend.get("InferenceService", "iris")
    assert got["status"]["url"] == f"http://iris-{ns}.example.com"
    assert [i["metadata"]["name"] for i in backend.list("isvc")] == ["iris"]
    assert backend.delete("InferenceService", "iris") is True
    assert backend.delete("InferenceService", "iris") is False


def test_a_field_another_manager_owns_is_a_conflict_unless_a_solution_forces(
        world: Any, tmp_path: Path) -> None:
    from lab.kube.apierrors import Conflict
    from lab.kube.objects import apply

    ns = "manual-conflict"
    work = _workdir(tmp_path)
    _backend(world, tmp_path, ns).apply(_isvc("shared", 1), base_dir=work, wait=False)
    other = _isvc("shared", 2)
    other["metadata"]["namespace"] = ns
    apply(world.kube(), {k: other[k] for k in ("apiVersion", "kind", "metadata")} |
          {"spec": {"predictor": {"minReplicas": 2}}}, manager="team-admin", force=True)
    with pytest.raises(Conflict) as err:
        _backend(world, tmp_path, ns).apply(_isvc("shared", 3), base_dir=work, wait=False)
    assert ("team-admin", ".spec.predictor.minReplicas") in err.value.fields
    solved = _backend(world, tmp_path, ns, manager="kflab-scenario", force=True).apply(
        _isvc("shared", 3), base_dir=work, wait=False)
    assert solved["spec"]["predictor"]["minReplicas"] == 3


def test_checks_read_the_training_operators_status(world: Any, tmp_path: Path) -> None:
    from lab.scenarios import checks
    from lab.scenarios.context import Context
    from lab.scenarios.model import Check

    ns = "manual-train"
    backend = _backend(world, tmp_path, ns)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ddp"},
           "spec": {"pytorchReplicaSpecs": {r: {"replicas": n, "restartPolicy": "OnFailure",
                                                "template": {"spec": {"containers": [{
                                                    "name": "pytorch", "image": "torch",
                                                    "command": ["python", "train.py"]}]}}}
                                            for r, n in (("Master", 1), ("Worker", 2))}}}
    backend.apply(job, base_dir=_workdir(tmp_path), wait=False)
    ctx = Context(backend, tmp_path)
    done = Check("condition", "m", 0, {"kind": "PyTorchJob", "name": "ddp",
                                       "condition": "Succeeded"}, "t")
    workers = Check("field", "m", 0, {"kind": "PyTorchJob", "name": "ddp", "value": 2,
                                      "query": "status.replicaStatuses.Worker.succeeded"}, "t")
    assert not checks.evaluate(done, ctx, wait=False).ok
    play_training_operator(world, ns, "ddp")
    assert checks.evaluate(done, ctx, wait=False).ok
    assert checks.evaluate(workers, ctx, wait=False).ok


def test_the_wait_survives_a_dropped_watch_and_ends_on_katibs_succeeded(
        world: Any, tmp_path: Path) -> None:
    ns = "manual-katib"
    exp = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
           "metadata": {"name": "hpo"},
           "spec": {"objective": {"type": "maximize", "objectiveMetricName": "accuracy"},
                    "algorithm": {"algorithmName": "random"}, "maxTrialCount": 2,
                    "parameters": [{"name": "C", "parameterType": "double",
                                    "feasibleSpace": {"min": "1", "max": "10"}}],
                    "trialTemplate": {"primaryContainerName": "main", "trialParameters": [
                        {"name": "C", "reference": "C"}], "trialSpec": {
                        "apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {
                            "spec": {"restartPolicy": "Never", "containers": [{
                                "name": "main", "image": "python:3.11-slim",
                                "command": ["python3", "train.py",
                                            "--C=${trialParameters.C}"]}]}}}}}}}
    backend = _backend(world, tmp_path, ns)
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["obj"] = backend.apply(exp, base_dir=_workdir(tmp_path), wait=True)
        except LabError as exc:
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while backend.get("Experiment", "hpo") is None and time.monotonic() < deadline:
        time.sleep(0.2)
    play_katib(world, ns, "hpo", "Running")
    crd = next(p for p in world.procs if p.argv[0].endswith("crd-apiserver"))
    crd.stop()  # the API server goes away mid-watch, then comes back on the same port
    time.sleep(2)
    crd.start()
    from tests.standins.cluster import _wait_ready

    _wait_ready(world.aggregator.crd.url, Path(world.aggregator.crd.ca),
                world.tokens["admin"], crd)
    assert thread.is_alive(), result  # still waiting: Running is not the end
    play_katib(world, ns, "hpo", "Succeeded", succeeded=2)
    thread.join(60)
    assert "error" not in result, result.get("error")
    conds = {c["type"]: c for c in result["obj"]["status"]["conditions"]}
    assert conds["Succeeded"]["reason"] == "ExperimentMaxTrialsReached"
    assert result["obj"]["status"]["trialsSucceeded"] == 2


def test_a_service_that_never_becomes_ready_times_out_showing_its_last_status(
        world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.backends.cluster.serving import handler
    from lab.kube.watch import WaitTimeout

    ns = "manual-never"
    monkeypatch.setattr(handler, "READY_TIMEOUT", 4.0)
    backend = _backend(world, tmp_path, ns)

    def kserve_reports_not_ready() -> None:
        deadline = time.monotonic() + 10
        while backend.get("InferenceService", "stuck") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        play_kserve(world, ns, "stuck", ready=False, reason="PredictorNotReady")

    threading.Thread(target=kserve_reports_not_ready, daemon=True).start()
    with pytest.raises(WaitTimeout) as err:
        backend.apply(_isvc("stuck"), base_dir=_workdir(tmp_path), wait=True)
    assert "timed out after 4s" in str(err.value)
    assert "Ready=False PredictorNotReady" in str(err.value)


def test_forbidden_and_bad_credentials_are_one_clear_line(world: Any, tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    (work / "isvc.yaml").write_text(json.dumps(_isvc("denied")))
    out = _cli(world, "apply", "-f", str(work / "isvc.yaml"), "--context", "nobody",
               ns="manual-rbac")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "forbidden" in out.stderr and "Traceback" not in out.stderr
    out = _cli(world, "get", "experiments", "--context", "bad-token")
    assert out.returncode == 2
    assert "rejected the credentials (401" in out.stderr and "Traceback" not in out.stderr


# --- the scenarios' own manifests, validated by the v1.36 server -------------------------------

MANIFESTS = sorted(p for p in (REPO / "scenarios").rglob("*.yaml") if p.name != "scenario.yaml")


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(REPO / "scenarios")))
def test_scenario_manifests_pass_the_v136_servers_validation_unchanged(
        world: Any, tmp_path: Path, path: Path) -> None:
    import shutil

    work = tmp_path / "work"
    shutil.copytree(path.parent.parent / "assets", work)
    (work / "models" / "v1").mkdir(parents=True)  # what the kserve lab trains first
    (work / "models" / "v2").mkdir(parents=True)
    (work / "models" / "v1" / "model.joblib").write_bytes(b"\x80\x04K\x01.")
    (work / "models" / "v2" / "model.json").write_text("{}")
    shutil.copy(path, work / path.name)
    out = _cli(world, "apply", "-f", path.name, "--backend", "cluster", "--dry-run",
               cwd=work, ns="manual-validate")
    assert out.returncode == 0, out.stderr
    assert "valid (server dry run)" in out.stdout


def test_an_invalid_manifest_is_rejected_by_the_server_naming_the_field(
        world: Any, tmp_path: Path) -> None:
    bad = (REPO / "scenarios/distributed-training/solutions/pytorchjob.yaml").read_text()
    (tmp_path / "job.yaml").write_text(bad.replace("replicas: 2", "replicas: two"))
    (tmp_path / "train_ddp.py").write_text("")
    out = _cli(world, "apply", "-f", "job.yaml", "--backend", "cluster", "--dry-run",
               cwd=tmp_path, ns="manual-validate")
    assert out.returncode == 2
    assert "pytorchReplicaSpecs.Worker.replicas" in out.stderr, out.stderr


def test_a_notebook_is_ready_and_opens_through_a_forward(world: Any, tmp_path: Path) -> None:
    """A Notebook as the Kubeflow docs write it: the work folder rides along read-only, the
    controller (stand-in) reports it ready, `kflab open notebook` forwards 127.0.0.1 to its
    Service and the JupyterLab behind it lists the files; delete removes it."""
    import urllib.request

    from lab.backends.local.notebooks.handler import server_info

    ns = "nb-open"
    backend = _backend(world, tmp_path, ns)
    work = tmp_path / "nbwork"
    work.mkdir()
    (work / "hello.txt").write_text("hi")
    nb = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "nb"},
          "spec": {"template": {"spec": {"containers": [{
              "name": "nb", "image": "ghcr.io/kubeflow/kubeflow/notebook-servers/"
                                    "jupyter-scipy:v1.10.0",
              "resources": {"requests": {"cpu": "0.5", "memory": "1Gi"}}}]}}}}
    out = backend.apply(nb, base_dir=work)
    assert out["status"]["readyReplicas"] == 1
    mount = out["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]
    assert (mount["mountPath"], mount["readOnly"]) == ("/home/jovyan/lab-files", True)
    token = server_info(world.controllers.local(), "nb", ns)["token"]  # the stand-in's own
    with backend.open_notebook("nb") as (url, forwarding):
        assert forwarding and url.startswith("http://127.0.0.1:")
        assert url.endswith(f"/notebook/{ns}/nb/lab")
        req = urllib.request.Request(url.removesuffix("/lab") + "/api/contents",
                                     headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            listed = [item["name"] for item in json.loads(resp.read())["content"]]
    assert "hello.txt" in listed
    assert backend.delete("Notebook", "nb") is True


# --- the judged run: every scenario, both halves of the invariant --------------------------------

@pytest.mark.slow
def test_every_scenario_passes_on_the_cluster_backend(world: Any, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    out = _cli(world, "scenario", "test", "--all", "--backend", "cluster", "--json",
               str(report), cwd=tmp_path, timeout=3000)
    from lab.scenarios.loader import discover, load_scenario

    results = {r["id"]: r for r in json.loads(report.read_text())}
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert all(r["backend"] == "cluster" for r in results.values())
    # KFP's task list holds Argo's nodes (issue 21): progress names pipeline steps only
    shown = re.findall(r"task (\S+) (?:SUCCEEDED|FAILED)", out.stdout)
    assert "train-decision-tree" in shown, out.stdout[-3000:]
    assert not [t for t in shown if t in ("executor", "root", "root-driver")
                or t.endswith("-driver")], shown
    local_only = {sid: why for sid, path in discover().items()
                  if (why := load_scenario(path).why_not("cluster"))}
    for sid, r in results.items():
        if sid in local_only:  # written for the local backend: skipped with its own reason
            assert r["status"] == "skipped", (sid, r)
            assert all(s["skip_reason"] == local_only[sid] for s in r["steps"]), sid
        elif sid == "gpu-check":  # this machine has no GPU: skipped with the reason
            assert r["status"] == "skipped"
            assert "GPU" in (r["steps"][0]["skip_reason"] or "")
        else:  # a scenario whose last step needs a GPU (distributed-training-trainjob): that
            # step is skipped with the reason, the others pass
            gpu = [s for s in r["steps"] if s.get("skip_reason")]
            assert r["status"] == ("skipped" if gpu else "passed"), (sid, r)
            assert all("GPU" in s["skip_reason"] for s in gpu), (sid, r)
            assert all(c["ok"] is False for s in r["steps"] for c in s["before"] or []), sid


def _swagger() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for name in ("run", "experiment", "healthz", "filter"):
        defs.update(json.loads((SWAGGER / f"{name}.swagger.json").read_text())["definitions"])
    for name, d in defs.items():  # strict: the stand-in may not invent fields
        # (but protobufAny's JSON form carries the packed message's fields: an error's
        # details hold a google.rpc.Status, common/util/error.go GRPCStatus)
        if d.get("type") == "object" and d.get("properties") and name != "protobufAny":
            d["additionalProperties"] = False
    return defs


def test_every_kfp_standin_response_follows_the_v2beta1_schema(world: Any,
                                                               tmp_path: Path) -> None:
    from jsonschema import Draft4Validator

    from lab.backends import shapes

    backend = _backend(world, tmp_path, "kfp-schema")
    work = tmp_path / "work"
    work.mkdir()
    for f in ("components.py", "pipeline.py"):
        (work / f).write_text((REPO / "scenarios/pipeline-classifiers/assets" / f).read_text())
    run = backend.apply(shapes.pipeline_run("schema", {"pipeline": "pipeline.py"}),
                        base_dir=work)
    assert shapes.state(run) == "SUCCEEDED"
    assert shapes.task(run, "train-decision-tree")["outputs"]["metrics"]["accuracy"] > 0.8
    art = shapes.artifact(run, "train-decision-tree", "model")
    assert art["uri"].startswith("minio://mlpipeline/") and Path(art["path"]).stat().st_size
    assert any("model" in line or "Task" in line for line in backend.logs("PipelineRun",
                                                                          "schema"))
    # the learner sees the pipeline's steps, not Argo's driver/executor/root nodes
    ir = json.loads((tmp_path / "state/cluster/pipelineruns/kfp-schema/schema.ir.json")
                    .read_text())
    ir_tasks = set(ir["root"]["dag"]["tasks"])
    assert {t["display_name"] for t in shapes.tasks(run)} == ir_tasks
    # the KFP API itself lists Argo nodes with no outputs, as KFP 2.16 does
    raw = world.kfp.runs[run["status"]["run_id"]]["run_details"]["task_details"]
    assert {"executor", "root", "root-driver"} <= {t.get("display_name") for t in raw}
    assert not any("outputs" in t or "pod_name" in t for t in raw)
    # `kflab logs run NAME --task T` (pipeline-classifiers' hint): that task's executor pod only
    lines = list(backend.logs("PipelineRun", "schema", replica="train-decision-tree"))
    assert any("train-decision-tree" in line for line in lines), lines[:20]
    assert not any("Executing task 'train-svm'" in line for line in lines)
    defs = _swagger()
    checked = 0
    for method, path, code, (schema, body) in list(world.kfp.responses):
        if not schema:
            assert body == {}, (method, path)
            continue
        errors = sorted(Draft4Validator({"$ref": f"#/definitions/{schema}",
                                         "definitions": defs}).iter_errors(body), key=str)
        assert not errors, (method, path, code, [e.message for e in errors[:3]])
        checked += 1
    assert checked >= 5
    backend.down()


def test_every_step_installs_from_the_class_index(world: Any, tmp_path: Path) -> None:
    """Issue 35: an offline class's steps pip-installed from PyPI. With the class index in
    the lab (what `kflab up --bundle` applies), the run the KFP API receives has every step
    installing from it; a step needing a package the index lacks is refused before any run
    is created, naming the step and the package."""
    from lab.backends import shapes
    from lab.backends.cluster.pipelines.compile import index_options
    from lab.backends.cluster.pipelines.index import class_index
    from lab.kube.objects import Ref, delete
    from lab.teaching import pipindex

    kube = world.kube()
    record = {"image": "localhost/kflab/pip-index:0123456789abcdef", "python": "3.11",
              "platform": "linux/amd64",
              "packages": {"kfp": ["2.16.0"], "scikit-learn": ["1.7.2"], "pandas": ["2.3.3"],
                           "joblib": ["1.5.2"]}}
    pipindex.install(kube, record)
    try:
        backend = _backend(world, tmp_path, "kfp-index")
        work = tmp_path / "work"
        work.mkdir()
        for f in ("components.py", "pipeline.py"):
            (work / f).write_text((REPO / "scenarios/pipeline-classifiers/assets" / f)
                                  .read_text())
        before = set(world.kfp.runs)
        with pytest.raises(LabError) as err:  # the lab's steps also install xgboost-cpu
            backend.apply(shapes.pipeline_run("offline", {"pipeline": "pipeline.py"}),
                          base_dir=work)
        assert str(err.value).splitlines()[0] == (
            f"{work / 'pipeline.py'}: step 'load-data' installs xgboost-cpu (the index has "
            "no xgboost-cpu), from the package index "
            "http://kflab-pip-index.kubeflow.svc.cluster.local/simple/")
        assert set(world.kfp.runs) == before  # refused before any run was created
        record["packages"]["xgboost-cpu"] = ["3.0.5"]
        pipindex.install(kube, record)
        run = backend.apply(shapes.pipeline_run("offline", {"pipeline": "pipeline.py"}),
                            base_dir=work)
        assert shapes.state(run) == "SUCCEEDED"
        sent = world.kfp.runs[run["status"]["run_id"]]["pipeline_spec"]
        opts = index_options(class_index(kube))
        scripts = [e["container"]["command"][2]
                   for e in sent["deploymentSpec"]["executors"].values()]
        assert scripts and all(s.count(opts) == 2 for s in scripts)
        backend.down()
    finally:
        for kind, api in (("ConfigMap", "v1"), ("Deployment", "apps/v1"), ("Service", "v1")):
            delete(kube, Ref(api, kind, "kflab-pip-index", "kubeflow"), missing_ok=True)
