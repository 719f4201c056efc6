"""Does an open `kflab ui` slow what runs? Two workloads on the local backend, each with the UI
closed and with the UI open, side by side in one run (interleaved repetitions, medians):

- experiment: Katib trial bookkeeping, an Experiment of --trials trivial trials one at a time
  (parallelTrialCount=1), so what is timed is kflab's own per-trial work (status files, Trial
  objects, the suggestion) plus what the UI's reads take from it;
- pipeline: a pipeline run of --tasks small tasks in a chain, caching off (every task runs).

"UI open" is `kflab ui`'s server and what a browser tab does to it, in a process of their own
(as in use: no interpreter lock shared with the workload): one server-sent event stream
connected to `/events` for the whole run (the watch on the state folder scans it once a
second while a page listens), the workload's page and its list fetched again on every
`change` event the stream sends (as the page does), and, harsher than a page, the same two
polled every --poll seconds (the page itself never polls; 0.2 s by default, 0 for none:
exactly what an open page does).

Prints each condition's median wall time, the UI's reads and events, the ratios open/closed,
the CPU time kflab's own process spent (its bookkeeping: less noisy than wall time on a busy
machine) and the UI process's, and the load average before and after.

Usage: python bench/ui_overhead.py [--trials 8] [--tasks 4] [--reps 3] [--poll 0.2]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab.backends.local import LocalBackend  # noqa: E402
from lab.scenarios.actions import pipeline_run_manifest  # noqa: E402
from lab.webui.server import UiServer  # noqa: E402

TRIAL = 'import sys\nx = float(sys.argv[1].split("=")[1])\nprint(f"loss={(x - 0.3) ** 2:.6f}")\n'

PIPELINE = """\
from kfp import dsl


@dsl.component
def step(x: int) -> int:
    return x + 1


@dsl.pipeline(name="chain")
def chain(n: int = 0) -> int:
    last = step(x=n)
    for _ in range({extra}):
        last = step(x=last.output)
    return last.output
