"""The cluster path against stand-ins that write only what the pinned upstream writes
(docs/conformance.md): the repros of issue 21 for Katib and KServe.

- Katib v0.19.0's pod webhook joins a trial's command and args into one `sh -c` line
  (tests/standins/katib_webhook.py): a learner's `command: [sh, -c, "..."]` trial must still
  run and report its metric.
- KServe v0.16.0 Standard mode: the predictor Deployment's observedGeneration, Ready False
  while it starts, and retraining into the same folder then re-applying rolls out a pod
  that serves the new model (through a port-forward that only reaches Ready pods).
"""

from __future__ import annotations

import pickle
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lab.backends.cluster import ClusterBackend

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")]


def _backend(world: Any, tmp_path: Path, ns: str) -> ClusterBackend:
    return ClusterBackend(str(tmp_path / "state"), kubeconfig=str(world.kubeconfig),
                          namespace=ns)


def test_a_katib_trial_written_with_sh_c_runs_through_the_webhooks_join(
        world: Any, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(
        "import sys\nlr = float(sys.argv[1].split('=')[1])\n"
        "print(f'accuracy={0.5 + lr}')\n")
    exp = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
           "metadata": {"name": "shc"},
           "spec": {"objective": {"type": "maximize", "objectiveMetricName": "accuracy"},
                    "algorithm": {"algorithmName": "random"}, "maxTrialCount": 2,
                    "parallelTrialCount": 1,
                    "parameters": [{"name": "lr", "parameterType": "double",
                                    "feasibleSpace": {"min": "0.01", "max": "0.1"}}],
                    "trialTemplate": {
                        "primaryContainerName": "training-container",
                        "trialParameters": [{"name": "lr", "reference": "lr"}],
                        "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {
                            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                                "name": "training-container", "image": "python:3.11-slim",
                                "command": ["sh", "-c", "python3 train.py "
                                            "--lr=${trialParameters.lr}"]}]}}}}}}}
    out = _backend(world, tmp_path, "katib-shc").apply(exp, base_dir=work, wait=True)
    conds = {c["type"]: c["status"] for c in out["status"]["conditions"]}
    assert conds.get("Succeeded") == "True", out["status"]
    assert out["status"]["trialsSucceeded"] == 2
    best = out["status"]["currentOptimalTrial"]["observation"]["metrics"][0]
    assert best["name"] == "accuracy" and 0.5 < float(best["latest"]) <= 0.6
    # the Trials on the server carry Katib v0.19.0's reason on Kubernetes v1.34, the Job's
    # Complete condition copied in (trial_controller_util.go:54-59; docs/conformance.md)
    from lab.kube.objects import list_objects

    def finished(t: dict) -> dict | None:
        return next((c for c in (t.get("status") or {}).get("conditions") or []
                     if c["type"] == "Succeeded"), None)

    deadline = time.monotonic() + 60  # the stand-in mirrors each trial a moment later
    while True:
        trials = list_objects(world.kube(), "kubeflow.org/v1beta1", "Trial", "katib-shc")
        if (len(trials) == 2 and all(finished(t) for t in trials)) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(trials) == 2
    for t in trials:
        done = finished(t)
        assert done is not None, t.get("status")
        assert (done["status"], done["reason"], done["message"]) == (
            "True", "TrialSucceeded. Job reason: CompletionsReached",
            "Trial has succeeded. Job message: Reached expected number of succeeded pods")


def _model(folder: Path, label: int) -> None:
    """An sklearn model that always answers `label` (a retrained model changes the answer)."""
    from sklearn.dummy import DummyClassifier

    folder.mkdir(parents=True, exist_ok=True)
    clf = DummyClassifier(strategy="constant", constant=label).fit([[0, 0], [1, 1]],
                                                                  [label, 1 - label])
    (folder / "model.joblib").write_bytes(pickle.dumps(clf))


def test_retraining_into_the_same_folder_and_reapplying_rolls_out_the_new_model(
        world: Any, tmp_path: Path) -> None:
    from lab.backends.cluster.serving import handler
    from lab.kube.conditions import summary_state
    from lab.kube.objects import Ref, get

    ns = "kserve-rollout"
    backend = _backend(world, tmp_path, ns)
    work = tmp_path / "work"
    _model(work / "model", 0)
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "iris"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                             "storageUri": "file://model"}}}}
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:  # what `kflab get isvc` would say while the predictor starts
        while not stop.is_set():
            obj = backend.get("InferenceService", "iris")
            if obj and obj.get("status"):
                seen.append(summary_state(obj))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        first = backend.apply(isvc, base_dir=work, wait=True)
    finally:
        stop.set()
        watcher.join()
    assert "Failed" not in seen and seen[-1] == "Ready", seen
    assert backend.predict("iris", {"instances": [[0, 0]]})["predictions"] == [0]
    dep = get(world.kube(), Ref("apps/v1", "Deployment", "iris-predictor", ns))
    # observedGeneration is the Deployment's, not the InferenceService's
    assert first["status"]["observedGeneration"] == dep["status"]["observedGeneration"]

    _model(work / "model", 1)  # retrained into the same folder
    again = backend.apply(isvc, base_dir=work, wait=True)
    assert again["metadata"]["generation"] > first["metadata"]["generation"]
    dep2 = get(world.kube(), Ref("apps/v1", "Deployment", "iris-predictor", ns))
    assert dep2["metadata"]["generation"] > dep["metadata"]["generation"]
    digest = again["spec"]["predictor"]["annotations"][handler.MODEL_DIGEST]
    assert dep2["spec"]["template"]["metadata"]["annotations"][handler.MODEL_DIGEST] == digest
    assert backend.predict("iris", {"instances": [[0, 0]]})["predictions"] == [1]


