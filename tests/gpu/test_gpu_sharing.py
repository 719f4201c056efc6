"""GPUs shared as the device plugin shares them (issue 37), on real NVIDIA GPUs; skips
without one. The same behaviours are covered without a GPU in tests/unit/test_gpu_identity.py
(with an NVML mock); here NVML, CUDA and the replicas are all real:

- NVML's UUIDs are nvidia-smi's, and CUDA in a replica sees the GPU the ledger gave it;
- a job limited to GPU 0 by UUID and one limited to it by index never run on it together
  (the second waits, Pending), while a job free to use any GPU gets GPU 1 and runs at full
  speed beside the first (bf16 TFLOP/s against the GPU alone);
- after `kill -9` of the kflab process running a job, its replica keeps the GPU until the
  next kflab command stops it, and only then is the GPU given to the next job;
- a job submitted from inside a replica (a process kflab started, as a notebook's terminal
  is) sees the machine's GPUs, not only the one its parent was given;
- CUDA_VISIBLE_DEVICES values that name no GPU are refused, or hide every GPU on purpose.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from lab.backends.local import LocalBackend, gpu_devices, gpus

REPO = Path(__file__).resolve().parents[2]
MACHINE = gpu_devices.machine()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not MACHINE.devices,
                                 reason=f"needs an NVIDIA GPU: {MACHINE.why or 'none'}")]
UUIDS = [g.uuid for g in MACHINE.devices]

# Measures bf16 matmuls for SECONDS and prints the GPU it ran on (CUDA's own UUID).
MATMUL = """
import json, os, sys, time, torch
seconds = float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    n += 20
dt = time.perf_counter() - t0
print("RESULT " + json.dumps({
    "uuid": str(torch.cuda.get_device_properties(0).uuid), "count": torch.cuda.device_count(),
    "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "tflops": 2 * 8192**3 * n / dt / 1e12}),
    flush=True)
"""


def same(nvml_uuid: str, cuda_uuid: str) -> bool:
    return nvml_uuid.removeprefix("GPU-").removeprefix("MIG-") == \
        cuda_uuid.removeprefix("GPU-").removeprefix("MIG-")


def env(state: Path, **extra: str) -> dict[str, str]:
    full = {**os.environ, "KFLAB_STATE": str(state), "COLUMNS": "200", **extra}
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return full


def job(name: str, argv: list[str], gpus_: int = 1) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": {
                "replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [{
                    "name": "pytorch", "command": argv,
                    "resources": {"limits": {"nvidia.com/gpu": gpus_}}}]}}}}}}


def matmul_job(tmp: Path, name: str, seconds: float) -> Path:
    (tmp / "matmul.py").write_text(MATMUL)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job(name, [sys.executable, "matmul.py", str(seconds)])))
    return path


def result(backend: LocalBackend, name: str) -> dict:
    log = backend.store.run_path("PyTorchJob", name, "default") / "master-0.log"
    return json.loads(log.read_text().split("RESULT ", 1)[1].splitlines()[0])


def apply(path: Path, state: Path, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", str(path)],
                            cwd=path.parent, env=env(state, **extra), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_nvml_uuids_are_nvidia_smi_uuids() -> None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        pytest.skip("no nvidia-smi on this machine")
    listed = subprocess.run([smi, "--query-gpu=uuid,compute_cap", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [line.split(", ") for line in listed.strip().splitlines()]
    assert [g.uuid for g in MACHINE.gpus] == [r[0] for r in rows]
    assert [f"{g.capability[0]}.{g.capability[1]}" for g in MACHINE.gpus
            if g.capability] == [r[1] for r in rows]


def test_uuid_and_index_never_share_a_gpu(tmp_path: Path, state: Path) -> None:
    backend = LocalBackend(str(state))
    (tmp_path / "matmul.py").write_text(MATMUL)
    solo = subprocess.run([sys.executable, "matmul.py", "3"], cwd=tmp_path, check=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": UUIDS[0]},
                          capture_output=True, text=True, timeout=300).stdout
    alone = json.loads(solo.split("RESULT ", 1)[1])["tflops"]
    a = apply(matmul_job(tmp_path, "by-uuid", 8), state, CUDA_VISIBLE_DEVICES=UUIDS[0])
    deadline = time.monotonic() + 120
    while "PyTorchJob/default/by-uuid" not in gpus.holders(state):
        assert time.monotonic() < deadline and a.poll() is None
        time.sleep(0.2)
    others = []
    if len(UUIDS) > 1:  # a job free to use any GPU runs beside it, on GPU 1
        others.append(apply(matmul_job(tmp_path, "any", 6), state))
    b = apply(matmul_job(tmp_path, "by-index", 3), state, CUDA_VISIBLE_DEVICES="0")
    outs = {p: p.communicate(timeout=300)[0] for p in (a, b, *others)}
    assert all(p.returncode == 0 for p in outs), outs
    assert "Insufficient nvidia.com/gpu" in outs[b], outs[b]  # it waited, Pending
    ra, rb = result(backend, "by-uuid"), result(backend, "by-index")
    assert same(UUIDS[0], ra["uuid"]) and same(UUIDS[0], rb["uuid"])
    assert ra["count"] == rb["count"] == 1
    speeds = {"alone": alone, "by-uuid": ra["tflops"], "by-index": rb["tflops"]}
    if others:
        rc = result(backend, "any")
        assert same(UUIDS[1], rc["uuid"]) and rc["count"] == 1
        speeds["any (beside by-uuid)"] = rc["tflops"]
    print("bf16 TFLOP/s:", {k: round(v) for k, v in speeds.items()})
    # Never two jobs on one GPU: each ran at (nearly) the speed of a GPU to itself.
    assert all(v > 0.8 * alone for v in speeds.values()), speeds


def test_a_killed_holder_keeps_its_gpu_until_its_replica_is_stopped(tmp_path: Path,
                                                                    state: Path) -> None:
    backend = LocalBackend(str(state))
    holder = apply(matmul_job(tmp_path, "killed", 600), state,
                   CUDA_VISIBLE_DEVICES=UUIDS[0])
    deadline = time.monotonic() + 120
    log = backend.store.run_path("PyTorchJob", "killed", "default") / "master-0.log"
    replica = None
    while replica is None:
        assert time.monotonic() < deadline and holder.poll() is None
        time.sleep(0.5)
        replica = next((p for p in psutil.process_iter(["cmdline"])
                        if (p.info["cmdline"] or [])[-2:] == ["matmul.py", "600"]), None)
    time.sleep(5)  # it is on the GPU now (its log stays empty: it never finishes)
    assert log.exists()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert replica.is_running(), "the replica outlives the kflab process that ran it"
    # the next job asking for that GPU: kflab stops the leftover first, then places it
    nxt = apply(matmul_job(tmp_path, "next", 3), state, CUDA_VISIBLE_DEVICES="0")
    out = nxt.communicate(timeout=300)[0]
    assert nxt.returncode == 0, out
    assert not replica.is_running()
    rn = result(backend, "next")
    assert same(UUIDS[0], rn["uuid"])
    print(f"after the killed holder: {rn['tflops']:.0f} bf16 TFLOP/s on GPU 0")


@pytest.mark.skipif(len(UUIDS) < 2, reason="a job inside a GPU job needs 2 GPUs")
def test_a_job_submitted_from_inside_a_replica_sees_the_machine(tmp_path: Path,
                                                                state: Path) -> None:
    """As from a GPU Notebook's terminal: the outer job holds GPU 0 and its replica (which
    has CUDA_VISIBLE_DEVICES=<GPU 0>) submits an inner job, which gets GPU 1."""
    backend = LocalBackend(str(state))
    (tmp_path / "matmul.py").write_text(MATMUL)
    (tmp_path / "inner.yaml").write_text(yaml.safe_dump(
        job("inner", [sys.executable, "matmul.py", "2"])))
    (tmp_path / "outer.yaml").write_text(yaml.safe_dump(job("outer", [
        sys.executable, "-m", "lab.cli", "apply", "-f", "inner.yaml"])))
    out = subprocess.run([sys.executable, "-m", "lab.cli", "apply", "-f", "outer.yaml"],
                         cwd=tmp_path, env=env(state), capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    got = {o["metadata"]["name"]: o["metadata"]["annotations"]["kflab.dev/gpus"]
           for o in backend.list("PyTorchJob")}
    assert got == {"outer": "master-0=0", "inner": "master-0=1"}
    assert same(UUIDS[1], result(backend, "inner")["uuid"])


@pytest.mark.parametrize(("value", "words"), [
    ("7", "'7' names no GPU on this machine"),
    ("0,0", "'0' names GPU 0 a second time"),
    ("GPU-00000000-dead", "'GPU-00000000-dead' names no GPU"),
    ("MIG-00000000-dead", "'MIG-00000000-dead' names no GPU"),
    ("none", "this machine has 0: CUDA_VISIBLE_DEVICES='none' hides every GPU"),
    ("NoDevFiles", "this machine has 0: CUDA_VISIBLE_DEVICES='NoDevFiles' hides every GPU"),
])
def test_cuda_visible_devices_naming_no_gpu_starts_nothing(tmp_path: Path, state: Path,
                                                           value: str, words: str) -> None:
    out = apply(matmul_job(tmp_path, "j", 1), state, CUDA_VISIBLE_DEVICES=value)
    text = out.communicate(timeout=120)[0]
    assert out.returncode == 2, text
    assert words in text and len(text.strip().splitlines()) == 2, text  # error + fix lines
    assert LocalBackend(str(state)).list("PyTorchJob") == []


def test_gpu_check_is_skipped_with_the_reason_when_the_variable_hides_the_gpus(
        tmp_path: Path, state: Path) -> None:
    """Issue 37, Why 4: with `none` gpu-check said a GPU was available, then failed."""
    report = tmp_path / "r.json"
    out = subprocess.run([sys.executable, "-m", "lab.cli", "scenario", "test", "gpu-check",
                          "--json", str(report)], cwd=tmp_path,
                         env=env(state, CUDA_VISIBLE_DEVICES="none"),
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    text = report.read_text()
    assert "hides every GPU" in text and '"skipped"' in text, text[-2000:]
