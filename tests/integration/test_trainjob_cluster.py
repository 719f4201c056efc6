"""A TrainJob on the cluster backend against the real API servers (the upstream Trainer CRDs
unchanged, the torch-distributed runtime from the manifests) with the controller stand-in
playing Kubeflow Trainer and JobSet (tests/standins/controllers.py `_run_trainjob`); then the
real Kubeflow SDK's TrainerClient, unchanged, reads the same job through the lab's
kubeconfig. Skips when the stand-ins are not built or the SDK is not installed."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from lab.backends.cluster import ClusterBackend
from tests.conftest import REPO

pytestmark = [pytest.mark.integration]
NS = "tj-lab"
def report() -> None:
    """A CustomTrainer function: what each node's process sees under torchrun."""
    import os

    print("SDK RANK", os.environ["RANK"], "OF", os.environ["WORLD_SIZE"])


SCRIPT = ("import os; print('NODE', os.environ['PET_NODE_RANK'], 'OF', os.environ['PET_NNODES'],"
          " 'AT', os.environ['PET_MASTER_ADDR'])")


def test_trainjob_on_the_cluster_and_the_sdk_reads_it(world: Any, tmp_path: Path) -> None:
    backend = ClusterBackend(str(tmp_path / "state"), kubeconfig=str(world.kubeconfig),
                             namespace=NS)
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "pets"},
           "spec": {"runtimeRef": {"name": "torch-distributed"},
                    "trainer": {"numNodes": 2, "command": [sys.executable, "-c", SCRIPT]}}}
    out = backend.apply(job, base_dir=tmp_path)
    status = out["status"]
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [
        ("Complete", "AllJobsCompleted")]
    assert status["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0,
                                     "active": 0, "suspended": 0}]
    assert any("NODE 1 OF 2" in line for line in backend.logs("TrainJob", "pets", NS, "node-1"))
    # `kflab ui`'s job page on this backend: each node's pod and phase, read from the cluster
    from lab.webui import views

    page = views.answer(backend, None, "jobs/TrainJob/pets/node-1")
    # an Indexed Job's pods end in the API server's random suffix (docs/conformance.md):
    # `<job>-node-0-<index>-<5 characters>`, found by their labels, never by name
    assert [(r["name"], r["phase"]) for r in page["replica_list"]] == [
        ("node-0", "Succeeded"), ("node-1", "Succeeded")]
    for i, r in enumerate(page["replica_list"]):
        assert re.fullmatch(rf"pets-node-0-{i}-[bcdfghjklmnpqrstvwxz2456789]{{5}}", r["pod"])
    assert page["state"] == "Complete" and page["jobs_status"] == status["jobsStatus"]
    assert any("NODE 1 OF 2" in line for line in page["log"])
    assert "pets" in [r["name"] for r in views.answer(backend, None, "jobs")]

    pytest.importorskip("kubeflow.trainer")
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import TrainerClient

    client = TrainerClient(KubernetesBackendConfig(namespace=NS,
                                                   config_file=str(world.kubeconfig)))
    assert "torch-distributed" in [r.name for r in client.list_runtimes()]
    tj = client.get_job("pets")
    assert (tj.status, tj.num_nodes) == ("Complete", 2)
    assert sorted((s.name, s.status) for s in tj.steps) == [("node-0", "Succeeded"),
                                                            ("node-1", "Succeeded")]
    assert any("NODE 1 OF 2" in line for line in client.get_job_logs("pets", step="node-1"))

    pytest.importorskip("torch")  # the SDK's command runs torchrun on each node
    from kubeflow.trainer import CustomTrainer

    name = client.train(trainer=CustomTrainer(func=report, num_nodes=2))
    done = client.wait_for_job_status(name, timeout=300, polling_interval=1)
    assert (done.status, done.num_nodes) == ("Complete", 2)
    assert any("SDK RANK 1 OF 2" in line for line in client.get_job_logs(name, step="node-1"))


def index_seen() -> None:
    """A CustomTrainer function: the index a `pip install` on this node would use."""
    import os

    print("INDEX", os.environ.get("PIP_INDEX_URL"), os.environ.get("PIP_TRUSTED_HOST"))


def test_the_sdk_step_gives_its_nodes_the_class_index(world: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: the TrainJob lab's SDK step pip-installs scikit-learn on each node; in an
    offline class that must come from the class index `kflab up --bundle` installed, not
    PyPI. The lab's own train_sdk.py (node_env) reads the index through the learner's
    kubeconfig and hands it to the nodes as pip's environment; without one, nothing."""
    pytest.importorskip("kubeflow.trainer")
    pytest.importorskip("torch")
    import importlib.util

    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient

    from lab.backends.cluster.pipelines.index import HOST, URL
    from lab.kube.objects import Ref, delete
    from lab.teaching import pipindex

    spec = importlib.util.spec_from_file_location(
        "train_sdk", REPO / "scenarios/distributed-training-trainjob/assets/train_sdk.py")
    lab_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab_script)
    monkeypatch.setenv("KFLAB_BACKEND", "cluster")
    monkeypatch.setenv("KUBECONFIG", str(world.kubeconfig))
    monkeypatch.delenv("KFLAB_PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("KFLAB_CONTEXT", raising=False)
    kube = world.kube()
    assert lab_script.node_env() is None  # no class index: pip uses PyPI, as anywhere
    pipindex.install(kube, {"image": "localhost/kflab/pip-index:0123456789abcdef",
                            "python": "3.11", "platform": "linux/amd64",
                            "packages": {"scikit-learn": ["1.7.2"]}})
    try:
        env = lab_script.node_env()
        assert env == {"PIP_INDEX_URL": URL, "PIP_TRUSTED_HOST": HOST}
        client = TrainerClient(KubernetesBackendConfig(namespace=NS,
                                                       config_file=str(world.kubeconfig)))
        name = client.train(trainer=CustomTrainer(func=index_seen, num_nodes=1, env=env))
        done = client.wait_for_job_status(name, timeout=300, polling_interval=1)
        assert done.status == "Complete"
        assert f"INDEX {URL} {HOST}" in list(client.get_job_logs(name, step="node-0"))
    finally:
        for kind, api in (("ConfigMap", "v1"), ("Deployment", "apps/v1"), ("Service", "v1")):
            delete(kube, Ref(api, kind, "kflab-pip-index", "kubeflow"), missing_ok=True)
