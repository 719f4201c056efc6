"""N peers train one model on scikit-learn's bundled digits, two ways (offline, CPU, gloo).

  --mode ddp       synchronous data parallel: after EVERY step the peers all-reduce their
                   gradients (DistributedDataParallel), so they always hold one model.
  --mode average   parameter averaging: each peer takes --every local steps on its own
                   share of the data, then the peers all-reduce their PARAMETERS and divide
                   by N -- one averaging round. Between rounds the peers drift apart.

What is measured, by every peer, the same way for both modes:
  - bytes handed to all-reduce for training (DDP's gradient buckets through a communication
    hook; the parameter vector of each averaging round) -- the payload per peer;
  - the training loss of peer 0's model on the whole training set, against wall time;
  - how far the peers' parameters are apart, before and after the last averaging round,
    comparing the real tensors (an all-gather used for this measurement only, not counted).

It reads the environment the Training Operator gives each replica (MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK) and trains alone without it. Every peer prints one
`RESULT {...}` line; peer 0 writes --out (JSON).
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
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils import parameters_to_vector, vector_to_parameters

HIDDEN = 128


def make_model() -> nn.Module:
    """64 pixels in, one hidden layer, 10 digit scores out (same weights on every peer)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))


class Counter:
    """Bytes and calls of the all-reduces that training makes."""

    def __init__(self) -> None:
        self.bytes = 0
        self.calls = 0

    def add(self, tensor: torch.Tensor) -> None:
        self.bytes += tensor.numel() * tensor.element_size()
        self.calls += 1


def counting_hook(counter: Counter, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's own all-reduce of a gradient bucket, counted on the way."""
    counter.add(bucket.buffer())
    return allreduce_hook(None, bucket)


def spread(flat: torch.Tensor, world: int) -> float:
    """Largest difference between any peer's parameters and peer 0's (real tensors)."""
    if world == 1:
        return 0.0
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    return max((p - everyone[0]).abs().max().item() for p in everyone)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ddp", "average"], required=True)
    ap.add_argument("--every", type=int, default=8, help="local steps between averaging rounds")
    ap.add_argument("--steps", type=int, default=240, help="training steps of each peer")
    ap.add_argument("--batch-size", type=int, default=32, help="per peer")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--target-loss", type=float, default=0.15)
    ap.add_argument("--out", default="result.json")
    args = ap.parse_args()
    every = args.every if args.mode == "average" else 1
    if every < 1 or args.steps % every:
        raise SystemExit(f"--steps ({args.steps}) must be a multiple of --every ({every})")

    distributed = "WORLD_SIZE" in os.environ and "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    torch.set_num_threads(1)  # N peers share this machine's cores

    x, y = load_digits(return_X_y=True)
    x_tr, _, y_tr, _ = train_test_split(x / 16.0, y, test_size=0.25, random_state=0, stratify=y)
    x_tr, y_tr = torch.tensor(x_tr, dtype=torch.float32), torch.tensor(y_tr)
    shard = torch.arange(rank, len(x_tr), world)  # this peer's share of the data

    model = make_model()
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    counter = Counter()
    if distributed and args.mode == "ddp":
        net = DDP(model)  # broadcasts peer 0's weights once (not counted: set-up)
        net.register_comm_hook(counter, counting_hook)
    else:
        net = model
        if distributed:  # the same starting point, once (not counted: set-up)
            flat = parameters_to_vector(params)
            dist.broadcast(flat, 0)
            vector_to_parameters(flat, params)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)

    def average() -> None:
        """One averaging round: every peer ends with the mean of all peers' parameters."""
        with torch.no_grad():
            flat = parameters_to_vector(params)
            counter.add(flat)
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            flat /= world
            vector_to_parameters(flat, params)

    gen = torch.Generator().manual_seed(1000 + rank)
    curve, before_last = [], None
    if distributed:
        dist.barrier()
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        idx = shard[torch.randint(0, len(shard), (args.batch_size,), generator=gen)]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x_tr[idx]), y_tr[idx]).backward()
        opt.step()
        if step % every == 0 and args.mode == "average" and distributed:
            if step == args.steps:  # measurement only: how far apart before the last round
                before_last = spread(parameters_to_vector(params).detach(), world)
            average()
        if step % 8 == 0:  # the same evaluation points for both modes
            seconds = time.perf_counter() - t0
            with torch.no_grad():
                loss = F.cross_entropy(model(x_tr), y_tr).item()
            curve.append([step, round(seconds, 4), round(loss, 4)])
    seconds = time.perf_counter() - t0
    after = spread(parameters_to_vector(params).detach(), world)

    hit = next((point for point in curve if point[2] <= args.target_loss), None)
    result = {
        "mode": args.mode, "rank": rank, "world_size": world, "every": every,
        "steps": args.steps, "batch_size": args.batch_size, "parameters": n_params,
        "bytes_total": counter.bytes, "allreduce_calls": counter.calls,
        "bytes_per_step": counter.bytes / args.steps,
        "seconds": round(seconds, 3), "target_loss": args.target_loss,
        "final_loss": curve[-1][2], "reached_target": hit is not None,
        "steps_to_target": hit[0] if hit else None,
        "seconds_to_target": hit[1] if hit else None,
        "max_param_diff_before_last_round": before_last,
        "max_param_diff_after": after,
    }
    print("RESULT " + json.dumps(result), flush=True)
    if rank == 0:
        with open(args.out, "w") as fh:
            json.dump({**result, "curve": curve}, fh, indent=2)
    if distributed:
        dist.barrier()  # no peer tears down its connections while another still uses them
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
