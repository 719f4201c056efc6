"""The fixed cost of an all-cached `kflab pipeline run`, before and after a change.

Exports kflab's `lab/` package at a git ref (default: main) into a temporary folder and
times a cached re-run of the same pipeline (bench/pipelines_local.py's fan-out of 16
tasks) with that code and with this checkout's, alternately, same interpreter, same
installed packages, each with its own state folder (one first run each, not timed).
Both trees' modules are byte-compiled first, as an installed wheel's are. Also prints the
floors no change to kflab's start-up removes: the interpreter's start-up,
and importing kfp.dsl and kfp.local's helpers the way a run does (kfp.local's input helpers
import kfp.dsl through kfp.compiler).

    python bench/pipeline_cached_rerun.py [--before main] [--rounds 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipelines_local import FANOUT  # the same fan-out as the side-by-side bench

REPO = Path(__file__).resolve().parents[1]
# kfp as a run imports it (without kfp.client), plus the kfp.local helpers the engine uses
IMPORT_KFP = ("from lab.backends.local.pipelines import taskproc; taskproc.import_kfp(); "
              "import kfp.local.executor_input_utils")
KFP_LABEL = "python + kfp.dsl + kfp.local's helpers"


def export(ref: str, dest: Path) -> None:
    """`lab/` and what kflab looks for beside it (manifests/, pyproject.toml) at `ref`."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", ref, "lab", "manifests",
                           "pyproject.toml"],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python before 3.11.4: our own git archive
            tar.extractall(dest)


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="main", help="git ref of the 'before' code")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", help="also write the results here")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "before").mkdir()
        export(args.before, work / "before")
        pipe = work / "pipe"  # not above the exported lab/: kflab 0.1 forgot its own modules
        pipe.mkdir()
        (pipe / "fanout.py").write_text(FANOUT)
        trees = {"before": work / "before", "after": REPO}
        for tree in trees.values():  # as an installed wheel has them (pipelines_local.py)
            compileall.compile_dir(str(tree / "lab"), quiet=1)
        envs = {}
        for name, tree in trees.items():
            envs[name] = {**os.environ, "PYTHONPATH": str(tree), "PIP_NO_INDEX": "1",
                          "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            cmd = [py, "-m", "lab.cli", "--state", str(work / f"state-{name}"),
                   "pipeline", "run", "fanout.py", "--name", "bench"]
            first = timed(cmd, pipe, envs[name])
            print(f"{name}: first run {first:.2f}s (not compared)", flush=True)
        times: dict[str, list[float]] = {n: [] for n in trees}
        floors: dict[str, list[float]] = {"python -c pass": [], KFP_LABEL: []}
        for _ in range(args.rounds):
            for name in trees:
                cmd = [py, "-m", "lab.cli", "--state", str(work / f"state-{name}"),
                       "pipeline", "run", "fanout.py", "--name", "bench"]
                times[name].append(timed(cmd, pipe, envs[name]))
            floors["python -c pass"].append(timed([py, "-c", "pass"], work, envs["after"]))
            floors[KFP_LABEL].append(timed([py, "-c", IMPORT_KFP], work, envs["after"]))
    med = {n: statistics.median(v) for n, v in times.items()}
    lines = [f"cores: {len(os.sched_getaffinity(0))}, python {sys.version.split()[0]}, "
             f"rounds {args.rounds}, load average {os.getloadavg()[0]:.1f}",
             f"cached re-run of the 16-task fan-out, median s: before ({args.before}) "
             f"{med['before']:.3f}, after {med['after']:.3f} "
             f"(after/before {med['after'] / med['before']:.2f})"]
    lines += [f"floor, median s: {n} {statistics.median(v):.3f}" for n, v in floors.items()]
    print("\n".join(lines), flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
