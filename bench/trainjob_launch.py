"""Where a one-node launch spends its time: `kflab apply` of a TrainJob or PyTorchJob against
plain torchrun, phase by phase, side by side in one run.

Each launcher starts the same tiny worker (bench/launch_probe.py), which prints when its
own phases ended; each node's command is wrapped in `sh -c 'echo NODE <time>; exec ...'`
(the same wrapper for every launcher) so the time to the node's start is seen too.
Launchers, alternated round by round (medians printed):
- torchrun --standalone --nproc_per_node=1 (the baseline of bench/ddp_scaling.py), and
  with --nproc_per_node=auto (what a TrainJob node runs when numProcPerNode is left to
  the runtime: torchrun then counts the GPUs itself);
- `kflab apply` of a TrainJob (torch-distributed runtime, 1 node, nvidia.com/gpu: 1 when
  there is a GPU), numProcPerNode left to the runtime (auto) and set to 1;
- `kflab apply` of a PyTorchJob (one Master: the worker itself, no torchrun agent).
Phases: launch -> node started -> worker started (agent, rendezvous) -> torch imported ->
CUDA ready -> process group -> a few steps -> launcher exited.

    python bench/trainjob_launch.py [--rounds 3] [--json out.json]

On a machine without a GPU it runs the worker on the CPU (gloo): the fixed costs remain.
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
PROBE = HERE / "launch_probe.py"
WRAP = 'echo NODE $(date +%s.%N); exec "$@"'
PHASES = [("node", "to node"), ("start", "agent+rdzv"), ("torch", "torch import"),
          ("cuda", "CUDA init"), ("group", "proc group"), ("done", "steps"), ("end", "exit")]


def node_argv(*argv: str) -> list[str]:
    return ["sh", "-c", WRAP, "node", *argv]


def trainjob(name: str, gpu: bool, nproc: str | None) -> dict:
    trainer: dict = {"numNodes": 1,
                     "command": node_argv(sys.executable, "-m", "torch.distributed.run",
                                          str(PROBE))}
    if gpu:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": 1}}
    if nproc is not None:
        trainer["numProcPerNode"] = int(nproc) if nproc.isdigit() else nproc
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}}


def pytorchjob(name: str, gpu: bool) -> dict:
    container = {"name": "pytorch", "command": node_argv(sys.executable, str(PROBE))}
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": {
                "replicas": 1, "restartPolicy": "Never",
                "template": {"spec": {"containers": [container]}}}}}}


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    t0 = time.time()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    end = time.time()
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"{argv[:5]} failed ({proc.returncode}):\n{out[-3000:]}")
    node = next(float(line.split("NODE ", 1)[1].split()[0]) for line in out.splitlines()
                if "NODE " in line)
    probe = next(json.loads(line.split("PROBE ", 1)[1]) for line in out.splitlines()
                 if "PROBE " in line)
    marks = {"launch": t0, "node": node, **{k: probe[k] for k in
                                            ("start", "torch", "cuda", "group", "done")},
             "end": end}
    return {"device": probe["device"], **{k: marks[k] - t0 for k in marks}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write every run here")
    args = ap.parse_args()
    import torch

    gpu = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if gpu else "CPU (gloo)"
    # As an installed wheel has them: kflab's modules byte-compiled before anything is timed.
    compileall.compile_dir(str(REPO / "lab"), quiet=1)
    rows: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="launch-bench-") as tmp:
        work = Path(tmp)
        files = {"TrainJob (numProcPerNode auto)": trainjob("tj-auto", gpu, None),
                 "TrainJob (numProcPerNode 1)": trainjob("tj-one", gpu, "1"),
                 "PyTorchJob (1 Master)": pytorchjob("pj", gpu)}
        launchers: dict[str, tuple[list[str], dict[str, str]]] = {}
        base = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
        for name, nproc in (("1", "1"), ("auto", "auto")):
            launchers[f"torchrun --nproc_per_node={name}"] = (node_argv(
                sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={nproc}", str(PROBE)), base)
        for i, (name, manifest) in enumerate(files.items()):
            path = work / f"job-{i}.yaml"
            path.write_text(yaml.safe_dump(manifest))
            launchers[f"kflab apply: {name}"] = (
                [sys.executable, "-m", "lab.cli", "apply", "-f", str(path)],
                {**base, "KFLAB_STATE": str(work / f"state-{i}")})
        for r in range(args.rounds):
            order = list(launchers) if r % 2 == 0 else list(reversed(launchers))
            for name in order:
                argv, env = launchers[name]
                if "KFLAB_STATE" in env:
                    subprocess.run(["rm", "-rf", env["KFLAB_STATE"]], check=True)
                rows.setdefault(name, []).append(run(argv, work, env))
                print(f"  round {r + 1}: {name}: {rows[name][-1]['end']:.2f} s", flush=True)
    print(f"\nOne-node launch on {device}, {args.rounds} rounds (medians; seconds spent in "
          f"each phase)")
    head = f"{'launcher':<45}" + "".join(f"{label:>13}" for _, label in PHASES) + \
        f"{'total':>8}{'/ torchrun 1':>14}"
    print(head)
    base_total = statistics.median(x["end"] for x in rows["torchrun --nproc_per_node=1"])
    for name, runs in rows.items():
        prev, cells = "launch", []
        for key, _ in PHASES:
            cells.append(statistics.median(x[key] - x.get(prev, 0.0) for x in runs))
            prev = key
        total = statistics.median(x["end"] for x in runs)
        print(f"{name:<45}" + "".join(f"{c:>13.3f}" for c in cells)
              + f"{total:>8.2f}{total / base_total:>14.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
