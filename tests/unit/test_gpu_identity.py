"""One identity per GPU (issue 37): the ledger keys on NVML UUIDs, CUDA_VISIBLE_DEVICES is read
as CUDA reads it and refused where CUDA would quietly hide GPUs, a killed holder keeps its GPUs
until its replicas are stopped, jobs from inside a workload kflab started see the machine,
discovery without NVML says why, and the bf16 labs check the compute capability.

No NVIDIA GPU or driver exists where these tests run, so NVML is a MOCK (tests/standins/nvml:
a stand-in `pynvml` describing the machine, for this process and the kflab processes it
starts). Everything else is real: the ledger file, the CLI, the replicas and their signals.
tests/gpu repeats the GPU-relevant parts on real GPUs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from lab.backends.local import LocalBackend, gpu_devices, gpus
from lab.deps import install_extras
from lab.doctor.rows import Host, gpu_discovery_row
from lab.errors import LabError
from lab.scenarios import checks
from lab.scenarios.availability import cannot_run_here
from lab.scenarios.checks import Context
from lab.scenarios.model import Check
from tests.standins import nvml

REPO = Path(__file__).resolve().parents[2]
G0, G1, G2 = nvml.uuid(0, "aaaa1111"), nvml.uuid(1, "aaaa2222"), nvml.uuid(2, "bbbb3333")
TWO = [{"uuid": G0, "cc": [9, 0]}, {"uuid": G1, "cc": [9, 0]}]


def job(name: str, seconds: float = 0, count: int = 1) -> dict:
    code = ("import os, sys, time; print('gpus=' + os.environ.get('CUDA_VISIBLE_DEVICES', "
            "'unset'), flush=True); time.sleep(float(sys.argv[1]))")
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": {
                "replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [{
                    "name": "pytorch", "command": [sys.executable, "-c", code, str(seconds)],
                    "resources": {"limits": {"nvidia.com/gpu": count}}}]}}}}}}


def seen(backend: LocalBackend, name: str) -> str:
    log = backend.store.run_path("PyTorchJob", name, "default") / "master-0.log"
    return log.read_text().split("gpus=", 1)[1].splitlines()[0].strip()


def cli(args: list[str], state: Path, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process; it inherits the NVML mock through PYTHONPATH."""
    full = {**os.environ, "KFLAB_STATE": str(state), "COLUMNS": "200", **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([*os.environ["PYTHONPATH"].split(os.pathsep),
                                          str(REPO)])
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout, check=False)


# --- CUDA_VISIBLE_DEVICES, read as CUDA reads it ------------------------------------------

MIG_MACHINE = [{"uuid": G0, "cc": [9, 0]}, {"uuid": G1, "cc": [9, 0]},
               {"uuid": G2, "cc": [8, 0], "mig": [
                   {"uuid": "MIG-cccc0000-aaaa-bbbb-cccc-000000000000", "gi": 1, "ci": 0},
                   {"uuid": "MIG-dddd0000-aaaa-bbbb-cccc-000000000000", "gi": 2, "ci": 0}]}]


@pytest.mark.parametrize(("value", "labels"), [
    # CUDA Programming Guide, CUDA_VISIBLE_DEVICES: order kept; `-1` ends the list
    ("1,0", ["1", "0"]), ("0,-1,1", ["0"]), ("-1", []),
    # read as strtoul reads it (torch test_cuda.py TestVisibleDeviceParses: "2, +3, -0, 5")
    (" +1", ["1"]), ("-0", ["0"]), ("1gpu", ["1"]),
    # UUIDs and the prefixes that name one GPU; MIG ids, new and old style
    (G1, ["1"]), ("GPU-aaaa2", ["1"]), (f"{G1},{G0}", ["1", "0"]),
    ("MIG-dddd", ["2:1"]), (f"MIG-{G2}/1/0", ["2:0"]),
    # the words that mean "no GPU" as the whole value, and the empty value
    ("", []), ("none", []), ("void", []), ("NoDevFiles", []),
])
def test_cuda_visible_devices_is_read_as_cuda_reads_it(monkeypatch: pytest.MonkeyPatch,
                                                        value: str, labels: list[str]) -> None:
    nvml.install(monkeypatch, MIG_MACHINE)
    found = gpu_devices.view({"CUDA_VISIBLE_DEVICES": value})
    assert not found.error, found.error
    assert [g.label for g in found.devices] == labels
    if not labels:
        assert "CUDA_VISIBLE_DEVICES" in found.why  # it says why there is no GPU


