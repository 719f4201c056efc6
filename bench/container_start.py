"""How much later a container replica starts than a process replica of the same image.

One PyTorchJob replica (a Master whose program prints the time it started), applied on the
local backend twice per round, interleaved: once as a local process (`kflab.dev/runtime:
process`) and once as a container of the same image (`kflab.dev/runtime: container`), the
image pulled beforehand. "Start" is from `apply` being called to the replica's first
statement running (the program prints time.time(); the host and its containers share one
clock). A job of three replicas is timed the same way (each replica's start, the job's
network included). Prints the medians, their difference and ratio, the machine and the load
average. Issue 38's target: the container replica within 1.5 s of the process replica.

Usage: python bench/container_start.py [--rounds 7] [--image localhost/kflab-python:bookworm]
Needs a container engine (Podman or Docker) and the image (scripts/standins/
25-workload-images.sh builds localhost/kflab-python:bookworm here).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab.backends.local import LocalBackend  # noqa: E402
from lab.backends.local.containers import engine, images  # noqa: E402

PROGRAM = "import time; print('started', repr(time.time()), flush=True)"


def job(name: str, image: str, runtime: str, workers: int) -> dict:
    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": image, "command": ["python3", "-c", PROGRAM]}]}}}

    specs = {"Master": spec(1)}
    if workers:
        specs["Worker"] = spec(workers)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"kflab.dev/runtime": runtime}},
            "spec": {"pytorchReplicaSpecs": specs}}


def start_delays(backend: LocalBackend, folder: Path, name: str, image: str, runtime: str,
                 workers: int) -> tuple[list[float], float]:
    """(seconds from apply to each replica's first statement, seconds of the whole apply:
    the job Succeeded, its containers and network removed)."""
    t0 = time.time()
    obj = backend.apply(job(name, image, runtime, workers), base_dir=folder)
    took = time.time() - t0
    cond = obj["status"]["conditions"][-1]
    if cond["type"] != "Succeeded":
        raise SystemExit(f"{name} ({runtime}) did not succeed: {cond}")
    marks = [float(line.rsplit(" ", 1)[1]) for line in backend.logs("PyTorchJob", name)
             if " started " in line or line.startswith("started ")]
    backend.delete("PyTorchJob", name)
    return [m - t0 for m in marks], took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--image", default="localhost/kflab-python:bookworm")
    args = ap.parse_args()
    found = engine.current()
    if found is None or not found.running:
        print("no running container engine here: nothing to measure", file=sys.stderr)
        return 2
    images.ensure(found, args.image, "IfNotPresent", where="--image")  # pulled beforehand
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {found.label}, "
          f"{platform.machine()}, cores: {os.cpu_count()}, python "
          f"{platform.python_version()}, image {args.image}, rounds {args.rounds}")
    results: dict[tuple[str, int], list[float]] = {}
    totals: dict[tuple[str, int], list[float]] = {}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(str(Path(tmp) / "state"))
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = ("process", "container") if r % 2 == 0 else ("container", "process")
            for workers in (0, 2):
                for runtime in order:
                    delays, took = start_delays(backend, Path(tmp),
                                                f"b{r}-{runtime[0]}{workers}", args.image,
                                                runtime, workers)
                    key = (runtime, workers)
                    results.setdefault(key, []).append(max(delays) if workers else delays[0])
                    totals.setdefault(key, []).append(took)
    print(f"load average (1 min) during the rounds: {min(loads):.1f}-{max(loads):.1f}")
    for workers, what in ((0, "one replica"), (2, "3 replicas (1 master + 2 workers), the "
                                                  "last replica's start")):
        proc = statistics.median(results[("process", workers)])
        cont = statistics.median(results[("container", workers)])
        print(f"{what}: median s from apply to the program running: process {proc:.2f}, "
              f"container {cont:.2f}; difference {cont - proc:+.2f} s, ratio "
              f"{cont / proc:.1f}x (target: difference <= 1.5 s)")
        proc, cont = (statistics.median(totals[(rt, workers)])
                      for rt in ("process", "container"))
        print(f"{what}: median s of the whole apply (to Succeeded, all removed): process "
              f"{proc:.2f}, container {cont:.2f}; difference {cont - proc:+.2f} s, ratio "
              f"{cont / proc:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
