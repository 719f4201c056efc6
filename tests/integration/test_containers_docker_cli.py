"""The Docker path of the container runner, for real. No Docker daemon runs here (Debian's
docker.io would be a machine-wide daemon for every session), so the Docker CLI on PATH
(28.x) talks to Podman's Docker-compatible API (`podman system service` on a private socket,
started and stopped by this module). This exercises kflab's Docker side -- engine detection
through `docker version/info`, `docker run` argv (labels, `--pull never`, `--network-alias`,
`-p 127.0.0.1:...`), `docker network create/rm`, `docker ps --filter label=...` and
`docker rm -f` for leftovers -- against a real Docker API; what it cannot show is dockerd's
own behaviour behind that API."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from containers_helpers import CONF, PREDICTOR, PYTHON, podman, use_podman
from crds import crd_schema, schema_errors

from lab.backends.local import LocalBackend
from lab.backends.local.containers import cleanup, engine
from lab.kube.conditions import is_true

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def docker_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("docker") is None or shutil.which("podman") is None:
        pytest.skip("needs the docker CLI and podman")
    if os.geteuid() != 0:
        pytest.skip("the test images are in root's podman store")
    sock = tmp_path_factory.mktemp("dockerapi") / "docker.sock"
    env = {**os.environ, "CONTAINERS_CONF": str(CONF)}
    proc = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{sock}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("podman system service did not start")
            time.sleep(0.1)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def docker(docker_api: str, monkeypatch: pytest.MonkeyPatch) -> engine.Engine:
    use_podman(monkeypatch, PYTHON, PREDICTOR)  # the images, the conf
    monkeypatch.setenv("DOCKER_HOST", docker_api)
    monkeypatch.setenv(engine.ENV, "docker")
    engine.forget()
    found = engine.current()
    assert found is not None and found.name == "docker" and found.running, found
    return found


def docker_left(state: Path) -> dict[str, list[str]]:
    label = f"label={cleanup.STATE}={cleanup.state_id(state)}"
    ps = subprocess.run(["docker", "ps", "-a", "--filter", label, "--format", "{{.Names}}"],
                        capture_output=True, text=True, check=True)
    nets = subprocess.run(["docker", "network", "ls", "--filter", label, "--format",
                           "{{.Name}}"], capture_output=True, text=True, check=True)
    return {"containers": ps.stdout.split(), "networks": nets.stdout.split()}


REPLICA = """\
import os, socket, time
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    srv = socket.create_server(("0.0.0.0", port))
    conn, _ = srv.accept()
    print("master got", conn.recv(64).decode(), flush=True)
else:
    for _ in range(300):
        try:
            s = socket.create_connection((addr, port), timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    s.sendall(f"rank {os.environ['RANK']} via {addr}:{port}".encode())
    print("worker sent", flush=True)
"""


def test_pytorchjob_through_the_docker_cli(docker: engine.Engine, state: Path,
                                           tmp_path: Path, shared: Path) -> None:
    (tmp_path / "replica.py").write_text(REPLICA)

    def spec() -> dict:
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": PYTHON, "command": ["python3", "replica.py"]}]}}}

    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "dk", "namespace": "default"},
           "spec": {"pytorchReplicaSpecs": {"Master": spec(), "Worker": spec()}}}
    backend = LocalBackend(str(state))
    obj = backend.apply(obj, base_dir=tmp_path)
    logs = list(backend.logs("PyTorchJob", "dk"))
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded", logs
    assert "[master-0] master got rank 1 via dk-master-0:23456" in logs
    assert schema_errors(crd_schema(shared, "PyTorchJob"), obj) == []
    assert docker_left(state) == {"containers": [], "networks": []}


def test_predictor_through_the_docker_cli_and_down_after_a_killed_client(
        docker: engine.Engine, state: Path, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text(json.dumps({"weights": [2], "bias": 1}))
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "dkr", "namespace": "default"},
            "spec": {"predictor": {"containers": [{
                "name": "kserve-container", "image": PREDICTOR, "args": ["--model_name=dkr"],
                "env": [{"name": "STORAGE_URI", "value": "file://./model"}]}]}}}
    backend = LocalBackend(str(state))
    obj = backend.apply(isvc, base_dir=tmp_path)
    assert is_true(obj["status"], "Ready"), obj["status"]
    assert backend.predict("dkr", {"instances": [[3]]})["predictions"] == [7]
    rec = backend.procs.get("isvc_default_dkr")
    assert rec is not None
    os.killpg(rec.pid, signal.SIGKILL)  # a docker client's container always outlives it
    assert docker_left(state)["containers"]
    backend.down()
    assert docker_left(state) == {"containers": [], "networks": []}
    # and podman (the API's engine) agrees: nothing of this state folder is left
    label = f"label={cleanup.STATE}={cleanup.state_id(state)}"
    assert podman("ps", "-a", "--filter", label, "--format", "{{.Names}}").stdout == ""