# --- kflab debug bundle against the stand-in cluster ------------------------------------------

PLANTED = {
    "ansible": "K10abcdef0123456789abcdef::server:planted-k3s-join-secret",
    "password": "planted-hunter2-password",
    "env": "planted-env-token-value",
    "log": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.cGxhbnRlZC1zaWduYXR1cmU",
    "secret": "planted-secret-object-value",
}


def test_debug_bundle_collects_the_lab_and_the_cluster_and_redacts_secrets(
        world: Any, tmp_path: Path) -> None:
    """A lab record with a planted k3s token and password in its Ansible log, a pod in the
    lab namespace with a token in its env and a JWT in its log, a Secret: the bundle has
    the lab files, the kinds, events, descriptions and logs, and none of the planted
    values. Issue 34 Why #2: the 47 shapes of tests/planted_secrets.py too, in the pod's
    env, argv (after flags, inside `sh -c`), annotations and logs, a PyTorchJob's and the
    node's annotations (k3s.io/node-args as a JSON array)."""
    import base64
    import json
    import tarfile

    from lab.config import Profile, profile_to_data
    from lab.kube.objects import apply
    from tests import planted_secrets as planted
    from tests.conftest import run_kflab
    from tests.standins.cluster import NODE, READY

    state = tmp_path / "state"
    lab = state / "labs" / "dbg"
    lab.mkdir(parents=True)
    (lab / "lab.json").write_text(json.dumps({
        "profile": profile_to_data(Profile(provider="existing", name="dbg",
                                           kubeconfig=str(world.kubeconfig))),
        "phase": "playbook", "ok": False}))
    (lab / "ansible.log").write_text(
        f"TASK [k3s : join] token={PLANTED['ansible']}\n"
        f"ok: [dbg] => {{\"admin_password\": \"{PLANTED['password']}\"}}\n"
        "fatal: [dbg]: FAILED! => the planted failure\n")
    (lab / "verify.json").write_text(json.dumps({"rows": [], "ok": False}))
    # the provider's private copy of the kubeconfig, as `kflab up --provider existing` leaves it
    (lab / "kubeconfig").write_text(Path(world.kubeconfig).read_text())
    (lab / "kubeconfig").chmod(0o600)
    kube = world.kube()
    ns = "kflab-lab"
    apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
          manager="test")
    apply(kube, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
                 "data": {"v": base64.b64encode(PLANTED["secret"].encode()).decode()}},
          manager="test")
    apply(kube, {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "w", "namespace": ns,
                              "annotations": planted.ANNOTATIONS},
                 "spec": {"nodeName": NODE, "containers": [{
                     "name": "main", "image": "python:3.11-slim",
                     "env": [{"name": "API_TOKEN", "value": PLANTED["env"]}]},
                     planted.shell_container("shell"), planted.args_container("args")]}},
          manager="test")
    job_spec = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {
        "containers": [{**planted.args_container("pytorch"), "image": "python:3.11"}]}}}
    apply(kube, {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                 "metadata": {"name": "planted", "namespace": ns,
                              "annotations": planted.ANNOTATIONS},
                 "spec": {"pytorchReplicaSpecs": {"Master": job_spec}}}, manager="test")
    kube.dynamic.patch(kube.resource("v1", "Node"), name=NODE,
                       body={"metadata": {"annotations": planted.ANNOTATIONS}},
                       content_type="application/merge-patch+json")
    kube.dynamic.patch(kube.resource("v1", "Pod").status, name="w", namespace=ns,
                       body={"status": {"phase": "Running", "conditions": [READY]}},
                       content_type="application/merge-patch+json")
    world.kubelet.logs[(ns, "w", "main")] = lambda: [
        "starting the planted workload", f"Authorization: Bearer {PLANTED['log']}",
        *"\n".join(planted.LOG.values()).splitlines()]
    out = tmp_path / "bundle.tar.gz"
    res = run_kflab("debug", "bundle", "-o", str(out),
                    env={"KFLAB_STATE": str(state)}, timeout=120)
    assert res.returncode == 0, res.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    with tarfile.open(out) as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()
                 for m in tar.getmembers() if m.isfile()}
    text = "\n".join(files.values())
    for what, value in PLANTED.items():
        assert value not in text, f"planted {what} leaked"
    planted.assert_clean(files)
    for name in planted.KEPT:
        assert name in text, name
    assert base64.b64encode(PLANTED["secret"].encode()).decode() not in text
    import yaml

    kubeconfig = yaml.safe_load(Path(world.kubeconfig).read_text())  # none of it inside
    creds = [v for user in kubeconfig["users"] for k, v in user["user"].items()
             if k in ("client-key-data", "client-certificate-data", "token", "password")]
    assert creds and not [c for c in creds if c in text]
    assert "BEGIN" not in text
    for name in ("lab/lab.json", "lab/lab.yaml", "lab/ansible.log", "lab/verify.json",
                 "versions/versions.txt", "cluster/get-experiments.yaml",
                 "cluster/get-inferenceservices.yaml", "cluster/nodes.yaml",
                 f"{ns}/events.txt", f"{ns}/pods/w.describe.txt", f"{ns}/pods/w.main.log",
                 "kubeflow/pods/ml-pipeline-standin.describe.txt"):
        assert name in files, (name, sorted(files))
    assert "the planted failure" in files["lab/ansible.log"]
    assert "starting the planted workload" in files[f"{ns}/pods/w.main.log"]
    assert "API_TOKEN" in files[f"{ns}/pods/w.describe.txt"]
    assert "kubernetes server v1." in files["versions/versions.txt"]
