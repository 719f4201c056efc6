"""Rootless Podman, as a learner's laptop runs it: kflab as a non-root user with subordinate
ids (`kflab-rootless`, made by scripts/standins/26-rootless-podman.sh), on Debian's own
python3 with the base lock, no variables of this machine's (PIP_*, PYTHON*) but the podman
configuration. A PyTorchJob of two replicas finds its master by the operator's name in a
rootless job network, writes into the manifest's folder as the user (not as root), a manifest
with cpu/memory limits is told plainly that cgroups v1 keeps them from applying, doctor says
"rootless", and nothing is left in the user's podman."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from containers_helpers import CONF, PYTHON, REPO

pytestmark = pytest.mark.slow
USER = "kflab-rootless"
SCRIPT = "scripts/standins/26-rootless-podman.sh"

REPLICA = """\
import os, socket, time
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    srv = socket.create_server(("0.0.0.0", port))
    conn, _ = srv.accept()
    msg = conn.recv(64).decode()
    open("from-worker.txt", "w").write(msg)
    print("master got", msg, "as uid", os.getuid(), flush=True)
else:
    for _ in range(600):
        try:
            s = socket.create_connection((addr, port), timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    s.sendall(f"rank {os.environ['RANK']} via {addr}:{port}".encode())
"""


@pytest.fixture(scope="module")
def user() -> pwd.struct_passwd:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root to act as the rootless user")
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER}: run {SCRIPT}")
    if not (Path(entry.pw_dir) / "venv" / ".kflab-lock").exists():
        pytest.skip(f"{USER} has no venv: run {SCRIPT}")
    return entry


def as_user(user: pwd.struct_passwd, *argv: str, cwd: Path,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {"HOME": user.pw_dir, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "XDG_RUNTIME_DIR": f"/tmp/kflab-rootless-run-{user.pw_uid}",
           "CONTAINERS_CONF": str(CONF), "PYTHONPATH": str(REPO), "COLUMNS": "200",
           "KFLAB_STATE": str(cwd / "state")}
    return subprocess.run(["runuser", "-u", USER, "--", "env", "-i",
                           *(f"{k}={v}" for k, v in env.items()), *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


def kflab(user: pwd.struct_passwd, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return as_user(user, f"{user.pw_dir}/venv/bin/python", "-m", "lab.cli", *args, cwd=cwd)


@pytest.fixture
def folder(user: pwd.struct_passwd) -> Iterator[Path]:
    """A folder of the user's own (pytest's tmp_path is root's: 0700 above it)."""
    work = Path(tempfile.mkdtemp(prefix="kflab-rootless-"))
    os.chown(work, user.pw_uid, user.pw_gid)
    try:
        if as_user(user, "podman", "image", "exists", PYTHON, cwd=work).returncode != 0:
            pytest.skip(f"{PYTHON} is not in {USER}'s podman store: run {SCRIPT}")
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_job_runs_in_rootless_podman(user: pwd.struct_passwd, folder: Path) -> None:
    doctor = kflab(user, "doctor", "--json", cwd=folder)
    rows = {r["name"]: r for r in json.loads(doctor.stdout)} if doctor.stdout.strip() \
        .startswith("[") else {}
    row = rows.get("container engine") or {}
    assert "rootless" in row.get("observed", ""), doctor.stdout + doctor.stderr

    (folder / "replica.py").write_text(REPLICA)

    def spec() -> dict:
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": PYTHON, "command": ["python3", "replica.py"],
             "resources": {"limits": {"cpu": "1", "memory": "256Mi"}}}]}}}

    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "rl", "namespace": "default"},
           "spec": {"pytorchReplicaSpecs": {"Master": spec(), "Worker": spec()}}}
    (folder / "job.yaml").write_text(yaml.safe_dump(job))
    os.chown(folder / "job.yaml", user.pw_uid, user.pw_gid)
    os.chown(folder / "replica.py", user.pw_uid, user.pw_gid)
    done = kflab(user, "apply", "-f", "job.yaml", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads(kflab(user, "get", "pytorchjob", "rl", "-o", "json", cwd=folder).stdout)
    assert got["status"]["conditions"][-1]["type"] == "Succeeded"
    logs = kflab(user, "logs", "pytorchjob", "rl", cwd=folder).stdout
    # root inside the container is the user outside: the file it wrote is the user's
    assert "master got rank 1 via rl-master-0:23456 as uid 0" in logs, logs
    written = folder / "from-worker.txt"
    assert written.read_text() == "rank 1 via rl-master-0:23456"
    assert written.stat().st_uid == user.pw_uid
    if "cgroups v1" in row.get("observed", ""):
        assert "cannot apply resources.limits cpu and memory" in done.stdout
    left = as_user(user, "podman", "ps", "-a", "--format", "{{.Names}}", cwd=folder)
    nets = as_user(user, "podman", "network", "ls", "--format", "{{.Name}}", cwd=folder)
    assert [n for n in left.stdout.split() if n.startswith("kflab-")] == []
    assert [n for n in nets.stdout.split() if n.startswith("kflab-")] == []
