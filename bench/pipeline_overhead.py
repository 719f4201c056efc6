"""Pipeline overhead: `kflab scenario run pipeline-classifiers` vs bare kfp.local, side by side.

Both run the same three pipelines (the scenario's three steps) as child processes of this
script, alternating, and the medians are compared. Also times `kflab --help` start-up.

    python bench/pipeline_overhead.py [--rounds 3] [--help-runs 10]
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
SCENARIO = REPO / "scenarios" / "pipeline-classifiers"
# The pipelines the scenario's steps run, in order: (pipeline file, components file).
STEPS = [("assets/pipeline.py", "assets/components.py"),
         ("solutions/pipeline_five.py", "solutions/components.py"),
         ("solutions/pipeline.py", "solutions/components.py")]

BARE = """
import importlib.util, sys, kfp.local
root, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, work)
kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=root)
for i, (pipe, comps) in enumerate(zip(sys.argv[3::2], sys.argv[4::2])):
    for mod in ("components",):
        sys.modules.pop(mod, None)
    import shutil; shutil.copy(comps, work + "/components.py")
    spec = importlib.util.spec_from_file_location(f"p{i}", pipe)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    m.classifiers()
"""


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return took


def run_kflab(tmp: Path) -> float:
    env = {**os.environ, "KFLAB_STATE": str(tmp / "state")}
    return timed([sys.executable, "-m", "lab.cli", "scenario", "run", "pipeline-classifiers"],
                 env)


def run_bare(tmp: Path) -> float:
    work = tmp / "bare"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    args = []
    for pipe, comps in STEPS:
        args += [str(SCENARIO / pipe), str(SCENARIO / comps)]
    env = {**os.environ, "TMPDIR": str(work), "PYTHONWARNINGS": "ignore::FutureWarning"}
    return timed([sys.executable, "-c", BARE, str(work / "root"), str(work), *args], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--help-runs", type=int, default=10)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        run_bare(tmp)  # warm the page cache for both sides
        ours, bare = [], []
        for i in range(opts.rounds):
            ours.append(run_kflab(tmp))
            bare.append(run_bare(tmp))
            print(f"round {i + 1}: kflab {ours[-1]:.2f} s, bare kfp.local {bare[-1]:.2f} s",
                  flush=True)
        script = Path(sys.executable).with_name("kflab")  # the installed console script
        help_cmd = [str(script)] if script.exists() else [sys.executable, "-m", "lab.cli"]
        helps = [timed([*help_cmd, "--help"], dict(os.environ))
                 for _ in range(opts.help_runs)]
    m_ours, m_bare, m_help = (statistics.median(x) for x in (ours, bare, helps))
    ratio = m_ours / m_bare
    print()
    print(f"{'measure':44} {'value':>10} {'target':>10}")
    print(f"{'scenario run / bare kfp.local (median)':44} {ratio:>10.3f} {'<= 1.15':>10}")
    print(f"{'  kflab scenario run, median s':44} {m_ours:>10.2f}")
    print(f"{'  bare kfp.local (same 3 pipelines), s':44} {m_bare:>10.2f}")
    print(f"{'kflab --help start-up, median s':44} {m_help:>10.3f} {'< 0.3':>10}")
    print(f"(rounds={opts.rounds}, help runs={opts.help_runs}, cpus={os.cpu_count()}, "
          f"help via {' '.join(help_cmd[-2:]) if not script.exists() else 'kflab'})")


if __name__ == "__main__":
    main()
