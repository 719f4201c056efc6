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

What a tab fetches is what the page fetches: on a change, the view it shows (a run's page:
/ui-api/runs/NAME; the runs list: the KFP API's ListRuns and ListExperiments, as the page
reads them since it was split by view; an experiment's page and the experiments list).

--baseline DIR adds a third condition, side by side with the other two: the UI open, served
by the kflab checkout in DIR (an older version: its server, and what its page fetched, given
by --baseline-pages), so a change to the UI is measured against what it replaced in the same
run, on the same machine at the same time.

--idle SECONDS measures the UI with nothing running: a state folder with a few finished runs,
--tabs open pages (each an event stream, its view fetched once), and the server process's CPU
time over SECONDS, as a percentage of one core; for this checkout and, with --baseline, the
baseline's, alternately.

Prints each condition's median wall time, the UI's reads and events, the ratios open/closed,
the CPU time kflab's own process spent (its bookkeeping: less noisy than wall time on a busy
machine) and the UI process's, and the load average before and after.

Usage: python bench/ui_overhead.py [--trials 8] [--tasks 4] [--reps 3] [--poll 0.2]
           [--baseline DIR] [--idle SECONDS] [--tabs 3]
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
# `--tab ROOT POLL --code DIR ...`: the UI of the checkout in DIR (a baseline) is imported
CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv[:6] else str(REPO)
sys.path.insert(0, CODE)

from lab.backends.local import LocalBackend  # noqa: E402
from lab.scenarios.actions import pipeline_run_manifest  # noqa: E402
from lab.webui.server import UiServer  # noqa: E402

# what the page fetches when the view it shows changes (this checkout's page; NAME: the
# workload's object), and what the page before it fetched (the default --baseline-pages)
PAGES = {"runs": ["/ui-api/runs/NAME",
                  "/apis/v2beta1/runs?page_size=20&sort_by=created_at+desc",
                  "/apis/v2beta1/experiments?page_size=200"],
         "experiments": ["/ui-api/experiments/NAME", "/ui-api/experiments"]}
OLD_PAGES = {"runs": ["/ui-api/runs/NAME", "/ui-api/runs"],
             "experiments": ["/ui-api/experiments/NAME", "/ui-api/experiments"]}

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
        # the token as a bearer: every version of the server takes it so (cookie names differ)
        self.cookie = {"Authorization": f"Bearer {server.token}"}
        self.threads = [threading.Thread(target=self._stream, daemon=True),
                        threading.Thread(target=self._poll, daemon=True)]
        for t in self.threads:
            t.start()

    def _read(self) -> None:
        for page in self.pages:
            with contextlib.suppress(OSError):  # 404 until the workload's object exists
                urllib.request.urlopen(urllib.request.Request(
                    f"{self.server.host}{page}", headers=self.cookie), timeout=30).read()
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


def tab_process(root: str, pages: list[str], poll: float, tabs: int = 1) -> None:
    """`--tab ROOT POLL [--code DIR] [--tabs N] PAGE...`: `kflab ui`'s server and the open
    tab(s), in a process of their own as they are in use (the UI is its own command, the
    browser its own program), so they share no interpreter lock with the workload. Prints
    `ready` once the streams are connected; stops when stdin closes, printing its page
    reads, change events and CPU seconds."""
    server = UiServer(LocalBackend(root), Path(root)).start()
    open_tabs = [Tab(server, pages, poll) for _ in range(tabs)]
    for tab in open_tabs:
        tab._read()  # each tab draws its view once when it opens
    deadline = time.monotonic() + 30
    while server.watcher.clients < tabs and time.monotonic() < deadline:
        time.sleep(0.02)
    cpu0 = time.process_time()
    print("ready", flush=True)
    sys.stdin.read()
    for tab in open_tabs:
        tab.close()
    cpu = time.process_time() - cpu0
    server.stop()
    print(sum(t.reads for t in open_tabs), sum(t.events for t in open_tabs), f"{cpu:.4f}",
          flush=True)


