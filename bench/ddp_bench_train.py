"""A compute-bound DDP training job for bench/ddp_scaling.py (synthetic data, bf16 autocast).

A residual stack of 3x3 convolutions on 32x32 maps: many FLOPs per parameter, so gradient
exchange stays small next to compute and scaling measures the launcher, not the network.
Runs unchanged under `kflab apply` (RANK/WORLD_SIZE/MASTER_* from the PyTorchJob contract,
one GPU per replica) and under `torchrun` (LOCAL_RANK picks the GPU).
Rank 0 prints `BENCH {json}` and writes --out.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.bn(self.conv(x)))


def model(ch: int, depth: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, ch, 3, padding=1), *[Block(ch) for _ in range(depth)],
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(ch, 1000))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256, help="per GPU")
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default="bench.json")
    args = ap.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    torch.backends.cudnn.benchmark = True
    net = model(args.channels, args.depth).cuda().to(memory_format=torch.channels_last)
    net = DDP(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, 32, 32, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    seconds = time.perf_counter() - t0
    params = sum(p.numel() for p in net.parameters())
    if rank == 0:
        out = {"world_size": world, "samples_per_s": args.batch * world * args.steps / seconds,
               "seconds": seconds, "steps": args.steps, "batch_per_gpu": args.batch,
               "params": params, "device": torch.cuda.get_device_name()}
        print("BENCH " + json.dumps(out), flush=True)
        with open(args.out, "w") as fh:
            json.dump(out, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
