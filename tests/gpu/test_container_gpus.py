"""GPUs for replicas in containers: the GPU ledger's ids reach the engine (Podman: CDI devices
`nvidia.com/gpu=ID`; Docker: `--gpus "device=ID"`), and each replica sees only its own GPU.
Needs an NVIDIA GPU, a running container engine that can give it GPUs (Podman with an
NVIDIA CDI spec from `nvidia-ctk cdi generate`, or Docker with the NVIDIA Container Toolkit)
and an image kflab does not run as a process (here the python test image of
scripts/standins/25-workload-images.sh); the driver's CDI spec puts nvidia-smi in it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.backends.local.containers import engine
from lab.backends.local.training.env import visible_gpus

GPUS = visible_gpus()
IMAGE = "localhost/kflab-python:bookworm"
CDI_SPECS = (Path("/etc/cdi"), Path("/var/run/cdi"))
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not GPUS, reason="needs an NVIDIA GPU: none visible")]


def gpu_engine() -> engine.Engine:
    found = engine.current()
    if found is None or not found.running:
        pytest.skip("needs a running container engine (Podman or Docker)")
    if found.name == "podman" and not any(p.is_dir() and any(p.glob("nvidia*.yaml"))
                                          for p in CDI_SPECS):
        pytest.skip("Podman needs an NVIDIA CDI spec (`sudo nvidia-ctk cdi generate "
                    "--output=/etc/cdi/nvidia.yaml`)")
    if found.name == "docker" and shutil.which("nvidia-container-runtime") is None:
        pytest.skip("Docker needs the NVIDIA Container Toolkit")
    if found.run("image", "exists" if found.name == "podman" else "inspect",
                 IMAGE).returncode != 0:
        pytest.skip(f"{IMAGE} is not built (scripts/standins/25-workload-images.sh)")
    return found


def test_each_replica_container_sees_its_own_gpu(state: Path, tmp_path: Path) -> None:
    if len(GPUS) < 2:
        pytest.skip("needs two GPUs")
    gpu_engine()

    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": IMAGE, "command": ["nvidia-smi", "-L"],
             "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}

    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "gpus", "namespace": "default"},
           "spec": {"pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(1)}}}
    backend = LocalBackend(str(state))
    obj = backend.apply(job, base_dir=tmp_path)
    logs = list(backend.logs("PyTorchJob", "gpus"))
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded", logs
    seen = {ln.split("] ")[0][1:]: ln for ln in logs if "GPU " in ln}
    assert sorted(seen) == ["master-0", "worker-0"], logs  # one GPU each
    assert seen["master-0"].split("(UUID: ")[1] != seen["worker-0"].split("(UUID: ")[1]