def start_tabs(root: Path, poll: float, pages: list[str], code: str | None = None,
               tabs: int = 1) -> Any:
    """The UI (of this checkout, or of the one in `code`) and its tabs, in a process."""
    import subprocess

    root.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, __file__, "--tab", str(root), str(poll)]
    argv += ["--code", code] if code else []
    argv += ["--tabs", str(tabs)] if tabs != 1 else []
    proc = subprocess.Popen([*argv, *pages], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def timed(work: Path, label: str, ui: str, poll: float, pages: list[str],
          run: Callable[[LocalBackend], None], code: str | None = None
          ) -> tuple[float, float, float, int, int]:
    """Wall time and this process's CPU time of one run; with the UI open (`ui`: "open", or
    "baseline" for the checkout in `code`) also the UI's CPU time, page reads and change
    events."""
    root = work / f"state-{label}-{ui}"
    backend = LocalBackend(str(root))
    proc = None
    if ui != "closed":
        proc = start_tabs(root, poll, pages, code if ui == "baseline" else None)
    t0, cpu0 = time.perf_counter(), time.process_time()
    run(backend)
    took, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if proc is None:
        return took, cpu, 0.0, 0, 0
    out, _ = proc.communicate("", timeout=120)
    reads, events, ui_cpu = out.split()
    return took, cpu, float(ui_cpu), int(reads), int(events)


def idle(args: argparse.Namespace) -> None:
    """The UI's own cost with nothing running: --tabs pages open on a state folder with a few
    finished runs, for --idle seconds; this checkout's UI and the baseline's, alternately."""

    def cpu_of(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "chain.py").write_text(PIPELINE.format(extra=2))
        root = work / "state"
        backend = LocalBackend(str(root))
        for i in range(3):
            backend.apply(pipeline_run_manifest("chain.py", f"run-{i}", {"n": i}), base_dir=work)
        versions = [("this checkout", None, PAGES)]
        if args.baseline:
            versions.append(("baseline", args.baseline, OLD_PAGES))
        load0 = os.getloadavg()
        found: dict[str, list[float]] = {}
        for rep_ in range(args.reps):
            for label, code, pages in versions if rep_ % 2 == 0 else versions[::-1]:
                proc = start_tabs(root, 0, [p.replace("NAME", "run-0") for p in pages["runs"]],
                                  code, args.tabs)
                c0, t0 = cpu_of(proc.pid), time.monotonic()
                time.sleep(args.idle)
                share = (cpu_of(proc.pid) - c0) / (time.monotonic() - t0)
                proc.communicate("", timeout=60)
                found.setdefault(label, []).append(100 * share)
        load1 = os.getloadavg()
    print(f"idle: {args.tabs} tabs open on the runs list, {args.idle:g} s each, "
          f"{args.reps} reps, cpus={os.cpu_count()}")
    print(f"load average before {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}, "
          f"after {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}")
    for label, shares in found.items():
        print(f"{label:14s} the UI process's CPU: median {statistics.median(shares):.2f} % of "
              f"one core  {[round(s, 2) for s in shares]}")
    print("markdown: | UI | CPU, % of one core (median) |")
    print("markdown: |---|---|")
    for label, shares in found.items():
        print(f"markdown: | {label} | {statistics.median(shares):.2f} |")


def main() -> None:
    if sys.argv[1:2] == ["--tab"]:
        rest, tabs = sys.argv[4:], 1
        if rest[:1] == ["--code"]:
            rest = rest[2:]
        if rest[:1] == ["--tabs"]:
            tabs, rest = int(rest[1]), rest[2:]
        return tab_process(sys.argv[2], rest, float(sys.argv[3]), tabs)
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--poll", type=float, default=0.2)
    ap.add_argument("--baseline", help="a kflab checkout whose UI is measured side by side")
    ap.add_argument("--idle", type=float, default=0, help="seconds of idle measurement")
    ap.add_argument("--tabs", type=int, default=3)
    args = ap.parse_args()
    if args.idle:
        return idle(args)
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
        conditions = ["closed", "open", *(["baseline"] if args.baseline else [])]
        results: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        ui_cpus: dict[tuple[str, str], list[float]] = {}
        seen: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for rep in range(args.reps):
            for name, (view, run) in workloads.items():
                # each repetition in another order: no condition always runs first
                order = conditions[rep % len(conditions):] + conditions[:rep % len(conditions)]
                for ui in order:
                    obj = f"bench-{rep}-{ui}"
                    pages = (OLD_PAGES if ui == "baseline" else PAGES)[view]
                    took, cpu, ui_cpu, reads, events = timed(
                        work, f"{name}-{rep}", ui, args.poll,
                        [p.replace("NAME", obj) for p in pages],
                        lambda b, r=run, o=obj: r(b, o), args.baseline)
                    results.setdefault((name, ui), []).append(took)
                    cpus.setdefault((name, ui), []).append(cpu)
                    if ui != "closed":
                        seen.setdefault((name, ui), []).append((reads, events))
                        ui_cpus.setdefault((name, ui), []).append(ui_cpu)
    load1 = os.getloadavg()
    print(f"trials={args.trials} tasks={args.tasks} reps={args.reps} poll={args.poll}s "
          f"cpus={os.cpu_count()}" + (f" baseline={args.baseline}" if args.baseline else ""))
    print(f"load average before {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}, "
          f"after {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}")
    rows: dict[str, list[str]] = {ui: [] for ui in conditions[1:]}
    for name in workloads:
        c = statistics.median(results[(name, "closed")])
        cc = statistics.median(cpus[(name, "closed")])
        print(f"{name:10s} UI closed:   median {c:6.2f} s  "
              f"{[round(t, 2) for t in results[(name, 'closed')]]}")
        for ui in conditions[1:]:
            o = statistics.median(results[(name, ui)])
            co = statistics.median(cpus[(name, ui)])
            print(f"{name:10s} UI {ui + ':':9s} median {o:6.2f} s  "
                  f"{[round(t, 2) for t in results[(name, ui)]]}  "
                  f"(page reads, change events) per run {seen[(name, ui)]}")
            print(f"{name:10s} {ui}/closed: {o / c:.3f}   kflab's own CPU time (in-process "
                  f"bookkeeping): median {cc:.3f} s closed, {co:.3f} s {ui}, ratio "
                  f"{co / cc:.3f}; the UI and tab's CPU time per run: median "
                  f"{statistics.median(ui_cpus[(name, ui)]):.3f} s")
            rows[ui] += [f"{o / c:.2f}", f"{co / cc:.2f}",
                         f"{statistics.median(ui_cpus[(name, ui)]):.3f} s"]
    tab = f"also polled every {args.poll:g} s" if args.poll > 0 else "as a page"
    print(f"markdown: | UI open ({tab}) | trials: wall time / closed | "
          "kflab's CPU / closed | the UI's CPU per run | pipeline: wall time / closed | "
          "kflab's CPU / closed | the UI's CPU per run |")
    print("markdown: |---|---|---|---|---|---|---|")
    for ui, cells in rows.items():
        label = "this checkout" if ui == "open" else "baseline"
        print(f"markdown: | {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
