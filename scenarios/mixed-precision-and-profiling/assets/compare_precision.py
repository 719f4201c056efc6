"""Train the same model twice -- float32, then bfloat16 mixed precision -- and compare.

Both runs start from the same weights and see the same batches, one step of each in turn.
For each: the median time of a training step, the test accuracy, and the dtype the first
layer's matrix multiply really produced during a step (so a bf16 run that silently stayed in
float32 shows).

Usage: python compare_precision.py [--device cpu|cuda] [--hidden N] [--batch-size N]
                                   [--steps 80]
                                   [--out amp-cpu.json]
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from model import accuracy, data, make_model, train_step


class Run:
    """One model, its optimizer, and what was measured of it."""

    def __init__(self, bf16: bool, args: argparse.Namespace, device: torch.device) -> None:
        self.bf16 = bf16
        self.model = make_model(args.hidden, device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9)
        self.times: list[float] = []
        self.losses: list[torch.Tensor] = []
        self.seen: list[torch.dtype] = []
        self.hook = self.model[0].register_forward_hook(
            lambda _m, _i, out: self.seen.append(out.dtype))

    def step(self, x: torch.Tensor, y: torch.Tensor, timed: bool) -> None:
        sync(x.device)
        t0 = time.perf_counter()
        loss = train_step(self.model, self.opt, x, y, bf16=self.bf16)
        sync(x.device)
        if timed:
            self.times.append(time.perf_counter() - t0)
        self.losses.append(loss)
        self.hook.remove()  # the first step's dtype is enough

    def report(self, x_te: torch.Tensor, y_te: torch.Tensor) -> dict:
        return {"step_ms": round(statistics.median(self.times) * 1000, 3),
                "accuracy": round(accuracy(self.model, x_te, y_te, bf16=self.bf16), 4),
                "final_loss": round(torch.stack(self.losses[-10:]).float().mean().item(), 4),
                "matmul_dtype": str(self.seen[0]) if self.seen else "unknown"}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--hidden", type=int, help="layer width (default: 256 on cpu, 4096 on cuda)")
    ap.add_argument("--batch-size", type=int,
                    help="samples per step (default: 128 on cpu, 1024 on cuda)")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--out", default="amp-cpu.json")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    if args.device == "cuda" and torch.cuda.get_device_capability() < (8, 0):
        major, minor = torch.cuda.get_device_capability()
        raise SystemExit(f"--device cuda: bf16 needs a GPU of compute capability 8.0 or newer "
                         f"(Ampere, Ada, Hopper...); {torch.cuda.get_device_name()} has "
                         f"{major}.{minor}: compare on the CPU instead (--device cpu)")
    device = torch.device(args.device)
    # One CPU thread: matrices this small gain little from more, and on a busy machine
    # threads that wait on each other make every figure noisy.
    torch.set_num_threads(1)
    args.hidden = args.hidden or (4096 if args.device == "cuda" else 256)
    args.batch_size = args.batch_size or (1024 if args.device == "cuda" else 128)
    x_tr, y_tr, x_te, y_te = data(device)
    fp32, bf16 = Run(False, args, device), Run(True, args, device)
    gen = torch.Generator().manual_seed(1)
    for step in range(args.steps):
        idx = torch.randint(0, len(x_tr), (args.batch_size,), generator=gen).to(device)
        # Alternate the two runs step by step, on the same batch: whatever else the machine
        # does meanwhile slows both alike. The first steps allocate and pick kernels: untimed.
        for r in (fp32, bf16):
            r.step(x_tr[idx], y_tr[idx], timed=step >= 5)
    fp32, bf16 = fp32.report(x_te, y_te), bf16.report(x_te, y_te)
    result = {"device": args.device,
              "device_name": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "hidden": args.hidden, "batch_size": args.batch_size, "steps": args.steps,
              "fp32": fp32, "bf16": bf16,
              "speedup": round(fp32["step_ms"] / bf16["step_ms"], 3),
              "accuracy_gap": round(abs(fp32["accuracy"] - bf16["accuracy"]), 4)}
    print(f"{'run':<6}{'step ms':>10}{'accuracy':>10}{'matmul dtype':>16}")
    for name in ("fp32", "bf16"):
        r = result[name]
        print(f"{name:<6}{r['step_ms']:>10.3f}{r['accuracy']:>10.4f}{r['matmul_dtype']:>16}")
    print(f"bf16 step time is {result['speedup']:.2f}x faster than fp32 "
          f"(below 1: slower) on {result['device_name']}; accuracy gap "
          f"{result['accuracy_gap']:.4f}")
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
