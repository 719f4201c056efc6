"""Real distributed PyTorch on CPU through the local PyTorchJob backend: DDP with gloo from
the operator's env (MASTER_*, RANK, WORLD_SIZE), and torchrun reading the PET_* family."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend

REPO = Path(__file__).resolve().parents[2]
ALLREDUCE = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1])
dist.all_reduce(t)
print("SUM", dist.get_rank(), dist.get_world_size(), int(t), os.environ["PET_NNODES"], flush=True)
dist.destroy_process_group()
"""


def spec(n: int, argv: list[str], policy: str = "Never") -> dict:
    return {"replicas": n, "restartPolicy": policy, "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "python:3.11-slim", "command": argv}]}}}


@pytest.mark.slow
def test_ddp_digits_master_and_worker_on_cpu(state: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "scenarios/distributed-training/assets/train_ddp.py", tmp_path)
    argv = ["python", "train_ddp.py", "--epochs", "4", "--out", "r.json"]
    backend = LocalBackend(str(state))
    obj = backend.apply({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                         "metadata": {"name": "ddp"},
                         "spec": {"pytorchReplicaSpecs": {"Master": spec(1, argv),
                                                          "Worker": spec(1, argv)}}},
                        base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded", obj["status"]
    results = [json.loads(line.split("RESULT ", 1)[1])
               for line in backend.logs("PyTorchJob", "ddp") if "RESULT " in line]
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert {(r["world_size"], r["backend"]) for r in results} == {(2, "gloo")}
    assert len({r["accuracy"] for r in results}) == 1, "DDP keeps the replicas identical"
    assert json.loads((tmp_path / "r.json").read_text())["accuracy"] > 0.8


@pytest.mark.slow
def test_elastic_workers_rendezvous_with_torchrun(state: Path, tmp_path: Path) -> None:
    """Workers only, elasticPolicy: torchrun takes nnodes, rdzv endpoint and nproc from the
    PET_* variables the operator sets; no rendezvous flag is given on the command line."""
    (tmp_path / "allreduce.py").write_text(ALLREDUCE)
    backend = LocalBackend(str(state))
    obj = backend.apply({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                         "metadata": {"name": "elastic"},
                         "spec": {"nprocPerNode": "1",
                                  "elasticPolicy": {"minReplicas": 2, "maxReplicas": 2,
                                                    "maxRestarts": 1},
                                  "pytorchReplicaSpecs": {"Worker": spec(
                                      2, ["torchrun", "allreduce.py"], "OnFailure")}}},
                        base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded", obj["status"]
    sums = sorted(line.split("SUM ", 1)[1] for line in backend.logs("PyTorchJob", "elastic")
                  if "SUM " in line)
    assert sums == ["0 2 3 2:2", "1 2 3 2:2"]
