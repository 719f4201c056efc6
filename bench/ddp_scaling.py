"""DDP scaling through `kflab apply` on 1, 2 and 4 GPUs, side by side with plain torchrun.

For each GPU count N the same script (bench/ddp_bench_train.py) runs twice in this one
process: through the `kflab apply` CLI, as a PyTorchJob (1 Master + N-1 Workers,
nvidia.com/gpu: 1 each) or with `--kind TrainJob` as a TrainJob (the torch-distributed
runtime, numNodes N, resourcesPerNode nvidia.com/gpu: 1, each node running torchrun with the
PET_* variables), then with `torchrun --standalone --nproc_per_node=N`. Printed: samples/s,
scaling efficiency (samples/s at N / (N x samples/s at 1)), and launcher overhead = kflab
wall time / torchrun wall time for the same job. Targets: efficiency >= 0.90 at 2 GPUs,
>= 0.85 at 4, overhead <= 1.03 (a TrainJob: <= 1.05, its node being a torchrun agent too).

Fair to both sides: kflab's modules are byte-compiled first (as an installed wheel has
them), one untimed CUDA start warms the driver and the page cache before anything is timed,
and with --rounds R each GPU count runs R times, the two launchers' order swapped every
round (medians printed).

    python bench/ddp_scaling.py [--kind PyTorchJob|TrainJob] [--gpus 1,2,4] [--steps 300]
        [--rounds 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
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


def trainjob(n: int, train_args: list[str], nproc: str = "auto") -> dict:
    """N nodes of one GPU each; numProcPerNode left to the runtime (auto: torchrun counts
    the node's GPUs), or given (`nproc`), as torchrun's --nproc_per_node is below."""
    trainer: dict = {"numNodes": n, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}},
                     "command": ["python", "-m", "torch.distributed.run", str(SCRIPT),
                                 *train_args]}
    if nproc != "auto":
        trainer["numProcPerNode"] = int(nproc)
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": f"ddp-bench-{n}"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}}


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{argv[:4]} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return wall


def run_kflab(n: int, work: Path, train_args: list[str], kind: str = "PyTorchJob",
              nproc: str = "auto", tag: str = "") -> tuple[float, dict]:
    job = work / f"job-{n}.yaml"
    args = [*train_args, "--out", f"kflab-{n}.json"]
    job.write_text(yaml.safe_dump(trainjob(n, args, nproc) if kind == "TrainJob"
                                  else manifest(n, args)))
    env = {**os.environ, "KFLAB_STATE": str(work / f"state-{n}{tag}"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                       os.environ.get("PYTHONPATH")]))}
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
    ap.add_argument("--rounds", type=int, default=1, help="runs per GPU count (medians)")
    ap.add_argument("--nproc-per-node", default="auto",
                    help="a TrainJob's numProcPerNode: auto (left to the runtime) or a number")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    import torch

    have = torch.cuda.device_count()
    counts = [n for n in map(int, args.gpus.split(",")) if n <= have]
    if not counts:
        sys.exit(f"needs NVIDIA GPUs (found {have}); run it on a GPU machine")
    device = torch.cuda.get_device_name(0)
    train_args = ["--steps", str(args.steps)]
    compileall.compile_dir(str(REPO / "lab"), quiet=1)
    subprocess.run([sys.executable, "-c", "import torch; torch.ones(1, device='cuda')"],
                   check=True)  # untimed: the driver and torch's libraries warm
    rows = []
    with tempfile.TemporaryDirectory(prefix="ddp-bench-") as tmp:
        work = Path(tmp)
        for n in counts:
            runs: dict[str, list[tuple[float, dict]]] = {"kflab": [], "torchrun": []}
            for r in range(args.rounds):
                order = ["kflab", "torchrun"] if r % 2 == 0 else ["torchrun", "kflab"]
                for side in order:
                    runs[side].append(
                        run_kflab(n, work, train_args, args.kind, args.nproc_per_node, f"-{r}")
                        if side == "kflab" else run_torchrun(n, work, train_args))
            k_wall = statistics.median(w for w, _ in runs["kflab"])
            t_wall = statistics.median(w for w, _ in runs["torchrun"])
            k = {"samples_per_s": statistics.median(x["samples_per_s"] for _, x in runs["kflab"])}
            t = {"samples_per_s": statistics.median(x["samples_per_s"]
                                                    for _, x in runs["torchrun"])}
            rows.append({"gpus": n, "kflab_samples_per_s": k["samples_per_s"],
                         "torchrun_samples_per_s": t["samples_per_s"],
                         "kflab_wall_s": k_wall, "torchrun_wall_s": t_wall,
                         "overhead": k_wall / t_wall,
                         "throughput_ratio": t["samples_per_s"] / k["samples_per_s"],
                         "kflab_walls": [round(w, 2) for w, _ in runs["kflab"]],
                         "torchrun_walls": [round(w, 2) for w, _ in runs["torchrun"]]})
            print(f"  {n} GPU(s): kflab {k['samples_per_s']:.0f} samples/s in {k_wall:.1f} s, "
                  f"torchrun {t['samples_per_s']:.0f} samples/s in {t_wall:.1f} s "
                  f"(walls: kflab {rows[-1]['kflab_walls']}, torchrun "
                  f"{rows[-1]['torchrun_walls']})", flush=True)
    base = rows[0]["kflab_samples_per_s"] / rows[0]["gpus"]
    print(f"\nDDP scaling through a {args.kind} on {have} x {device}, conv net, bf16 autocast, "
          f"{args.steps} steps, batch 256/GPU, {args.rounds} round(s), medians"
          + (f", numProcPerNode {args.nproc_per_node}" if args.kind == "TrainJob" else ""))
    print(f"{'GPUs':>4} {'kflab samples/s':>16} {'efficiency':>10} {'torchrun samples/s':>19} "
          f"{'kflab wall s':>12} {'torchrun wall s':>15} {'overhead':>8}")
    targets = {2: 0.90, 4: 0.85}
    limit = 1.05 if args.kind == "TrainJob" else 1.03
    ok = True
    for r in rows:
        r["efficiency"] = r["kflab_samples_per_s"] / (r["gpus"] * base)
        want = targets.get(r["gpus"])
        ok &= (want is None or r["efficiency"] >= want) and r["overhead"] <= limit
        print(f"{r['gpus']:>4} {r['kflab_samples_per_s']:>16.0f} {r['efficiency']:>10.3f} "
              f"{r['torchrun_samples_per_s']:>19.0f} {r['kflab_wall_s']:>12.1f} "
              f"{r['torchrun_wall_s']:>15.1f} {r['overhead']:>8.3f}")
    print(f"targets: efficiency >= 0.90 at 2, >= 0.85 at 4; overhead <= {limit} -> "
          + ("MET" if ok else "NOT MET"))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "kind": args.kind,
                                               "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
