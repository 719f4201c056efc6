"""How soon the first run of a small pipeline starts its tasks, against the floor under it.

The first run of a pipeline (nothing cached) must start its tasks within 0.3 s of the
command on a quiet machine (issue 33). Measured here as a learner runs it: `kflab pipeline
run` in a fresh state folder, a pipeline of two one-line tasks, each task writing the time
it began; the latency is that time minus the moment the command was given (just before the
process is spawned, so interpreter start-up counts). Not /proc's process start time: it is
counted from the boot time, which /proc/stat gives in whole seconds, so it is off by up to
a second. The floor beside it, measured alternately
in the same run: `python -c "import kfp.dsl"` (an interpreter importing what the task's
process must have imported), the least any first run could cost. The load average is
printed beside every figure.

    python bench/first_task_start.py [--rounds 5] [--no-prestart] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PIPELINE = '''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def hello(i: int, out: str) -> int:
    import time
    with open(f"{out}/start-{i}.txt", "w") as fh:
        fh.write(repr(time.time()))
    return i

@dsl.pipeline
def small(out: str):
    hello(i=1, out=out)
    hello(i=2, out=out)
'''


def kflab_argv() -> list[str]:
    script = Path(sys.executable).parent / "kflab"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lab.cli"]


def first_task(folder: Path, env: dict[str, str]) -> float:
    """Seconds from the kflab process's start to its first task's start (first run)."""
    out = folder / f"out-{time.monotonic_ns()}"
    out.mkdir()
    state = folder / f"state-{time.monotonic_ns()}"
    began = time.time()  # the command given (the tasks write time.time() too)
    proc = subprocess.Popen([*kflab_argv(), "--state", str(state), "pipeline", "run",
                             "small.py", "-p", f"out={out}"], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate(timeout=300)
    if proc.returncode != 0:
        sys.exit(f"kflab failed:\n{output.decode()[-2000:]}")
    starts = [float(p.read_text()) for p in out.glob("start-*.txt")]
    return min(starts) - began


def floor(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    # kfp imported as a task's process imports it (no API client: kfp's _KFP_RUNTIME)
    subprocess.run([sys.executable, "-c", "import kfp.dsl"], env={**env, "_KFP_RUNTIME": "true"},
                   check=True)
    return time.perf_counter() - t0


def measure(rounds: int, prestart: bool) -> tuple[float, float]:
    """Medians of `rounds` first-task latencies and floors, measured alternately."""
    env = {k: v for k, v in os.environ.items() if k != "KFLAB_NO_PRESTART"}
    if not prestart:
        env["KFLAB_NO_PRESTART"] = "1"
    lat, flo = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "small.py").write_text(PIPELINE)
        first_task(folder, env)  # warm the page cache, not counted
        for _ in range(rounds):
            lat.append(first_task(folder, env))
            flo.append(floor(env))
    return statistics.median(lat), statistics.median(flo)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-prestart", action="store_true",
                    help="start the fork server when the first task is ready (as before)")
    ap.add_argument("--out")
    args = ap.parse_args()
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "lab"), quiet=1)
    load0 = os.getloadavg()[0]
    lat, flo = measure(args.rounds, not args.no_prestart)
    line = (f"first task started {lat:.3f} s after the command (median of {args.rounds}); "
            f"floor `python -c 'import kfp.dsl'` {flo:.3f} s; ratio {lat / flo:.2f}; "
            f"{'without' if args.no_prestart else 'with'} the early fork server; "
            f"cores {len(os.sched_getaffinity(0))}; load average {load0:.1f} before, "
            f"{os.getloadavg()[0]:.1f} after")
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(line + "\n")


if __name__ == "__main__":
    main()
