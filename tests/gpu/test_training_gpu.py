"""PyTorchJob on GPUs (local backend): GPU limits become non-overlapping
CUDA_VISIBLE_DEVICES, NCCL DDP works across replicas. Skips without an NVIDIA GPU."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.backends.local.training.env import visible_gpus
from lab.errors import LabError

REPO = Path(__file__).resolve().parents[2]
GPUS = visible_gpus()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not GPUS, reason="needs an NVIDIA GPU: none visible "
                                 "(no CUDA_VISIBLE_DEVICES, /proc/driver/nvidia or nvidia-smi)")]

PROBE = ("import json, os, torch; print('PROBE ' + json.dumps({"
         "'cvd': os.environ.get('CUDA_VISIBLE_DEVICES'), 'count': torch.cuda.device_count(), "
         "'bus': str(torch.cuda.get_device_properties(0).uuid) if torch.cuda.is_available() "
         "else None, 'rank': os.environ.get('RANK')}))")


def job(name: str, workers: int, argv: list[str], gpus: int = 1) -> dict:
    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "command": argv,
             "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}

    specs = {"Master": spec(1)}
    if workers:
        specs["Worker"] = spec(workers)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": specs}}


def probes(backend: LocalBackend, name: str) -> list[dict]:
    return [json.loads(line.split("PROBE ", 1)[1])
            for line in backend.logs("PyTorchJob", name) if "PROBE " in line]


def test_each_replica_sees_only_its_own_gpus(state: Path, tmp_path: Path) -> None:
    workers = min(len(GPUS), 4) - 1
    backend = LocalBackend(str(state))
    obj = backend.apply(job("probe", workers, [sys.executable, "-c", PROBE]), base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded"
    seen = probes(backend, "probe")
    assert len(seen) == workers + 1
    assert all(p["count"] == 1 for p in seen), seen
    assert len({p["cvd"] for p in seen}) == len(seen), "CUDA_VISIBLE_DEVICES overlap"
    assert len({p["bus"] for p in seen}) == len(seen), "two replicas share a physical GPU"


def test_replica_without_gpu_limit_sees_no_gpu(state: Path, tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    backend.apply(job("nogpu", 0, [sys.executable, "-c", PROBE], gpus=0), base_dir=tmp_path)
    assert probes(backend, "nogpu")[0]["count"] == 0


def test_asking_more_gpus_than_exist_is_refused(state: Path, tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    with pytest.raises(LabError, match=f"asks for {len(GPUS) + 1} GPU"):
        backend.apply(job("greedy", len(GPUS), [sys.executable, "-c", "pass"]),
                      base_dir=tmp_path)
    assert backend.get("PyTorchJob", "greedy") is None, "nothing half-applied"


@pytest.mark.skipif(len(GPUS) < 3, reason="NCCL DDP with 3 replicas needs 3 GPUs")
def test_ddp_digits_with_nccl_on_three_gpus(state: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "scenarios/distributed-training/assets/train_ddp.py", tmp_path)
    backend = LocalBackend(str(state))
    obj = backend.apply(job("digits-nccl", 2, [sys.executable, "train_ddp.py", "--epochs",
                                               "10", "--out", "r.json"]), base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded", obj["status"]
    results = [json.loads(line.split("RESULT ", 1)[1])
               for line in backend.logs("PyTorchJob", "digits-nccl") if "RESULT " in line]
    assert sorted(r["rank"] for r in results) == [0, 1, 2]
    assert {r["backend"] for r in results} == {"nccl"}
    assert json.loads((tmp_path / "r.json").read_text())["accuracy"] >= 0.9