"""


def experiment(name: str, trials: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random"},
            "parallelTrialCount": 1, "maxTrialCount": trials,
            "parameters": [{"name": "x", "parameterType": "double",
                            "feasibleSpace": {"min": "0", "max": "1"}}],
            "trialTemplate": {
                "trialParameters": [{"name": "x", "reference": "x"}],
                "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {
                    "spec": {"restartPolicy": "Never", "containers": [{
                        "name": "training-container", "image": "local",
                        "command": [sys.executable, "trial.py", "--x=${trialParameters.x}"],
                    }]}}}},
            },
        },
    }


class Tab:
    """What an open page does to the server: one event stream, a refetch per change, and
    (harsher than the page) a poll of the page and its list every `poll` seconds."""

    def __init__(self, server: UiServer, pages: list[str], poll: float) -> None:
        self.server, self.pages, self.poll = server, pages, poll
        self.reads = self.events = 0
        self.stop = threading.Event()
        self.cookie = {"Cookie": f"kflab_token={server.token}"}
        self.threads = [threading.Thread(target=self._stream, daemon=True),
                        threading.Thread(target=self._poll, daemon=True)]
        for t in self.threads:
            t.start()

    def _read(self) -> None:
        for page in self.pages:
            with contextlib.suppress(OSError):  # 404 until the workload's object exists
                urllib.request.urlopen(urllib.request.Request(
                    f"{self.server.host}/ui-api/{page}", headers=self.cookie),
                    timeout=30).read()
            self.reads += 1

    def _stream(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        conn.request("GET", "/events", headers={"Host": f"127.0.0.1:{self.server.port}",
                                                **self.cookie})
        res = conn.getresponse()
        assert res.status == 200, res.status
        with contextlib.suppress(OSError, ValueError):
            while not self.stop.is_set():
                line = res.fp.readline()
                if not line:
                    break
                if line.startswith(b"event: change"):
                    self.events += 1
                    self._read()  # the page refetches its view
        conn.close()

    def _poll(self) -> None:
        if self.poll <= 0:  # --poll 0: only what the page itself does
            return
        while not self.stop.wait(self.poll):
            self._read()

    def close(self) -> None:
        self.stop.set()


def tab_process(root: str, pages: list[str], poll: float) -> None:
    """`--tab ROOT POLL PAGE...`: `kflab ui`'s server and the open tab, in a process of their
    own as they are in use (the UI is its own command, the browser its own program), so they
    share no interpreter lock with the workload. Prints `ready` once the stream is connected;
    stops when stdin closes, printing its page reads, change events and CPU seconds."""
    server = UiServer(LocalBackend(root), Path(root)).start()
    tab = Tab(server, pages, poll)
    deadline = time.monotonic() + 30
    while server.watcher.clients < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    cpu0 = time.process_time()
    print("ready", flush=True)
    sys.stdin.read()
    tab.close()
    cpu = time.process_time() - cpu0
    server.stop()
    print(tab.reads, tab.events, f"{cpu:.4f}", flush=True)


def timed(work: Path, label: str, ui_open: bool, poll: float,
          pages: list[str], run: Callable[[LocalBackend], None]
          ) -> tuple[float, float, float, int, int]:
    """Wall time and this process's CPU time of one run; with the UI open also the UI's CPU
    time, page reads and change events."""
    import subprocess

    root = work / f"state-{label}-{int(ui_open)}"
    backend = LocalBackend(str(root))
    proc = None
    if ui_open:
        root.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([sys.executable, __file__, "--tab", str(root), str(poll),
                                 *pages], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    t0, cpu0 = time.perf_counter(), time.process_time()
    run(backend)
    took, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if proc is None:
        return took, cpu, 0.0, 0, 0
    out, _ = proc.communicate("", timeout=120)
    reads, events, ui_cpu = out.split()
    return took, cpu, float(ui_cpu), int(reads), int(events)


def main() -> None:
    if sys.argv[1:2] == ["--tab"]:
        return tab_process(sys.argv[2], sys.argv[4:], float(sys.argv[3]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--poll", type=float, default=0.2)
    args = ap.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "trial.py").write_text(TRIAL)
        (work / "chain.py").write_text(PIPELINE.format(extra=max(0, args.tasks - 1)))

        def trials(b: LocalBackend, name: str) -> None:
            b.apply(experiment(name, args.trials), base_dir=work)

        def pipeline(b: LocalBackend, name: str) -> None:
            b.apply(pipeline_run_manifest("chain.py", name, {"n": 1}, cache=False),
                    base_dir=work)

        workloads: dict[str, tuple[str, Callable[[LocalBackend, str], None]]] = {
            "experiment": ("experiments", trials), "pipeline": ("runs", pipeline)}
        results: dict[tuple[str, bool], list[float]] = {}
        cpus: dict[tuple[str, bool], list[float]] = {}
        ui_cpus: dict[str, list[float]] = {}
        seen: dict[str, list[tuple[int, int]]] = {}
        for rep in range(args.reps):
            for name, (view, run) in workloads.items():
                for ui_open in (False, True) if rep % 2 == 0 else (True, False):
                    obj = f"bench-{rep}-{int(ui_open)}"
                    took, cpu, ui_cpu, reads, events = timed(
                        work, f"{name}-{rep}", ui_open, args.poll, [f"{view}/{obj}", view],
                        lambda b, r=run, o=obj: r(b, o))
                    results.setdefault((name, ui_open), []).append(took)
                    cpus.setdefault((name, ui_open), []).append(cpu)
                    if ui_open:
                        seen.setdefault(name, []).append((reads, events))
                        ui_cpus.setdefault(name, []).append(ui_cpu)
    load1 = os.getloadavg()
    print(f"trials={args.trials} tasks={args.tasks} reps={args.reps} poll={args.poll}s "
          f"cpus={os.cpu_count()}")
    print(f"load average before {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}, "
          f"after {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}")
    for name in workloads:
        c, o = (statistics.median(results[(name, u)]) for u in (False, True))
        print(f"{name:10s} UI closed: median {c:6.2f} s  "
              f"{[round(t, 2) for t in results[(name, False)]]}")
        print(f"{name:10s} UI open:   median {o:6.2f} s  "
              f"{[round(t, 2) for t in results[(name, True)]]}  "
              f"(page reads, change events) per run {seen[name]}")
        cc, co = (statistics.median(cpus[(name, u)]) for u in (False, True))
        print(f"{name:10s} open/closed: {o / c:.3f}   kflab's own CPU time (in-process "
              f"bookkeeping): median {cc:.3f} s closed, {co:.3f} s open, ratio {co / cc:.3f}; "
              f"the UI and tab's CPU time per run: median "
              f"{statistics.median(ui_cpus[name]):.3f} s")


if __name__ == "__main__":
    main()