@pytest.mark.parametrize(("value", "entry", "words"), [
    ("0,7", "'7'", "names no GPU on this machine"),
    ("0,0", "'0'", "names GPU 0 a second time"),
    (f"{G0},GPU-aaaa1", "'GPU-aaaa1'", "names GPU 0 a second time"),
    ("GPU-aaaa", "'GPU-aaaa'", "is the start of 2 GPUs' ids"),
    ("GPU-ffff", "'GPU-ffff'", "names no GPU"),
    (f"0,{G1}", f"'{G1}'", "is not a GPU index"),
    ("abc", "'abc'", "is not a GPU index"),
    ("2", "'2'", "names GPU 2, which is split into MIG devices"),
    ("MIG-eeee", "'MIG-eeee'", "names no GPU"),
])
def test_an_id_that_names_no_gpu_or_one_twice_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                          value: str, entry: str,
                                                          words: str) -> None:
    nvml.install(monkeypatch, MIG_MACHINE)
    found = gpu_devices.view({"CUDA_VISIBLE_DEVICES": value})
    assert found.devices == ()
    assert f"CUDA_VISIBLE_DEVICES={value}: {entry} {words}" in found.error
    assert "\n" not in found.error and "0=GPU-aaaa1111" in found.error  # lists what exists
    with pytest.raises(gpu_devices.GpuError):
        found.check()


def test_nvml_is_asked_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    mock = nvml.install(monkeypatch, TWO)
    for _ in range(5):
        assert gpus.inventory() == [G0, G1]
        gpus.machine_has_gpus()
    assert mock.inits == 1


# --- one identity in the ledger --------------------------------------------------------------

