"""The worker of bench/trainjob_launch.py: prints when each start-up phase ended (wall clock).

`PROBE {json}` on rank 0: `start` (first line, before torch), `torch` (imported), `cuda`
(device ready; equal to `torch` on a CPU), `group` (init_process_group done), `done` (a few
steps and a barrier). The launcher's own times come from the bench.
"""

import time

T = {"start": time.time()}

import json  # noqa: E402 - after the first timestamp on purpose
import os  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

T["torch"] = time.time()
cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES") != ""
if cuda:
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    torch.ones(1, device="cuda")
T["cuda"] = time.time()
dist.init_process_group("nccl" if cuda else "gloo")
T["group"] = time.time()
device = "cuda" if cuda else "cpu"
w = torch.randn(256, 256, device=device)
for _ in range(10):
    w = torch.tanh(w @ w)
dist.all_reduce(w)
dist.barrier()
T["done"] = time.time()
if dist.get_rank() == 0:
    print("PROBE " + json.dumps({**T, "world": dist.get_world_size(), "device": device}),
          flush=True)
dist.destroy_process_group()
