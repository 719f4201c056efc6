"""One GPU allocation for every local kind (lab/backends/local/gpus.py): two workloads that
each ask for a GPU get different ones, or the second waits as a Pending pod does.

No GPU here: NVML is a MOCK (tests/standins/nvml) describing a machine of two GPUs; nothing
else is faked. Jobs and trials are real processes that print the CUDA_VISIBLE_DEVICES they
were given (the GPUs' UUIDs, as the device plugin gives a pod its devices)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tuning_helpers import container, experiment, write

from lab.backends.local import LocalBackend, gpus
from tests.standins import nvml

G0, G1 = nvml.uuid(0), nvml.uuid(1)

JOB = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "job-a"},
    "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
        "containers": [{"name": "pytorch", "command": [
            sys.executable, "-c",
            "import os, sys, time; print('gpus=' + os.environ['CUDA_VISIBLE_DEVICES'], "
            "flush=True); time.sleep(float(sys.argv[1]))", "0"],
            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}},
}


def job(name: str, seconds: float) -> dict:
    import copy

    obj = copy.deepcopy(JOB)
    obj["metadata"]["name"] = name
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "command"][-1] = str(seconds)
    return obj


def test_allocations_never_overlap_and_die_with_their_holder(tmp_path: Path) -> None:
    ids = ["0", "1", "2", "3"]
    a = gpus.allocate(tmp_path, "PyTorchJob/default/a", {"master-0": 1, "worker-0": 1},
                      available=ids)
    b = gpus.allocate(tmp_path, "Trial/default/t", {"main": 1}, available=ids)
    assert a == {"master-0": ["0"], "worker-0": ["1"]} and b == {"main": ["2"]}
    assert gpus.allocate(tmp_path, "Notebook/default/nb", {"main": 2}, available=ids) is None
    # a holder whose process is gone frees its GPUs without anyone cleaning up
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        c = gpus.allocate(tmp_path, "Notebook/default/nb", {"main": 1}, available=ids)
        assert c == {"main": ["3"]}
        gpus.bind(tmp_path, "Notebook/default/nb", proc.pid)
        assert gpus.holders(tmp_path)["Notebook/default/nb"] == {"main": ["3"]}
    finally:
        proc.kill()
        proc.wait()
    assert "Notebook/default/nb" not in gpus.holders(tmp_path)
    gpus.release(tmp_path, "PyTorchJob/default/a")
    assert gpus.allocate(tmp_path, "Notebook/default/nb", {"main": 3}, available=ids) == \
        {"main": ["0", "1", "3"]}


def _log(backend: LocalBackend, name: str) -> str:
    return (backend.store.run_path("PyTorchJob", name, "default") / "master-0.log").read_text()


def test_two_jobs_get_two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23, point 6: both got GPU 0 while GPU 1 sat idle."""
    nvml.install(monkeypatch, nvml.gpus(2))
    backend = LocalBackend(str(tmp_path / "state"))
    backend.apply(job("job-a", 3), base_dir=tmp_path, wait=False)  # a background supervisor
    deadline = time.monotonic() + 30
    while "job-a" not in str(gpus.holders(backend.root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    second = backend.apply(job("job-b", 0), base_dir=tmp_path)
    assert second["metadata"]["annotations"]["kflab.dev/gpus"] == "master-0=1"
    assert f"gpus={G1}" in _log(backend, "job-b")
    while backend.get("PyTorchJob", "job-a")["status"]["conditions"][-1]["type"] != \
            "Succeeded" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert f"gpus={G0}" in _log(backend, "job-a")
    while gpus.holders(backend.root) and time.monotonic() < deadline:
        time.sleep(0.1)  # the supervisor releases them as it exits
    assert gpus.holders(backend.root) == {}


def test_a_job_waits_pending_while_the_only_gpu_is_held(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.install(monkeypatch, nvml.gpus(1))
    backend = LocalBackend(str(tmp_path / "state"))
    messages: list[str] = []
    backend.sink = lambda ev: messages.append(str(ev.get("text", "")))
    held = gpus.allocate(backend.root, "Notebook/default/other", {"main": 1})
    assert held == {"main": [G0]}
    threading.Timer(1.5, gpus.release, (backend.root, "Notebook/default/other")).start()
    t0 = time.monotonic()
    done = backend.apply(job("job-c", 0), base_dir=tmp_path)
    assert time.monotonic() - t0 >= 1.4  # it waited for the GPU
    assert done["status"]["conditions"][-1]["type"] == "Succeeded"
    assert any("0/1 nodes are available: 1 Insufficient nvidia.com/gpu." in m and
               "Notebook/default/other" in m for m in messages), messages
    assert f"gpus={G0}" in _log(backend, "job-c")


TRIAL = """
import os, time
gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
with open("events.log", "a") as fh:
    fh.write("start " + gpu + "\\n")
time.sleep(0.5)
with open("events.log", "a") as fh:
    fh.write("end " + gpu + "\\n")
print("loss=0.5")
"""


def test_parallel_trials_share_out_the_gpus(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Three trials in parallel, one GPU each, two GPUs: never the same GPU at once."""
    nvml.install(monkeypatch, nvml.gpus(2))
    backend = LocalBackend(str(tmp_path / "state"))
    obj = experiment(maxTrialCount=3, parallelTrialCount=3)
    container(obj)["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    write(tmp_path, "trial.py", TRIAL)
    exp = backend.apply(obj, base_dir=tmp_path)
    assert exp["status"]["trialsSucceeded"] == 3
    busy: set[str] = set()
    events = (tmp_path / "events.log").read_text().split()
    assert len(events) == 12
    for what, gpu in zip(events[::2], events[1::2], strict=True):
        assert gpu in (G0, G1)
        if what == "start":
            assert gpu not in busy, events
            busy.add(gpu)
        else:
            busy.discard(gpu)
    assert {t["metadata"]["annotations"]["kflab.dev/gpus"] for t in backend.list("Trial")} \
        == {"0", "1"}
    assert gpus.holders(backend.root) == {}
