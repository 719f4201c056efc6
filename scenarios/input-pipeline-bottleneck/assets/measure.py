"""Measure a training loop's two stages apart, then together, in samples per second.

  loading     iterate the pipeline's batches and move them to the device; no model at all
  training    train on one batch already on the device, over and over; no loading at all
  end to end  the real loop: every batch from the pipeline, one training step each

Whichever stage alone is slower bounds the loop: that is the bottleneck. With --baseline
(an earlier measurement of this machine), the speed-up of the end-to-end loop is recorded
too: the baseline's pipeline is timed again now, between two runs of this one, so both are
timed on the machine as it is at this moment (other programs come and go; the load average
is recorded beside it). Every epoch is also checked: each sample once, labels as in
data/labels.csv, images of the right shape -- a faster pipeline must still deliver the same
data.

Usage: python measure.py [--pipeline pipeline.py] [--device cpu|cuda] [--epochs 2]
                         [--baseline before.json] --out before.json
"""

import argparse
import collections
import csv
import importlib.util
import json
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

SHAPE = (1, 16, 16)


def new_model(device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A small fully connected network: 16x16 pixels in, 10 digit scores out."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16 * 16, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def load_pipeline(path: str):
    """Import the pipeline file the learner names (pipeline.py, or their faster copy)."""
    spec = importlib.util.spec_from_file_location("pipeline_under_test", path)
    if spec is None or spec.loader is None or not Path(path).is_file():
        raise SystemExit(f"no pipeline file {path!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "make_loader"):
        raise SystemExit(f"{path} has no make_loader(root, batch_size, device)")
    return module


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def expected_labels(root: str) -> collections.Counter:
    with open(Path(root) / "labels.csv", newline="") as fh:
        return collections.Counter(int(row["label"]) for row in csv.DictReader(fh))


def check_batch(x: torch.Tensor, y: torch.Tensor) -> None:
    if tuple(x.shape[1:]) != SHAPE or x.dtype != torch.float32:
        raise SystemExit(f"the pipeline gave images of shape {tuple(x.shape)} and dtype "
                         f"{x.dtype}; the model needs (batch, 1, 16, 16) float32")
    if y.shape != (x.shape[0],):
        raise SystemExit(f"labels of shape {tuple(y.shape)} for {x.shape[0]} images")


def time_loading(loader, device: torch.device, epochs: int, want: collections.Counter) -> dict:
    samples, t0 = 0, time.perf_counter()
    for epoch in range(epochs):
        seen: collections.Counter = collections.Counter()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            check_batch(x, y)
            seen.update(y.tolist())
            samples += len(y)
        if seen != want:
            raise SystemExit(f"epoch {epoch}: the pipeline gave {sum(seen.values())} samples "
                             f"with labels {dict(sorted(seen.items()))}; data/labels.csv has "
                             f"{sum(want.values())}: every sample must come exactly once")
    sync(device)
    return {"samples_per_s": samples / (time.perf_counter() - t0), "samples": samples}


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor) -> torch.Tensor:
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def time_training(x: torch.Tensor, y: torch.Tensor, device: torch.device, steps: int) -> dict:
    model, opt = new_model(device)
    for _ in range(5):  # warm-up: first calls allocate and pick kernels
        train_step(model, opt, x, y)
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        train_step(model, opt, x, y)
    sync(device)
    return {"samples_per_s": steps * len(y) / (time.perf_counter() - t0), "steps": steps}


def time_end_to_end(loader, device: torch.device, epochs: int) -> dict:
    model, opt = new_model(device)
    samples, losses, t0 = 0, [], time.perf_counter()
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            losses.append(train_step(model, opt, x, y).detach())
            samples += len(y)
    sync(device)
    seconds = time.perf_counter() - t0
    last = torch.stack(losses[-10:]).mean().item()
    return {"samples_per_s": samples / seconds, "seconds": seconds, "last_loss": round(last, 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", default="pipeline.py")
    ap.add_argument("--data", default="data")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--baseline", help="an earlier measurement (JSON) to compare with")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    # One thread: this tiny model gains nothing from more, and the numbers stay comparable
    # when other programs (or DataLoader workers) use the other cores.
    torch.set_num_threads(1)
    device = torch.device(args.device)
    want = expected_labels(args.data)
    module = load_pipeline(args.pipeline)

    t0 = time.perf_counter()
    loader = module.make_loader(args.data, args.batch_size, args.device)
    setup = time.perf_counter() - t0
    x, y = next(iter(loader))  # warm-up (first reads, lazy imports); the batch to train on
    x, y = x.to(device), y.to(device)
    loading = time_loading(loader, device, args.epochs, want)
    steps = max(200, loading["samples"] // len(y))
    training = time_training(x, y, device, steps)
    end_to_end = time_end_to_end(loader, device, args.epochs)

    stages = {"loading": round(loading["samples_per_s"], 1),
              "training": round(training["samples_per_s"], 1)}
    result = {
        "pipeline": Path(args.pipeline).name,
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "samples_per_epoch": sum(want.values()),
        "setup_seconds": round(setup, 3),
        "stages": stages,
        "slowest": min(stages, key=stages.get),
        "end_to_end": round(end_to_end["samples_per_s"], 1),
        "last_loss": end_to_end["last_loss"],
    }
    if args.baseline:
        base = json.loads(Path(args.baseline).read_text())
        result["baseline"] = {k: base[k] for k in ("pipeline", "device", "stages", "slowest",
                                                   "end_to_end", "samples_per_epoch")}
        result["same_device_as_baseline"] = base["device"] == args.device
        # The baseline's loop again, now, then this one again: the ratio of two loops timed at
        # the same moment holds however busy the machine is; the earlier number may not.
        base_file = Path(args.baseline).parent / base["pipeline"]
        if base_file.is_file() and base["device"] == args.device:
            base_loader = load_pipeline(str(base_file)).make_loader(args.data, args.batch_size,
                                                                      args.device)
            # one epoch: samples per second need no more, and the slow loop is the slow part
            base_now = time_end_to_end(base_loader, device, 1)["samples_per_s"]
            again = time_end_to_end(loader, device, args.epochs)["samples_per_s"]
            result["end_to_end"] = round(max(end_to_end["samples_per_s"], again), 1)
            result["baseline"]["end_to_end_now"] = round(base_now, 1)
            result["speedup"] = round(result["end_to_end"] / base_now, 2)
        else:
            result["speedup"] = round(result["end_to_end"] / base["end_to_end"], 2)
        result["load_average"] = [round(x, 2) for x in os.getloadavg()]

    print(f"pipeline {result['pipeline']} on {result['device_name']}, "
          f"batch {args.batch_size}, {args.epochs} epochs of {result['samples_per_epoch']}")
    print(f"  {'stage':<12}{'samples/s':>12}")
    for name, value in stages.items():
        print(f"  {name:<12}{value:>12,.0f}" + ("   <- slowest" if name == result["slowest"]
                                               else ""))
    print(f"  {'end to end':<12}{result['end_to_end']:>12,.0f}")
    print(f"  setup (make_loader) took {result['setup_seconds']:.2f} s")
    if "speedup" in result:
        b = result["baseline"]
        print(f"  end to end is {result['speedup']:.2f}x the baseline "
              f"({b['pipeline']}: {b.get('end_to_end_now', b['end_to_end']):,.0f}, "
              + ("timed again just now" if "end_to_end_now" in b else "from the baseline file")
              + f"; load average {result['load_average'][0]:.2f})")
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
