"""The same DDP training, submitted with the Kubeflow SDK: TrainerClient.train(CustomTrainer(
func=train_digits, num_nodes=N)). The SDK turns the function into a TrainJob on the
torch-distributed runtime; every node runs it under torchrun.

Where it runs: on a cluster, the SDK's own TrainerClient with the lab's kubeconfig; on
kflab's local backend, lab.sdk.trainer_client(), the same client answered by the local
backend. Everything after that line is identical.
"""

import argparse
import json
import os
from pathlib import Path

from kubeflow.trainer import CustomTrainer


def train_digits(epochs: int = 15, batch_size: int = 32, lr: float = 0.05) -> None:
    """Runs on every node (one process per node here), under torchrun."""
    import json
    import os
    import subprocess
    import sys
    import time

    try:
        import sklearn  # noqa: F401 - the data set ships with scikit-learn
    except ImportError:  # the runtime's image has torch only: a pod installs it first, from
        # the lab's package index when node_env() gave one (pip reads PIP_INDEX_URL)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "scikit-learn"],
                       check=True)

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from torch.nn.parallel import DistributedDataParallel as DDP

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 16, 3, padding=1)
            self.fc = nn.Linear(16 * 4 * 4, 10)

        def forward(self, x):
            return self.fc(F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1))

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x / 16.0, y, test_size=0.25, random_state=0,
                                              stratify=y)

    def to_t(a):
        return torch.tensor(a, dtype=torch.float32).view(-1, 1, 8, 8).to(device)

    x_tr, x_te = to_t(x_tr), to_t(x_te)
    y_tr, y_te = torch.tensor(y_tr).to(device), torch.tensor(y_te).to(device)
    shard = torch.arange(rank, len(x_tr), world)
    model = DDP(SmallCNN().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    t0 = time.time()
    for epoch in range(epochs):
        order = shard[torch.randperm(len(shard), generator=torch.Generator().manual_seed(epoch))]
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size].to(device)
            opt.zero_grad()
            F.cross_entropy(model(x_tr[idx]), y_tr[idx]).backward()
            opt.step()
    with torch.no_grad():
        acc = (model(x_te).argmax(1) == y_te).float().mean().item()
    print("RESULT " + json.dumps({"rank": rank, "world_size": world, "accuracy": round(acc, 4),
                                  "samples": len(shard) * epochs,
                                  "seconds": round(time.time() - t0, 2),
                                  "backend": dist.get_backend()}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def client_for_this_lab():
    """The one line that differs between a cluster and kflab's local backend."""
    if os.environ.get("KFLAB_BACKEND") == "cluster":
        from kubeflow.common.types import KubernetesBackendConfig
        from kubeflow.trainer import TrainerClient

        return TrainerClient(KubernetesBackendConfig(
            namespace=os.environ.get("KFLAB_NAMESPACE", "kflab-lab"),
            config_file=os.environ.get("KUBECONFIG"), context=os.environ.get("KFLAB_CONTEXT")))
    from lab.sdk import trainer_client

    return trainer_client()


def node_env() -> dict[str, str] | None:
    """On a cluster: the lab's package index for train_digits' `pip install` (an offline
    class's cluster has no PyPI); None here, where nothing is installed."""
    if os.environ.get("KFLAB_BACKEND") != "cluster":
        return None
    from lab.sdk import pip_env

    return pip_env(os.environ.get("KUBECONFIG"), os.environ.get("KFLAB_CONTEXT")) or None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--out", default="result-sdk.json")
    args = ap.parse_args()
    client = client_for_this_lab()
    name = client.train(trainer=CustomTrainer(func=train_digits,
                                              func_args={"epochs": args.epochs},
                                              num_nodes=args.nodes, env=node_env()))
    print(f"TrainJob {name} created; waiting for it to complete")
    job = client.wait_for_job_status(name, timeout=900, polling_interval=2)
    results = [json.loads(line.split("RESULT ", 1)[1])
               for step in job.steps if step.name.startswith("node")
               for line in client.get_job_logs(name, step=step.name) if "RESULT " in line]
    first = min(results, key=lambda r: r["rank"])
    summary = {"trainjob": name, "status": job.status, "num_nodes": job.num_nodes,
               "world_size": first["world_size"], "accuracy": first["accuracy"],
               "ranks": sorted(r["rank"] for r in results), "per_rank": results}
    Path(args.out).write_text(json.dumps(summary, indent=2))
    print(f"{job.status}: {len(results)} ranks, accuracy {first['accuracy']}; wrote {args.out}")


if __name__ == "__main__":
    main()
