"""The File collector's folder, one per trial: Katib's pod webhook mounts an empty volume
at the folder of the collector's path in each trial pod (inject_webhook.go), so trials run
side by side, each writing its own /katib/mnist.log. Locally each trial gets its own folder
mounted there (tuning/mountns.py) when a private mount namespace works here (Linux, as root
or with user namespaces); the test skips where it does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tuning_helpers import container, experiment, write

from lab.backends.local import LocalBackend
from lab.backends.local.tuning.trials import MOUNTNS

TRIAL = """
import os, sys, time
path, x, times = sys.argv[1], float(sys.argv[2].split("=")[1]), sys.argv[3]
if os.listdir(os.path.dirname(path)):  # a pod's metrics volume starts empty
    sys.exit(3)
start = time.time()
with open(path, "a") as fh:
    for step in range(3):
        fh.write(f"loss={x + step}\\n")
        fh.flush()
        time.sleep(0.4)
with open(os.path.join(times, os.environ["KATIB_TRIAL_NAME"]), "w") as fh:
    fh.write(f"{start} {time.time()}")
"""


def _available(folder: Path) -> bool:
    out = subprocess.run([sys.executable, "-I", "-S", str(MOUNTNS), "probe", str(folder)],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() == "ready"


def test_parallel_file_trials_each_get_their_own_folder(tmp_path: Path) -> None:
    katib = tmp_path / "katib"
    katib.mkdir()
    if not _available(katib):
        pytest.skip("no private mount namespace here")
    (tmp_path / "times").mkdir()
    folder = tmp_path / "manifest"
    folder.mkdir()
    write(folder, "trial.py", TRIAL)
    path = katib / "metrics.log"
    obj = experiment(maxTrialCount=3, parallelTrialCount=3, metricsCollectorSpec={
        "collector": {"kind": "File"},
        "source": {"fileSystemPath": {"path": str(path), "kind": "File"}}})
    container(obj)["command"] = [sys.executable, "trial.py", str(path),
                                 "--x=${trialParameters.x}", str(tmp_path / "times"),
                                 "--n=${trialParameters.n}"]
    backend = LocalBackend(str(tmp_path / "state"))
    exp = backend.apply(obj, base_dir=folder)
    assert exp["status"].get("trialsSucceeded") == 3, exp["status"]
    for t in backend.list("Trial"):
        x = float(t["spec"]["parameterAssignments"][0]["value"])
        loss = t["status"]["observation"]["metrics"][0]
        assert (float(loss["min"]), float(loss["latest"])) == pytest.approx((x, x + 2))
    spans = [tuple(map(float, f.read_text().split())) for f in (tmp_path / "times").iterdir()]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all three at once
    assert list(katib.iterdir()) == []  # the host's folder is untouched
    notes = exp["metadata"].get("annotations", {}).get("kflab.dev/local-differences", "")
    assert "katib.collector.file-parallel" not in notes


def test_a_mount_point_removed_between_trials_is_made_again(tmp_path: Path) -> None:
    """The collector's folder removed on the host while the experiment runs (a clean-up,
    another tool): the next trial still gets its own folder there, as the next pod gets
    its volume. The first trial asks for the removal and waits until the test has done it
    (seen through the test's mount namespace, /proc/PID/root, where it is a plain folder).
    Without the fix the second trial failed: "bind ...: No such file or directory"."""
    import os
    import threading
    import time

    katib = tmp_path / "katib"
    katib.mkdir()
    if not _available(katib):
        pytest.skip("no private mount namespace here")
    folder = tmp_path / "manifest"
    folder.mkdir()
    ask = tmp_path / "remove-now"
    write(folder, "trial.py", (
        "import os, sys, time\n"
        "path, ask, host = sys.argv[1:4]\n"
        "open(path, 'a').write('loss=1\\n')\n"
        "if not os.path.exists(ask):  # the first trial only\n"
        "    open(ask, 'w').close()\n"
        "    for _ in range(200):\n"
        "        if not os.path.isdir(host):\n"
        "            break\n"
        "        time.sleep(0.05)\n"))

    def remover() -> None:
        for _ in range(600):
            if ask.exists():
                katib.rmdir()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=remover, daemon=True)
    thread.start()
    path = katib / "metrics.log"
    obj = experiment(maxTrialCount=3, parallelTrialCount=1, metricsCollectorSpec={
        "collector": {"kind": "File"},
        "source": {"fileSystemPath": {"path": str(path), "kind": "File"}}})
    container(obj)["command"] = [sys.executable, "trial.py", str(path), str(ask),
                                 f"/proc/{os.getpid()}/root{katib}",
                                 "--x=${trialParameters.x}", "--n=${trialParameters.n}"]
    exp = LocalBackend(str(tmp_path / "state")).apply(obj, base_dir=folder)
    thread.join(timeout=5)
    assert ask.exists(), "the first trial never asked for the removal"
    assert exp["status"].get("trialsSucceeded") == 3, exp["status"]
    assert katib.is_dir() and list(katib.iterdir()) == []  # made again, still empty
