"""DDP scaling through `kflab apply` on 1, 2 and 4 GPUs, side by side with plain torchrun.

For each GPU count N the same script (bench/ddp_bench_train.py) runs twice in this one
process: through the `kflab apply` CLI, as a PyTorchJob (1 Master + N-1 Workers,
nvidia.com/gpu: 1 each) or with `--kind TrainJob` as a TrainJob (the torch-distributed
runtime, numNodes N, resourcesPerNode nvidia.com/gpu: 1, each node running torchrun with the
PET_* variables), then with `torchrun --standalone --nproc_per_node=N`. Printed: samples/s,
scaling efficiency (samples/s at N / (N x samples/s at 1)), and launcher overhead = kflab
wall time / torchrun wall time for the same job. Targets: efficiency >= 0.90 at 2 GPUs,
>= 0.85 at 4, overhead <= 1.03.

    python bench/ddp_scaling.py [--kind PyTorchJob|TrainJob] [--gpus 1,2,4] [--steps 300]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPT = HERE / "ddp_bench_train.py"


def manifest(n: int, train_args: list[str]) -> dict:
    def spec(replicas: int) -> dict:
        return {"replicas": replicas, "restartPolicy": "Never", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "local",
                            "command": ["python", str(SCRIPT), *train_args],
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}

    specs = {"Master": spec(1)}
    if n > 1:
        specs["Worker"] = spec(n - 1)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": f"ddp-bench-{n}"}, "spec": {"pytorchReplicaSpecs": specs}}


def trainjob(n: int, train_args: list[str]) -> dict:
    """N nodes of one GPU each; numProcPerNode left to the runtime (auto: one per GPU)."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": f"ddp-bench-{n}"},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": n,
                                 "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}},
                                 "command": ["python", "-m", "torch.distributed.run",
                                             str(SCRIPT), *train_args]}}}


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{argv[:4]} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return wall


def run_kflab(n: int, work: Path, train_args: list[str],
              kind: str = "PyTorchJob") -> tuple[float, dict]:
    job = work / f"job-{n}.yaml"
    make = trainjob if kind == "TrainJob" else manifest
    job.write_text(yaml.safe_dump(make(n, [*train_args, "--out", f"kflab-{n}.json"])))
    env = {**os.environ, "KFLAB_STATE": str(work / f"state-{n}"), "PYTHONPATH": str(REPO)}
    wall = timed([sys.executable, "-m", "lab.cli", "apply", "-f", str(job)], work, env)
    return wall, json.loads((work / f"kflab-{n}.json").read_text())


def run_torchrun(n: int, work: Path, train_args: list[str]) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={n}", str(SCRIPT), *train_args, "--out", f"torchrun-{n}.json"]
    wall = timed(argv, work, dict(os.environ))
    return wall, json.loads((work / f"torchrun-{n}.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=("PyTorchJob", "TrainJob"), default="PyTorchJob",
                    help="what kflab applies")
    ap.add_argument("--gpus", default="1,2,4")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    import torch

    have = torch.cuda.device_count()
    counts = [n for n in map(int, args.gpus.split(",")) if n <= have]
    if not counts:
        sys.exit(f"needs NVIDIA GPUs (found {have}); run it on a GPU machine")
    device = torch.cuda.get_device_name(0)
    train_args = ["--steps", str(args.steps)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ddp-bench-") as tmp:
        work = Path(tmp)
        for n in counts:
            k_wall, k = run_kflab(n, work, train_args, args.kind)
            t_wall, t = run_torchrun(n, work, train_args)
            rows.append({"gpus": n, "kflab_samples_per_s": k["samples_per_s"],
                         "torchrun_samples_per_s": t["samples_per_s"],
                         "kflab_wall_s": k_wall, "torchrun_wall_s": t_wall,
                         "overhead": k_wall / t_wall,
                         "throughput_ratio": t["samples_per_s"] / k["samples_per_s"]})
            print(f"  {n} GPU(s): kflab {k['samples_per_s']:.0f} samples/s in {k_wall:.1f} s, "
                  f"torchrun {t['samples_per_s']:.0f} samples/s in {t_wall:.1f} s", flush=True)
    base = rows[0]["kflab_samples_per_s"] / rows[0]["gpus"]
    print(f"\nDDP scaling through a {args.kind} on {have} x {device}, conv net, bf16 autocast, "
          f"{args.steps} steps, batch 256/GPU")
    print(f"{'GPUs':>4} {'kflab samples/s':>16} {'efficiency':>10} {'torchrun samples/s':>19} "
          f"{'kflab wall s':>12} {'torchrun wall s':>15} {'overhead':>8}")
    targets = {2: 0.90, 4: 0.85}
    ok = True
    for r in rows:
        r["efficiency"] = r["kflab_samples_per_s"] / (r["gpus"] * base)
        want = targets.get(r["gpus"])
        ok &= (want is None or r["efficiency"] >= want) and r["overhead"] <= 1.03
        print(f"{r['gpus']:>4} {r['kflab_samples_per_s']:>16.0f} {r['efficiency']:>10.3f} "
              f"{r['torchrun_samples_per_s']:>19.0f} {r['kflab_wall_s']:>12.1f} "
              f"{r['torchrun_wall_s']:>15.1f} {r['overhead']:>8.3f}")
    print("targets: efficiency >= 0.90 at 2, >= 0.85 at 4; overhead <= 1.03 -> "
          + ("MET" if ok else "NOT MET"))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "kind": args.kind,
                                               "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
