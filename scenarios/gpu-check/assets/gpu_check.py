"""Does torch see the GPU this replica was given, and how fast is a bf16 matmul on it?

Writes --out (JSON): the visible devices, their compute capability and the measured bf16
TFLOP/s (bf16 needs compute capability 8.0 or newer: on an older GPU it says so and fails).
"""

import argparse
import json
import os
import time

import torch


def bf16_tflops(n: int, iters: int) -> float:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):  # warm-up: cuBLAS picks its kernel
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize()
    return 2 * n**3 * iters / (time.perf_counter() - t0) / 1e12


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", default="gpu.json")
    args = ap.parse_args()
    report = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
              "cuda_available": torch.cuda.is_available(),
              "device_count": torch.cuda.device_count(), "devices": []}
    why = "" if torch.cuda.is_available() else "torch sees no CUDA device"
    if torch.cuda.is_available():
        report["devices"] = [torch.cuda.get_device_name(i)
                             for i in range(torch.cuda.device_count())]
        major, minor = torch.cuda.get_device_capability()
        report["compute_capability"] = f"{major}.{minor}"
        if (major, minor) >= (8, 0):
            report["bf16_tflops"] = round(bf16_tflops(args.size, args.iters), 1)
        else:  # bf16 matrix units came with Ampere
            why = (f"bf16 needs a GPU of compute capability 8.0 or newer (Ampere, Ada, "
                   f"Hopper...); {report['devices'][0]} has {major}.{minor}")
    print("GPU " + json.dumps(report), flush=True)
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=2)
    if why:
        raise SystemExit(why)


if __name__ == "__main__":
    main()
