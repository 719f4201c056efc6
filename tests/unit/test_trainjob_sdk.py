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


def ticking() -> None:
    """Prints a line a second for a few seconds (a training loop's progress)."""
    import time

    for i in range(6):
        print(f"tick {i}", flush=True)
        time.sleep(1)


def test_get_job_logs_follow_streams_while_the_job_runs(state: Path) -> None:
    """Issue 36: get_job_logs(name, follow=True) yielded nothing or raised "Failed to read
    logs for the pod": the SDK reads the log through kubernetes.watch.Watch().stream(
    core_api.read_namespaced_pod_log, follow=True) (backends/kubernetes/backend.py
    _read_pod_logs), which passes _preload_content=False and reads the response's
    stream(). Lines must arrive while the node still runs."""
    import time

    client = trainer_client(state=str(state))
    name = client.train(trainer=CustomTrainer(func=ticking, num_nodes=1))
    client.wait_for_job_status(name, status={"Running"}, timeout=120, polling_interval=1)
    lines, first_at, running_then = [], None, None
    for line in client.get_job_logs(name, follow=True):
        lines.append(line)
        if first_at is None and "tick 0" in line:
            first_at = time.monotonic()
            running_then = client.get_job(name).status
    done_at = time.monotonic()
    assert [f"tick {i}" for i in range(6)] == [ln for ln in lines if ln.startswith("tick")]
    assert running_then == "Running" and done_at - first_at >= 3, (running_then, lines)
    assert client.get_job(name).status == "Complete"  # the stream ends with the job
    client.delete_job(name)


def train_fashion_mnist_on_cpu() -> None:
    """The upstream notebook's training function (examples/pytorch/image-classification/
    mnist.ipynb at Trainer v2.1.0), with random 28x28 images in place of FashionMNIST:
    this machine cannot download the dataset, and torchvision is not in kflab's lock."""
    import os

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 20, 5, 1)
            self.conv2 = nn.Conv2d(20, 50, 5, 1)
            self.fc1 = nn.Linear(4 * 4 * 50, 500)
            self.fc2 = nn.Linear(500, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.max_pool2d(x, 2, 2)
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2, 2)
            x = x.view(-1, 4 * 4 * 50)
            x = F.relu(self.fc1(x))
            return F.log_softmax(self.fc2(x), dim=1)

    device, backend = ("cuda", "nccl") if torch.cuda.is_available() else ("cpu", "gloo")
    print(f"Using Device: {device}, Backend: {backend}")
    local_rank = int(os.getenv("LOCAL_RANK", 0))
    dist.init_process_group(backend=backend)
    print(f"Distributed Training for WORLD_SIZE: {dist.get_world_size()}, "
          f"RANK: {dist.get_rank()}, LOCAL_RANK: {local_rank}")
    model = nn.parallel.DistributedDataParallel(Net().to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(0)
    dataset = TensorDataset(torch.rand(300, 1, 28, 28), torch.randint(0, 10, (300,)))
    loader = DataLoader(dataset, batch_size=100, sampler=DistributedSampler(dataset))
    dist.barrier()
    for epoch in range(1, 3):
        model.train()
        for inputs, labels in loader:
            loss = F.nll_loss(model(inputs.to(device)), labels.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"Epoch {epoch} loss {loss.item():.4f}")
    dist.destroy_process_group()


def test_the_trainer_mnist_notebooks_calls(state: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    """Every TrainerClient call of Trainer v2.1.0's examples/pytorch/image-classification/
    mnist.ipynb (the 'Scale PyTorch DDP with Kubeflow TrainJob' cells, as written, with
    `trainer_client()` for `TrainerClient()`), and the calls the other notebooks add
    (list_jobs, get_runtime, get_runtime_packages, wait_for_job_status to the end)."""
    client = trainer_client(state=str(state))
    torch_runtime = None
    for runtime in client.list_runtimes():
        print(runtime)
        if runtime.name == "torch-distributed":
            torch_runtime = runtime
    assert torch_runtime is not None
    job_name = client.train(
        trainer=CustomTrainer(
            func=train_fashion_mnist_on_cpu,
            num_nodes=3,
            resources_per_node={"cpu": 3, "memory": "16Gi"},
        ),
        runtime=torch_runtime,
    )
    client.wait_for_job_status(name=job_name, status={"Running"}, timeout=180)
    steps = []
    for c in client.get_job(name=job_name).steps:
        print(f"Step: {c.name}, Status: {c.status}, Devices: {c.device} x {c.device_count}\n")
        steps.append((c.name, c.device, c.device_count))
    assert steps == [("node-0", "cpu", "3"), ("node-1", "cpu", "3"), ("node-2", "cpu", "3")]
    logged = []
    for logline in client.get_job_logs(job_name, follow=True):
        print(logline)
        logged.append(logline)
    # 3 nodes x 3 processes: Trainer's torch plugin sets numProcPerNode "auto" to the
    # node's CPUs when it has no GPU (as on a cluster)
    assert "Distributed Training for WORLD_SIZE: 9, RANK: 0, LOCAL_RANK: 0" in logged
    assert any(line.startswith("Epoch 2 loss") for line in logged), logged
    assert [j.name for j in client.list_jobs()] == [job_name]
    job = client.wait_for_job_status(job_name, timeout=180)
    assert job.status == "Complete"
    assert client.get_runtime(name="torch-distributed").name == "torch-distributed"
    capsys.readouterr()
    client.get_runtime_packages(torch_runtime)  # a one-node job printing `pip list`
    assert "Python: 3." in capsys.readouterr().out
    client.delete_job(job_name)
    assert client.list_jobs() == []
