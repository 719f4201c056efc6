"""Katib on the local backend vs a bare Optuna loop running the same trial command.

Measured side by side in one run, interleaved, median of several repetitions:
  * per-trial overhead ratio: kflab (parallelTrialCount=1) / bare Optuna ask-run-parse-tell
    loop, over the trial loop (first trial start to last trial end) and end to end (status
    files, Trial objects, plots included);
  * speed-up of parallelTrialCount=2 over 1 on this machine's cores.

Usage: python bench/katib_overhead.py [--trials 12] [--reps 3] [--work 0.25]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab.backends.local import LocalBackend  # noqa: E402
from lab.backends.local.tuning.spec import DEFAULT_FILTER  # noqa: E402

# CPU-bound trial: a fixed amount of arithmetic (scaled by WORK seconds on this machine).
TRIAL = """
import sys, time
x = float(sys.argv[1].split("=")[1])
n = int(sys.argv[2].split("=")[1])
t0 = time.process_time()
acc = 0.0
while time.process_time() - t0 < {work}:
    for i in range(20000):
        acc += i * x
print(f"loss={{(x - 0.3) ** 2 + n / 100:.6f}}")
"""


def experiment(trials: int, parallel: int) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
        "metadata": {"name": f"bench-p{parallel}"},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random",
                          "algorithmSettings": [{"name": "random_state", "value": "1"}]},
            "parallelTrialCount": parallel, "maxTrialCount": trials,
            "parameters": [
                {"name": "x", "parameterType": "double",
                 "feasibleSpace": {"min": "0", "max": "1"}},
                {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "9"}},
            ],
            "trialTemplate": {
                "trialParameters": [{"name": "x", "reference": "x"},
                                    {"name": "n", "reference": "n"}],
                "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {
                    "spec": {"containers": [{
                        "name": "training-container",
                        "command": [sys.executable, "trial.py", "--x=${trialParameters.x}",
                                    "--n=${trialParameters.n}"]}]}}}},
            },
        },
    }


GAPS: list[float] = []  # p=1: seconds from one trial's end to the next one's start


def run_ours(folder: Path, trials: int, parallel: int) -> tuple[float, float]:
    """(trial-loop seconds, end-to-end seconds) of one `kflab apply` in-process."""
    backend = LocalBackend(str(folder / f"state-{parallel}-{time.monotonic_ns()}"))
    marks: dict[str, float] = {}

    def sink(ev: dict) -> None:
        now = time.perf_counter()
        if ev["event"] == "trial-started":
            marks.setdefault("first", now)
            if parallel == 1 and "last" in marks:
                GAPS.append(now - marks["last"])
        elif ev["event"] == "trial-finished":
            marks["last"] = now

    backend.sink = sink
    t0 = time.perf_counter()
    exp = backend.apply(experiment(trials, parallel), base_dir=folder)
    total = time.perf_counter() - t0
    assert exp["status"]["trialsSucceeded"] == trials, exp["status"]
    return marks["last"] - marks["first"], total


def run_bare(folder: Path, trials: int) -> float:
    """The same trials through Optuna's ask/tell, one subprocess at a time."""
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rx = re.compile(DEFAULT_FILTER)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    dists = {"x": FloatDistribution(0, 1), "n": IntDistribution(1, 9)}
    t0 = time.perf_counter()
    for _ in range(trials):
        trial = study.ask(dists)
        out = subprocess.run([sys.executable, "trial.py", f"--x={trial.params['x']}",
                              f"--n={trial.params['n']}"], cwd=folder, capture_output=True,
                             text=True, check=True).stdout
        value = next(float(m.group(2)) for m in rx.finditer(out) if m.group(1) == "loss")
        study.tell(trial, value)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--work", type=float, default=0.25, help="CPU seconds per trial")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "trial.py").write_text(textwrap.dedent(TRIAL.format(work=args.work)))
        run_ours(folder, 2, 1)  # warm imports (optuna, matplotlib) out of the timings
        GAPS.clear()
        bare, loop1, total1, loop2 = [], [], [], []
        for _ in range(args.reps):  # interleaved, so load changes hit every variant
            bare.append(run_bare(folder, args.trials))
            a, b = run_ours(folder, args.trials, 1)
            loop1.append(a)
            total1.append(b)
            loop2.append(run_ours(folder, args.trials, 2)[0])
    med = statistics.median
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"cores: {os.cpu_count()}, load average: {load}, trials: {args.trials}, "
          f"work per trial: {args.work}s CPU, repetitions: {args.reps} (medians)")
    print(f"bare optuna loop          : {med(bare):6.2f} s  "
          f"({med(bare) / args.trials:.3f} s/trial)")
    print(f"kflab, trial loop, p=1    : {med(loop1):6.2f} s")
    print(f"kflab, end to end, p=1    : {med(total1):6.2f} s  (status, Trial objects, plots)")
    print(f"kflab, trial loop, p=2    : {med(loop2):6.2f} s")
    print(f"per-trial overhead ratio (trial loop)  : {med(loop1) / med(bare):.3f}  "
          "(target <= 1.10)")
    print(f"per-trial overhead ratio (end to end)  : {med(total1) / med(bare):.3f}")
    print(f"speed-up parallelTrialCount 2 vs 1     : {med(loop1) / med(loop2):.2f}x")
    gap = med(GAPS)
    print(f"kflab bookkeeping between trials (p=1) : {gap * 1000:.1f} ms median = "
          f"{gap / (med(bare) / args.trials) * 100:.1f} % of a bare trial "
          "(load-independent lower bound of the overhead)")


if __name__ == "__main__":
    main()
