"""DDP training of a small CNN on scikit-learn's bundled digits (8x8 images, offline).

Unchanged between a laptop, `kflab apply` and a cluster: it reads the environment the
Training Operator gives each replica (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK) and falls
back to a single process when those are absent. gloo on CPU, NCCL when a GPU is visible.
Every rank prints one `RESULT {...}` line; rank 0 also writes --out (JSON).
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=32, help="per process")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--out", default="result.json")
    args = ap.parse_args()

    distributed = "WORLD_SIZE" in os.environ and "RANK" in os.environ
    cuda = torch.cuda.is_available()
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    torch.manual_seed(0)
    torch.set_num_threads(1)

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x / 16.0, y, test_size=0.25, random_state=0,
                                              stratify=y)
    to_t = lambda a: torch.tensor(a, dtype=torch.float32).view(-1, 1, 8, 8)  # noqa: E731
    x_tr, x_te = to_t(x_tr).to(device), to_t(x_te).to(device)
    y_tr, y_te = torch.tensor(y_tr).to(device), torch.tensor(y_te).to(device)
    shard = torch.arange(rank, len(x_tr), world)  # this rank's share of the data

    model = SmallCNN().to(device)
    if distributed:
        model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    t0 = time.time()
    for epoch in range(args.epochs):
        gen = torch.Generator().manual_seed(epoch)
        order = shard[torch.randperm(len(shard), generator=gen)]
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size].to(device)
            opt.zero_grad()
            F.cross_entropy(model(x_tr[idx]), y_tr[idx]).backward()
            opt.step()
    with torch.no_grad():
        acc = (model(x_te).argmax(1) == y_te).float().mean().item()
    result = {"rank": rank, "world_size": world, "accuracy": round(acc, 4),
              "samples": len(shard) * args.epochs, "seconds": round(time.time() - t0, 2),
              "backend": dist.get_backend() if distributed else "none"}
    print("RESULT " + json.dumps(result), flush=True)
    if distributed:
        ranks: list = [None] * world
        dist.all_gather_object(ranks, result)
    else:
        ranks = [result]
    if rank == 0:
        summary = {"world_size": world, "accuracy": round(acc, 4),
                   "ranks": sorted(r["rank"] for r in ranks), "per_rank": ranks}
        with open(args.out, "w") as fh:
            json.dump(summary, fh, indent=2)
    if distributed:
        dist.barrier()  # no peer tears down its connections while another still uses them
        dist.destroy_process_group()
        if rank == 0 and world > 1:
            # After the workers exit, torchrun's agents meet once more (an exit barrier) in a
            # store that node 0's agent serves; node 0 leaving last keeps it up until the other
            # nodes have their answer (otherwise they log "Error waiting on exit barrier").
            time.sleep(1)


if __name__ == "__main__":
    main()
