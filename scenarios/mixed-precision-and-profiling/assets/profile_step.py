"""Profile training steps with torch.profiler: the operators that took the time, and a trace.

Writes --trace (a Chrome trace: open it in Perfetto or chrome://tracing) and --out (JSON:
the operators sorted by their own time, the first being the top operator), and prints the
profiler's table.

Usage: python profile_step.py [--device cpu|cuda] [--hidden N] [--batch-size N] [--steps 10]
                              [--trace trace.json] [--out profile.json]
"""

import argparse
import json
from pathlib import Path

import torch
from model import data, make_model, train_step
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--hidden", type=int, help="layer width (default: 256 on cpu, 4096 on cuda)")
    ap.add_argument("--batch-size", type=int,
                    help="samples per step (default: 128 on cpu, 1024 on cuda)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--bf16", action="store_true", help="profile the mixed-precision step")
    ap.add_argument("--trace", default="trace.json")
    ap.add_argument("--out", default="profile.json")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    if args.device == "cuda" and args.bf16 and torch.cuda.get_device_capability() < (8, 0):
        major, minor = torch.cuda.get_device_capability()
        raise SystemExit(f"--bf16 on cuda needs a GPU of compute capability 8.0 or newer "
                         f"(Ampere, Ada, Hopper...); {torch.cuda.get_device_name()} has "
                         f"{major}.{minor}")
    device = torch.device(args.device)
    # One CPU thread: matrices this small gain little from more, and on a busy machine
    # threads that wait on each other make every figure noisy.
    torch.set_num_threads(1)
    hidden = args.hidden or (4096 if args.device == "cuda" else 256)
    batch = args.batch_size or (1024 if args.device == "cuda" else 128)
    x_tr, y_tr, _, _ = data(device)
    model = make_model(hidden, device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = x_tr[:batch], y_tr[:batch]
    for _ in range(5):  # warm-up: allocations and kernel choices stay out of the profile
        train_step(model, opt, x, y, bf16=args.bf16)
    if device.type == "cuda":
        torch.cuda.synchronize()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    with profile(activities=activities) as prof:
        for _ in range(args.steps):
            train_step(model, opt, x, y, bf16=args.bf16)
        if device.type == "cuda":
            torch.cuda.synchronize()
    prof.export_chrome_trace(args.trace)

    # On a GPU, what counts is the time of the kernels the GPU ran; on a CPU, the time an
    # operator spent in itself (not in the operators it called).
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = [e for e in prof.key_averages() if getattr(e, key) > 0]
    events.sort(key=lambda e: getattr(e, key), reverse=True)
    total = sum(getattr(e, key) for e in events)
    top = [{"name": e.key, "calls": e.count, "self_ms": round(getattr(e, key) / 1000, 3),
            "share": round(getattr(e, key) / total, 4)} for e in events[:15]]
    print(prof.key_averages().table(sort_by=key, row_limit=12))
    result = {"device": args.device, "hidden": hidden, "batch_size": len(x),
              "steps": args.steps, "bf16": args.bf16, "sorted_by": key,
              "trace": args.trace, "top_ops": top}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"top operator by {key}: {top[0]['name']} ({top[0]['share']:.0%} of the time)")
    print(f"wrote {args.trace} and {args.out}")


if __name__ == "__main__":
    main()
