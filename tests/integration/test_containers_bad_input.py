"""Bad input for the container runner, through the real CLI: a missing image with
imagePullPolicy Never, an engine that is not running, a port already taken, an image built
for another architecture. Each is refused in one line naming the cause (exit 2), and nothing
is stored or left running."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from containers_helpers import CONF, PREDICTOR, PYTHON, leftovers, podman, use_podman

from lab.backends.local.containers.engine import go_arch
from lab.backends.local.procs import LOOPBACK
from tests.conftest import run_kflab

pytestmark = pytest.mark.slow


def job(image: str, **container: object) -> dict:
    spec = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": image, "command": ["python3", "-c", "print(1)"],
         **container}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "bad", "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": spec}}}


def apply(tmp_path: Path, state: Path, *docs: dict,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    return run_kflab("apply", "-f", str(manifest), cwd=tmp_path,
                     env={"KFLAB_STATE": str(state), "CONTAINERS_CONF": str(CONF),
                          **(env or {})}, timeout=300)


def refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The one error line (and its fix line); exit code 2."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def nothing_left(state: Path) -> None:
    assert leftovers(state) == {"containers": [], "networks": []}
    out = run_kflab("get", "pytorchjobs", "-o", "json", env={"KFLAB_STATE": str(state)})
    assert json.loads(out.stdout or "{}").get("items", []) == [], out.stdout
    assert not list((state / "procs").glob("*.json")) if (state / "procs").is_dir() else True


def test_never_with_a_missing_image_is_refused(state: Path, tmp_path: Path,
                                               monkeypatch) -> None:
    use_podman(monkeypatch)
    missing = "localhost/kflab-not-here:never"
    assert podman("image", "exists", missing).returncode != 0
    # a first document that would run: nothing of the file is applied (checked whole)
    line = refused(apply(tmp_path, state, job(PYTHON) | {"metadata": {"name": "good"}},
                         job(missing, imagePullPolicy="Never")),
                   "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image",
                   missing, "imagePullPolicy is Never")
    assert "ErrImageNeverPull" in line
    nothing_left(state)


def test_an_engine_that_is_not_running_is_named(state: Path, tmp_path: Path) -> None:
    """The Docker CLI with no daemon behind it (this machine has the CLI and no daemon)."""
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI here")
    done = apply(tmp_path, state, job(PYTHON),
                 env={"KFLAB_CONTAINER_ENGINE": "docker",
                      "DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    refused(done, "image localhost/kflab-python:bookworm",
            "Docker is installed but its daemon is not running",
            "Cannot connect to the Docker daemon")
    assert "start Docker, or set KFLAB_CONTAINER_ENGINE=podman" in done.stderr
    nothing_left(state)


def test_no_engine_at_all_names_podman_and_docker(state: Path, tmp_path: Path) -> None:
    done = apply(tmp_path, state, job("docker.io/kubeflowkatib/pytorch-mnist-cpu:latest"),
                 env={"KFLAB_CONTAINER_ENGINE": "none"})
    refused(done, "runs in a container", "Podman or Docker",
            "docker.io/kubeflowkatib/pytorch-mnist-cpu:latest")
    nothing_left(state)


def test_a_port_already_taken_is_refused(state: Path, tmp_path: Path, monkeypatch) -> None:
    use_podman(monkeypatch, PREDICTOR)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text('{"weights": [1], "bias": 0}')
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((LOOPBACK, 0))
        held.listen()
        port = held.getsockname()[1]
        isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": {"name": "taken", "namespace": "default"},
                "spec": {"predictor": {"containers": [{
                    "name": "kserve-container", "image": PREDICTOR,
                    "args": ["--model_name=taken"],
                    "env": [{"name": "STORAGE_URI", "value": "file://./model"}],
                    "ports": [{"containerPort": 8080, "hostPort": port}]}]}}}
        refused(apply(tmp_path, state, isvc), f"hostPort {port}", "already taken",
                "spec.predictor.containers[0]")
    nothing_left(state)
    out = run_kflab("get", "isvc", "-o", "json", env={"KFLAB_STATE": str(state)})
    assert json.loads(out.stdout or "{}").get("items", []) == []


def test_an_image_for_another_architecture_is_refused(state: Path, tmp_path: Path,
                                                      monkeypatch) -> None:
    use_podman(monkeypatch)
    here = go_arch(platform.machine())
    other = "arm64" if here != "arm64" else "amd64"
    image = f"localhost/kflab-other-arch:{other}"
    rootfs = tmp_path / "rootfs.tar"
    payload = tmp_path / "hello"
    payload.write_text("not a program for this machine\n")
    with tarfile.open(rootfs, "w") as tar:
        tar.add(payload, arcname="hello")
    made = podman("import", "--arch", other, str(rootfs), image)
    assert made.returncode == 0, made.stderr
    try:
        refused(apply(tmp_path, state, job(image, imagePullPolicy="Never")),
                f"built for linux/{other}", f"this machine runs {here} images", image)
        nothing_left(state)
    finally:
        podman("rmi", "-f", image)


def _apply_sleeping_job(state: Path, tmp_path: Path, name: str,
                        **popen: Any) -> subprocess.Popen:
    """`kflab apply` started as a user starts it, on a Master + Worker job whose replicas
    (containers of PYTHON) sleep ten minutes."""
    doc = job(PYTHON)
    doc["metadata"]["name"] = name
    c = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    c["command"] = ["python3", "-c", "import time; print('up', flush=True); time.sleep(600)"]
    doc["spec"]["pytorchReplicaSpecs"]["Worker"] = doc["spec"]["pytorchReplicaSpecs"][
        "Master"]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    env = {**os.environ, "KFLAB_STATE": str(state), "CONTAINERS_CONF": str(CONF),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f",
                             str(tmp_path / "job.yaml")], env=env, cwd=tmp_path, **popen)


def test_signals_stop_the_containers(state: Path, tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C (SIGINT) on `kflab apply` of a job whose replicas are containers: the job is
    marked Failed naming the signal, and no container or network is left."""
    use_podman(monkeypatch, PYTHON)
    proc = _apply_sleeping_job(state, tmp_path, "sleepy", stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(leftovers(state)["containers"]) < 2:
            time.sleep(0.3)
        assert len(leftovers(state)["containers"]) == 2
        assert len(leftovers(state)["networks"]) == 1
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert leftovers(state) == {"containers": [], "networks": []}, out
    got = run_kflab("get", "pytorchjob", "sleepy", "-o", "json",
                    env={"KFLAB_STATE": str(state)})
    status = json.loads(got.stdout)["status"]
    assert status["conditions"][-1]["type"] == "Failed"
    assert "SIGINT" in status["conditions"][-1]["message"] or \
        "interrupt" in status["conditions"][-1]["message"].lower()


def test_a_killed_owner_leaves_no_container(state: Path, tmp_path: Path, monkeypatch) -> None:
    """`kflab apply` killed outright (SIGKILL: no handler runs) while its job's replicas run
    as containers: the next command that looks finds the owner dead, marks the job Failed
    and removes the containers and the network by their labels."""
    use_podman(monkeypatch, PYTHON)
    proc = _apply_sleeping_job(state, tmp_path, "orphans", stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(leftovers(state)["containers"]) < 2:
            time.sleep(0.3)
        assert len(leftovers(state)["containers"]) == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    got = run_kflab("get", "pytorchjob", "orphans", "-o", "json",
                    env={"KFLAB_STATE": str(state)})
    status = json.loads(got.stdout)["status"]
    assert status["conditions"][-1]["type"] == "Failed"
    assert "ended without finishing it" in status["conditions"][-1]["message"]
    assert leftovers(state) == {"containers": [], "networks": []}
