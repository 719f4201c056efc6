"""The first run of a small pipeline starts its tasks within 0.3 s of the command on a quiet
machine (issue 33 Why 9), checked in a way that holds on a busy one: by CPU time and by
order, never by a wall-clock figure that other jobs' load would decide.

What the 0.3 s is made of: this kflab process's own work up to handing the first task over
(the interpreter, the CLI, kfp, the compile), and the task fork server's start (another
interpreter importing kfp's executor), which now begins at the command's start, beside the
first, instead of after it (lab/fastpath.py, _prestart). On a quiet machine with two
cores the wall time is then that CPU time, so the test asserts

- the kflab process's CPU time when its first task starts is at most 0.3 s, scaled by this
  machine's speed: the CPU time of `python -c pass` measured in the same test, against
  0.028 s on the 2-core development machine (docs/performance.md);
- the fork server began in the first 30 % of the wait for the first task (measured here:
  13-17 %; before, it began after the compile: 43-49 %, at a load average of 15-17).

The first task itself reads both processes' figures from /proc when it starts: kflab is
its fork server's parent."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE_PASS_CPU = 0.028  # `python -c pass`, CPU seconds, 2-core development machine
BUDGET = 0.3

PIPELINE = '''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def probe(i: int, out: str) -> int:
    import json, os, time
    def stat(pid):
        with open(f"/proc/{pid}/stat", "rb") as fh:
            f = fh.read().rsplit(b")", 1)[1].split()
        return {"cpu_ticks": int(f[11]) + int(f[12]), "start_ticks": int(f[19])}
    server = os.getppid()
    with open(f"/proc/{server}/stat", "rb") as fh:
        kflab = int(fh.read().rsplit(b")", 1)[1].split()[1])
    with open(f"{out}/probe-{i}.json", "w") as fh:
        json.dump({"now": time.time(), "server": stat(server), "kflab": stat(kflab)}, fh)
    return i

@dsl.pipeline
def small(out: str):
    probe(i=1, out=out)
    probe(i=2, out=out)
'''


def _boot() -> float:
    with open("/proc/stat", "rb") as fh:
        return next(float(line.split()[1]) for line in fh if line.startswith(b"btime"))


def _pass_cpu() -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_first_run_starts_its_tasks_soon(tmp_path: Path) -> None:
    (tmp_path / "small.py").write_text(PIPELINE)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "KFLAB_NO_PRESTART", "KFLAB_BACKEND",
                        "KFLAB_CONTEXT")}
    env["PYTHONPATH"] = str(REPO)
    hz = os.sysconf("SC_CLK_TCK")
    cpus, orders = [], []
    for n in range(3):
        out = tmp_path / f"out{n}"
        out.mkdir()
        done = subprocess.run(
            [sys.executable, "-m", "lab.cli", "--state", str(tmp_path / f"state{n}"),
             "pipeline", "run", "small.py", "-p", f"out={out}"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        first = min((json.loads(p.read_text()) for p in out.glob("probe-*.json")),
                    key=lambda probe: probe["now"])
        began = _boot() + first["kflab"]["start_ticks"] / hz
        server = _boot() + first["server"]["start_ticks"] / hz
        cpus.append(first["kflab"]["cpu_ticks"] / hz)
        orders.append((server - began) / max(first["now"] - began, 1 / hz))
    scale = max(1.0, statistics.median(_pass_cpu() for _ in range(5)) / REFERENCE_PASS_CPU)
    cpu = statistics.median(cpus)
    assert cpu <= BUDGET * scale, (
        f"kflab used {cpu:.3f} s of CPU before its first task started: over "
        f"{BUDGET} s scaled by this machine's speed ({scale:.2f})")
    assert statistics.median(orders) <= 0.3, (
        f"the task fork server began {statistics.median(orders):.0%} of the way to the "
        "first task: it should start with the command, beside kflab's own start")
