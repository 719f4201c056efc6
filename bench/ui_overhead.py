"""Does an open `kflab ui` slow a running experiment? Katib trial bookkeeping on the local
backend with the UI closed vs open (a poller reading the experiment page as the browser
does, every --poll seconds; the page polls every 2 s, the default here is 10x harsher).

Interleaved repetitions, median wall time of a whole experiment of --trials trivial trials
(parallelTrialCount=1), so what is measured is kflab's own per-trial work (status files,
Trial objects, the suggestion) plus the UI's reads competing with it.

Usage: python bench/ui_overhead.py [--trials 8] [--reps 3] [--poll 0.2]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab.backends.local import LocalBackend  # noqa: E402
from lab.webui.server import UiServer  # noqa: E402

TRIAL = 'import sys\nx = float(sys.argv[1].split("=")[1])\nprint(f"loss={(x - 0.3) ** 2:.6f}")\n'


def experiment(name: str, trials: int) -> dict:
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


def one(work: Path, trials: int, ui_open: bool, poll: float, rep: int) -> tuple[float, int]:
    root = work / f"state-{rep}-{int(ui_open)}"
    backend = LocalBackend(str(root))
    name = f"bench-{rep}-{int(ui_open)}"
    reads = 0
    stop = threading.Event()
    server = None
    if ui_open:
        server = UiServer(LocalBackend(str(root)), root).start()
        url = f"{server.host}/ui-api/experiments/{name}"
        headers = {"Cookie": f"kflab_token={server.token}"}

        def poller() -> None:
            nonlocal reads
            while not stop.is_set():
                with contextlib.suppress(OSError):  # 404 until the experiment exists
                    urllib.request.urlopen(urllib.request.Request(url, headers=headers)).read()
                reads += 1
                stop.wait(poll)

        threading.Thread(target=poller, daemon=True).start()
    t0 = time.perf_counter()
    backend.apply(experiment(name, trials), base_dir=work)
    took = time.perf_counter() - t0
    stop.set()
    if server:
        server.stop()
    return took, reads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--poll", type=float, default=0.2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "trial.py").write_text(TRIAL)
        closed, opened, reads = [], [], []
        for rep in range(args.reps):
            for ui_open in (False, True) if rep % 2 == 0 else (True, False):
                took, n = one(work, args.trials, ui_open, args.poll, rep)
                (opened if ui_open else closed).append(took)
                if ui_open:
                    reads.append(n)
        c, o = statistics.median(closed), statistics.median(opened)
        print(f"trials={args.trials} reps={args.reps} poll={args.poll}s")
        print(f"UI closed: median {c:.2f} s  ({c / args.trials * 1000:.0f} ms/trial)  {closed}")
        print(f"UI open:   median {o:.2f} s  ({o / args.trials * 1000:.0f} ms/trial)  {opened}"
              f"  page reads per run {reads}")
        print(f"open/closed: {o / c:.3f}")


if __name__ == "__main__":
    main()
