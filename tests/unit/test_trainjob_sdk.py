"""The real Kubeflow SDK (kubeflow 0.5.0) drives a multi-node TrainJob on the local backend:
TrainerClient.train(CustomTrainer(func, num_nodes=2)) builds the TrainJob with the SDK's own
code; kflab runs it. Skips when the sdk extra is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("kubeflow.trainer")
pytest.importorskip("torch")

from kubeflow.trainer import CustomTrainer

from lab.sdk import trainer_client


def report() -> None:
    import os

    print("NODE", os.environ["PET_NODE_RANK"], "OF", os.environ["PET_NNODES"],
          "RANK", os.environ["RANK"], "WORLD", os.environ["WORLD_SIZE"])


def test_train_wait_logs_and_delete(state: Path, tmp_path: Path) -> None:
    client = trainer_client(state=str(state))
    assert [r.name for r in client.list_runtimes()] == ["torch-distributed"]
    name = client.train(trainer=CustomTrainer(func=report, num_nodes=2))
    job = client.wait_for_job_status(name, timeout=120, polling_interval=1)
    assert (job.status, job.num_nodes) == ("Complete", 2)
    assert [(s.name, s.status) for s in job.steps] == [("node-0", "Succeeded"),
                                                       ("node-1", "Succeeded")]
    assert any("NODE 1 OF 2 RANK 1 WORLD 2" in line
               for line in client.get_job_logs(name, step="node-1"))
    stored = client.backend.custom_api.backend.get("TrainJob", name, "default")
    assert stored["spec"]["trainer"]["command"][:2] == ["bash", "-c"]  # the SDK's command
    assert not (Path.cwd() / "test_trainjob_sdk.py").exists()  # ran in the job's folder
    client.delete_job(name)
    assert client.list_jobs() == []