def test_an_index_and_a_uuid_are_one_gpu_to_the_ledger(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37, Why 1: a job run with CUDA_VISIBLE_DEVICES=<UUID of GPU 0> and one run with
    `0` both ran on GPU 0: the ledger compared the strings."""
    nvml.install(monkeypatch, TWO)
    with psutil.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as holder:
        try:
            first = gpus.allocate(tmp_path, "PyTorchJob/default/a", {"master-0": 1},
                                  available=gpus.inventory({"CUDA_VISIBLE_DEVICES": G0[:12]}),
                                  pid=holder.pid)
            assert first == {"master-0": [G0]}
            # "0" is the same GPU: nothing left for a job limited to it ...
            assert gpus.allocate(tmp_path, "PyTorchJob/default/b", {"master-0": 1},
                                 available=gpus.inventory({"CUDA_VISIBLE_DEVICES": "0"})) is None
            # ... and a job free to use any gets the other one
            assert gpus.allocate(tmp_path, "PyTorchJob/default/c", {"master-0": 1}) == \
                {"master-0": [G1]}
        finally:
            holder.kill()


def test_concurrent_jobs_by_uuid_and_by_index_get_different_gpus(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the CLI, as a learner runs them: job a limited to GPU 0 by UUID, job b by index
    while a runs; b waits (Pending, Kubernetes' reason) and runs on GPU 0 once a is done; job c
    without the variable gets GPU 1. Each replica sees its GPU's UUID."""
    nvml.install(monkeypatch, TWO)
    for name, seconds in (("a", 8), ("b", 0), ("c", 0)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(job(name, seconds)))
    a = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", "a.yaml"],
                         cwd=tmp_path, env={**os.environ, "KFLAB_STATE": str(state),
                                            "CUDA_VISIBLE_DEVICES": G0,
                                            "PYTHONPATH": os.environ["PYTHONPATH"]
                                            + os.pathsep + str(REPO)},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        backend = LocalBackend(str(state))
        deadline = time.monotonic() + 60
        while "PyTorchJob/default/a" not in gpus.holders(backend.root):
            assert time.monotonic() < deadline and a.poll() is None
            time.sleep(0.1)
        c = cli(["apply", "-f", "c.yaml"], state, tmp_path)
        assert c.returncode == 0, c.stderr
        assert seen(backend, "c") == G1
        t0 = time.monotonic()
        b = cli(["apply", "-f", "b.yaml"], state, tmp_path, {"CUDA_VISIBLE_DEVICES": "0"})
        assert b.returncode == 0, b.stderr
        assert "b is waiting for GPUs: 0/1 nodes are available: 1 Insufficient " \
               "nvidia.com/gpu." in b.stdout + b.stderr
        assert a.wait(60) == 0
        assert time.monotonic() - t0 >= 1.0  # it waited for a
        assert seen(backend, "a") == G0 and seen(backend, "b") == G0
        got = {o["metadata"]["name"]: o["metadata"]["annotations"]["kflab.dev/gpus"]
               for o in backend.list("PyTorchJob")}
        assert got == {"a": "master-0=0", "b": "master-0=0", "c": "master-0=1"}
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()


def test_wrong_cuda_visible_devices_is_refused_before_anything_starts(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.install(monkeypatch, TWO)
    (tmp_path / "j.yaml").write_text(yaml.safe_dump(job("j")))
    for value, words in (("0,5", "'5' names no GPU on this machine"),
                         ("1,1", "'1' names GPU 1 a second time"),
                         ("GPU-ffff", "'GPU-ffff' names no GPU")):
        out = cli(["apply", "-f", "j.yaml"], state, tmp_path, {"CUDA_VISIBLE_DEVICES": value})
        assert out.returncode == 2, out.stdout + out.stderr
        first, *rest = out.stderr.strip().splitlines()
        assert first.startswith(f"error: j.yaml: CUDA_VISIBLE_DEVICES={value}: {words}")
        assert len(rest) == 1 and "fix:" in rest[0], out.stderr  # one line, and the fix
    # values that hide every GPU on purpose: a job asking for one is refused, saying why
    for value in ("none", "NoDevFiles", ""):
        out = cli(["apply", "-f", "j.yaml"], state, tmp_path, {"CUDA_VISIBLE_DEVICES": value})
        assert out.returncode == 2
        assert f"asks for 1 GPU(s) (master-0: 1) but this machine has 0: " \
               f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU" in out.stderr
    assert LocalBackend(str(state)).list("PyTorchJob") == []  # nothing stored, nothing ran
    # a job that asks for no GPU is not refused for the variable: it is shown none anyway
    (tmp_path / "cpu.yaml").write_text(yaml.safe_dump(job("cpu", count=0)))
    out = cli(["apply", "-f", "cpu.yaml"], state, tmp_path, {"CUDA_VISIBLE_DEVICES": "0,0"})
    assert out.returncode == 0, out.stderr
    assert seen(LocalBackend(str(state)), "cpu") == ""


def test_mig_devices_are_given_out_by_their_own_uuid(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.install(monkeypatch, MIG_MACHINE)
    ids = gpus.inventory()
    assert ids == [G0, G1, "MIG-cccc0000-aaaa-bbbb-cccc-000000000000",
                   "MIG-dddd0000-aaaa-bbbb-cccc-000000000000"]  # not GPU 2 itself
    plan = gpus.allocate(tmp_path, "Notebook/default/nb", {"main": 1},
                         available=gpus.inventory({"CUDA_VISIBLE_DEVICES": "MIG-dddd"}))
    assert plan == {"main": ["MIG-dddd0000-aaaa-bbbb-cccc-000000000000"]}
    assert gpus.describe(plan) == "2:1"


# --- a killed holder keeps its GPUs until its replicas are stopped ------------------------------

def test_a_killed_holder_keeps_its_gpu_until_kflab_stops_its_replica(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37, Why 2: after `kill -9` of the kflab process running a job, its GPU was free
    at once while the replica ran on; the next job was placed on the same GPU."""
    nvml.install(monkeypatch, TWO[:1])
    (tmp_path / "long.yaml").write_text(yaml.safe_dump(job("long", 120)))
    env = {**os.environ, "KFLAB_STATE": str(state),
           "PYTHONPATH": os.environ["PYTHONPATH"] + os.pathsep + str(REPO)}
    owner = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", "long.yaml"],
                             cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    backend = LocalBackend(str(state))
    log = backend.store.run_path("PyTorchJob", "long", "default") / "master-0.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and "gpus=" in log.read_text()):
        assert time.monotonic() < deadline and owner.poll() is None
        time.sleep(0.1)
    record = json.loads((state / "gpus.json").read_text())["PyTorchJob/default/long"]
    replica = next(p for p in psutil.process_iter(["cmdline"])
                   if "time.sleep(float(sys.argv[1]))" in " ".join(p.info["cmdline"] or [])
                   and p.info["cmdline"][-1] == "120")
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert not psutil.pid_exists(record["pid"]) or \
        psutil.Process(record["pid"]).status() == psutil.STATUS_ZOMBIE
    assert replica.is_running(), "the replica outlives its kflab process"
    # The next reader of the ledger stops it first, and only then frees the GPU.
    t0 = time.monotonic()
    assert gpus.allocate(state, "PyTorchJob/default/next", {"master-0": 1}) == \
        {"master-0": [G0]}
    assert time.monotonic() - t0 < 10
    replica.wait(5)
    assert not replica.is_running()


def test_a_dead_holder_whose_replica_cannot_be_stopped_keeps_its_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"A GPU is free only when no process of its holder runs": one kflab may not signal
    (here: stopping is refused, as for another user's process) keeps the GPU held."""
    nvml.install(monkeypatch, TWO[:1])
    token = "pytorchjobs.default.x.0123456789ab"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, "KFLAB_RUN": token})
    try:
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        gpus.allocate(tmp_path, "PyTorchJob/default/x", {"master-0": 1}, pid=child.pid,
                      token=token)
        record = json.loads((tmp_path / "gpus.json").read_text())
        record["PyTorchJob/default/x"]["pid"] = gone.pid  # the holder died
        (tmp_path / "gpus.json").write_text(json.dumps(record))
        monkeypatch.setattr(gpus, "stop_all", lambda *a, **k: 0)  # may not signal it
        assert gpus.allocate(tmp_path, "PyTorchJob/default/y", {"master-0": 1}) is None
        assert "PyTorchJob/default/x" in gpus.holders(tmp_path)
    finally:
        child.kill()
        child.wait()
    assert gpus.allocate(tmp_path, "PyTorchJob/default/y", {"master-0": 1}) == \
        {"master-0": [G0]}


# --- jobs from inside a workload kflab started ------------------------------------------------

def test_a_command_inside_a_workload_sees_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.install(monkeypatch, TWO)
    inside = gpu_devices.given([G0])  # what a notebook server or a replica is given
    assert gpus.inventory(inside) == [G0, G1]
    assert gpus.inventory({**inside, "CUDA_VISIBLE_DEVICES": "1"}) == [G1]  # the user's own
    assert gpus.inventory(gpu_devices.given([])) == [G0, G1]  # a notebook without a GPU


def test_a_job_from_a_notebook_gets_another_gpu_or_waits(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37, Why 3: from a GPU Notebook's terminal a job saw only the Notebook's GPU and
    waited forever; from one without a GPU it was refused ("this machine has 0"). The job
    here runs with the very environment of the Notebook's server (what its terminals and
    kernels inherit)."""
    pytest.importorskip("jupyterlab", reason="needs the notebooks extra (JupyterLab)")
    nvml.install(monkeypatch, TWO)
    backend = LocalBackend(str(state))
    nb = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
          "metadata": {"name": "nb", "namespace": "default"},
          "spec": {"template": {"spec": {"containers": [{
              "name": "nb",
            "image": "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0",
            "resources": {"limits": {
                  "nvidia.com/gpu": 1}}}]}}}}
    backend.apply(nb, base_dir=tmp_path)
    try:
        server = psutil.Process(backend.procs.get("nb_default_nb").pid)
        inside = server.environ()
        assert inside["CUDA_VISIBLE_DEVICES"] == G0 and inside["KFLAB_STATE"] == str(state)
        (tmp_path / "from-nb.yaml").write_text(yaml.safe_dump(job("from-nb")))
        out = subprocess.run([sys.executable, "-m", "lab.cli", "apply", "-f", "from-nb.yaml"],
                             cwd=tmp_path, env=inside, capture_output=True, text=True,
                             timeout=120, check=False)
        assert out.returncode == 0, out.stderr
        assert seen(backend, "from-nb") == G1
        # Both GPUs held (the notebook, and a job): the next one from the notebook waits,
        # Pending with Kubernetes' reason, until a GPU is free.
        gpus.allocate(state, "PyTorchJob/default/other", {"master-0": 1}, pid=os.getpid())
        (tmp_path / "second.yaml").write_text(yaml.safe_dump(job("second")))
        waiting = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f",
                                    "second.yaml"], cwd=tmp_path, env=inside,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while (obj := backend.get("PyTorchJob", "second")) is None or \
                "Pending" not in obj["metadata"].get("annotations", {}).get("kflab.dev/gpus", ""):
            assert time.monotonic() < deadline and waiting.poll() is None
            time.sleep(0.2)
        gpus.release(state, "PyTorchJob/default/other")
        output, _ = waiting.communicate(timeout=60)
        assert waiting.returncode == 0, output
        assert "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." in output
        assert seen(backend, "second") == G1
    finally:
        backend.delete("Notebook", "nb")


# --- without NVML, and the compute capability ---------------------------------------------------

def test_without_nvml_the_refusal_and_doctor_say_why_and_name_the_extra(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.absent(monkeypatch)
    backend = LocalBackend(str(state))
    with pytest.raises(LabError) as exc:
        backend.apply(job("j"), base_dir=tmp_path)
    assert "but this machine has 0: nvidia-ml-py is not installed" in str(exc.value)
    assert install_extras("local") in str(exc.value)  # setup.sh in a clone, else pip
    smi = Host(root=tmp_path, which=lambda name: None, env={})
    row = gpu_discovery_row(smi, nvidia_here=True)  # nvidia-smi lists a GPU
    assert row.status == "warn" and "nvidia-ml-py is not installed" in row.observed
    assert row.advice == install_extras("local")
    assert gpu_discovery_row(smi, nvidia_here=False).status == "pass"  # a CPU-only machine


def test_doctor_lists_the_gpus_by_uuid_and_refuses_a_wrong_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.install(monkeypatch, TWO)
    host = Host(root=tmp_path, which=lambda name: None, env={})
    row = gpu_discovery_row(host, nvidia_here=True)
    assert row.status == "pass" and G0 in row.observed and G1 in row.observed
    assert "compute capability 9.0" in row.observed
    bad = gpu_discovery_row(Host(root=tmp_path, env={"CUDA_VISIBLE_DEVICES": "3"}), True)
    assert bad.status == "fail" and "'3' names no GPU" in bad.observed
    nvml.install(monkeypatch, [{"uuid": G0, "name": "Tesla T4", "cc": [7, 5]}])
    old = gpu_discovery_row(host, nvidia_here=True)
    assert old.status == "warn" and "compute capability 8.0" in old.advice


def test_bf16_steps_need_compute_capability_8(tmp_path: Path, state: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.scenarios.loader import load_scenario

    need = Check("gpus", "msg", 0, {"min": 1, "capability": "8.0"}, "test:1")
    ctx = Context(LocalBackend(str(state)), tmp_path)
    gpu_check = load_scenario(REPO / "scenarios" / "gpu-check")
    nvml.install(monkeypatch, [{"uuid": G0, "name": "Tesla T4", "cc": [7, 5]}])
    out = checks.evaluate(need, ctx, wait=False)
    assert not out.ok and "compute capability 8.0 or newer" in out.observed and "7.5" in \
        out.observed
    assert cannot_run_here(gpu_check) == (
        "needs an NVIDIA GPU with bf16 (compute capability 8.0 or newer: Ampere, Ada, "
        "Hopper...) (compute capability here: 7.5; 8.0 or newer needed)")
    nvml.install(monkeypatch, TWO)
    assert checks.evaluate(need, ctx, wait=False).ok
    assert cannot_run_here(gpu_check) is None
    nvml.absent(monkeypatch)
    why = cannot_run_here(gpu_check) or ""
    assert "(0 GPU(s) here: nvidia-ml-py is not installed" in why
    assert why.endswith(f"{install_extras('local')})")
