"""kflab's local pipeline runs against bare kfp.local, same pipelines, same machine.

Two pipelines: pipeline-classifiers' five-models pipeline (load-data, then five trainers)
and a fan-out of 16 small independent tasks. Each is run, in fresh processes one after
another, by bare kfp.local (SubprocessRunner(use_venv=False), as kfp's docs show it) and by
`kflab pipeline run` (fresh state folder: nothing cached), then by kflab again, unchanged
(cached re-run; `--reruns N` times, the median compared). Wall time of the whole command,
interpreter start included on both sides. Prints the ratios the issue asks for:
kflab/kfp.local and cached/first, and the 1-minute load average beside each figure (read as
it was taken): on a shared machine a figure means little without it.

kflab's own modules are byte-compiled first (`compileall`, into lab/'s __pycache__), as an
installed wheel's are: a checkout run with PYTHONDONTWRITEBYTECODE=1 would otherwise compile
kflab's sources on every command (about 0.1 s) while kfp's installed files have theirs.

    python bench/pipelines_local.py [--out results.txt] [--case fan-out-16] [--reruns 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "scenarios" / "pipeline-classifiers"

FANOUT = '''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def work(i: int) -> int:
    total = 0
    for k in range(300_000):
        total += (k * i) % 7
    return total

@dsl.pipeline
def fanout():
    for i in range(16):
        work(i=i)
'''

BARE = '''
import importlib.util, sys, warnings
warnings.simplefilter("ignore")
import kfp.local
from kfp.dsl.graph_component import GraphComponent
path, root = sys.argv[1], sys.argv[2]
sys.path.insert(0, str(__import__("pathlib").Path(path).parent))
spec = importlib.util.spec_from_file_location("bench_pipeline", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
pipe = [v for v in vars(mod).values() if isinstance(v, GraphComponent)][0]
kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=root,
               raise_on_error=True)
pipe()
'''


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:3])} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return took


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def case(name: str, folder: Path, file: str, lines: list[str], reruns: int) -> None:
    """One pipeline: each figure printed with the 1-minute load average read when it was
    taken (a ratio of two figures taken at different loads says so)."""
    py = sys.executable
    script = Path(py).parent / "kflab"
    kflab = [str(script)] if script.exists() else [py, "-m", "lab.cli"]
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "TMPDIR": str(folder / "tmp")}
    (folder / "tmp").mkdir(exist_ok=True)
    bare = timed([py, "-c", BARE, str(folder / file), str(folder / "kfp-root")], folder, env)
    bare_load = load()
    state = folder / "state"
    first = timed([*kflab, "--state", str(state), "pipeline", "run", file, "--name", "bench"],
                  folder, env)
    first_load = load()
    agains = [timed([*kflab, "--state", str(state), "pipeline", "run", file, "--name",
                     "bench"], folder, env) for _ in range(reruns)]
    again = statistics.median(agains)
    spread = f", {min(agains):.2f}-{max(agains):.2f}s over {reruns}" if reruns > 1 else ""
    lines.append(f"{name}: kfp.local {bare:.2f}s ({bare_load}), kflab {first:.2f}s "
                 f"({first_load}; ratio {first / bare:.2f}), kflab cached re-run "
                 f"{again:.2f}s (median{spread}; {load()}; ratio to first "
                 f"{again / first:.2f})")
    print(lines[-1], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="also write the results here")
    ap.add_argument("--case", choices=("five-models", "fan-out-16"), action="append",
                    help="run only this pipeline (default: both)")
    ap.add_argument("--reruns", type=int, default=5,
                    help="cached re-runs after the first run; their median is compared")
    args = ap.parse_args()
    cases = set(args.case or ("five-models", "fan-out-16"))
    import compileall

    import kfp

    compileall.compile_dir(str(REPO / "lab"), quiet=1)

    lines = [f"cores: {len(os.sched_getaffinity(0))}, python {sys.version.split()[0]}, "
             f"kfp {kfp.__version__}, load average {os.getloadavg()[0]:.1f}"]
    print(lines[0], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if "five-models" in cases:
            five = Path(tmp) / "five"
            five.mkdir()
            shutil.copy(LAB / "solutions" / "components.py", five / "components.py")
            shutil.copy(LAB / "solutions" / "pipeline_five.py", five / "pipeline.py")
            case("five-models", five, "pipeline.py", lines, args.reruns)
        if "fan-out-16" in cases:
            fan = Path(tmp) / "fanout"
            fan.mkdir()
            (fan / "fanout.py").write_text(FANOUT)
            case("fan-out-16", fan, "fanout.py", lines, args.reruns)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
