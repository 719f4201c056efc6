"""Run the scaling labs with `kflab scenario test` and print what they measured.

Each lab measures this machine (samples/s, step times, bytes, seconds) and its checks
compare relations; this script collects those figures from the labs' work folders, so a
run on a laptop, on CI or on a GPU machine can be written down the same way
(docs/performance.md, "Scaling labs"). The GPU steps of input-pipeline-bottleneck and
mixed-precision-and-profiling run only where a GPU is found.

    python bench/scaling_labs.py [LAB ...] [--json out.json]
    python bench/scaling_labs.py input-pipeline-bottleneck mixed-precision-and-profiling
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LABS = ["input-pipeline-bottleneck", "mixed-precision-and-profiling", "parameter-averaging",
        "dask-grid-search", "gbrt-tuning-recipe"]


def read(work: Path, name: str) -> dict[str, Any] | None:
    path = work / name
    return json.loads(path.read_text()) if path.is_file() else None


def pipeline(work: Path) -> list[str]:
    out = []
    for device, before, after in (("cpu", "before.json", "after.json"),
                                  ("gpu", "gpu-before.json", "gpu-after.json")):
        b, a = read(work, before), read(work, after)
        if b and a:
            out.append(f"  {device} ({b['device_name']}): slow pipeline loading "
                       f"{b['stages']['loading']:,.0f} / training {b['stages']['training']:,.0f} "
                       f"samples/s (end to end {b['end_to_end']:,.0f}); fast pipeline loading "
                       f"{a['stages']['loading']:,.0f} / training {a['stages']['training']:,.0f} "
                       f"(end to end {a['end_to_end']:,.0f}): speed-up {a['speedup']:.2f}x")
    return out


def precision(work: Path) -> list[str]:
    out = []
    for device, prof, amp in (("cpu", "profile.json", "amp-cpu.json"),
                              ("gpu", "profile-gpu.json", "amp-gpu.json")):
        p, a = read(work, prof), read(work, amp)
        if p and a:
            top = p["top_ops"][0]
            out.append(f"  {device} ({a['device_name']}, width {a['hidden']}, batch "
                       f"{a['batch_size']}): top op {top['name']} ({top['share']:.0%} of "
                       f"{p['sorted_by']}); step fp32 {a['fp32']['step_ms']:.3f} ms, bf16 "
                       f"{a['bf16']['step_ms']:.3f} ms (fp32/bf16 {a['speedup']:.2f}x); accuracy "
                       f"{a['fp32']['accuracy']:.4f} vs {a['bf16']['accuracy']:.4f}")
    return out


def averaging(work: Path) -> list[str]:
    out = []
    for name in ("result-ddp.json", "result-avg.json"):
        r = read(work, name)
        if r:
            out.append(f"  {r['mode']:<8} every {r['every']}: "
                       f"{r['bytes_per_step']:,.0f} bytes/step, target loss at step "
                       f"{r['steps_to_target']} ({r['seconds_to_target']} s), "
                       f"{r['seconds']} s for {r['steps']} steps, parameter spread after "
                       f"{r['max_param_diff_after']}")
    return out


def dask(work: Path) -> list[str]:
    c = read(work, "comparison.json")
    if not c:
        return []
    return [f"  sequential {c['sequential']['fit_seconds']} s, dask {c['dask']['fit_seconds']} s "
            f"with {c['workers']} workers on {c['cores']} cores: {c['speedup']:.2f}x (cluster "
            f"start {c['dask']['startup_seconds']} s); same best: {c['same_best_params']}"]


def gbrt(work: Path) -> list[str]:
    out = []
    for name in ("gbrt-stage1", "gbrt-stage2"):
        exp = read(work.parent / "state" / "resources" / "experiments" / "default", f"{name}.json")
        best = ((exp or {}).get("status") or {}).get("currentOptimalTrial")
        if best:
            values = {a["name"]: a["value"] for a in best["parameterAssignments"]}
            metrics = {m["name"]: m["max"] for m in best["observation"]["metrics"]}
            out.append(f"  {name}: {exp['status'].get('trialsSucceeded')} trials, best r2 "
                       f"{metrics.get('r2')} with {values} "
                       f"(trees used {metrics.get('trees-used')})")
    return out


FIGURES = {"input-pipeline-bottleneck": pipeline, "mixed-precision-and-profiling": precision,
           "parameter-averaging": averaging, "dask-grid-search": dask, "gbrt-tuning-recipe": gbrt}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("labs", nargs="*", default=LABS)
    ap.add_argument("--json", help="also write the scenario report here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kflab-scaling-") as tmp:
        report = Path(args.json or Path(tmp) / "report.json")
        env = {**os.environ, "KFLAB_STATE": str(Path(tmp) / "state"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                          os.environ.get("PYTHONPATH")]))}
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "lab.cli", "scenario", "test", *args.labs,
                               "--backend", "local", "--json", str(report)], env=env,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if not report.is_file():
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
        print(f"{cores} cores, load average {load:.1f} before and "
              f"{os.getloadavg()[0]:.1f} after; {wall:.1f} s in all")
        for result in json.loads(report.read_text()):
            steps = ", ".join(f"{s['id']} {s['status']}" for s in result["steps"])
            print(f"{result['id']}: {result['status']} in {result['seconds']:.1f} s ({steps})")
            for line in FIGURES.get(result["id"], lambda _w: [])(Path(result["workdir"])):
                print(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
