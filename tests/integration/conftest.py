"""A real systemd node for the role tests: a podman container (runc) of the image that
scripts/standins/20-systemd-target.sh builds, reached over SSH on 127.0.0.1 like a VM.
One container per test module; removed afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lab.backends.local.procs import free_port
from tests.integration.ansible_helpers import REPO

IMAGE = "localhost/kflab-systemd-target:bookworm"
CONF = REPO / "tests" / "integration" / "systemd_target" / "containers.conf"


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONTAINERS_CONF": str(CONF)}
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=check)


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Iterator[dict]:
    if not shutil.which("podman") or os.geteuid() != 0:
        pytest.skip("needs root and podman (scripts/standins/20-systemd-target.sh)")
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        pytest.skip(f"{IMAGE} not built: run scripts/standins/20-systemd-target.sh")
    tmp = tmp_path_factory.mktemp("target")
    key = tmp / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    name, port = f"kflab-target-{uuid.uuid4().hex[:8]}", free_port()
    podman("run", "-d", "--name", name, "--hostname", "kflab-node",
           "-p", f"127.0.0.1:{port}:22", IMAGE)
    try:
        podman("cp", f"{key}.pub", f"{name}:/root/.ssh/authorized_keys")
        podman("exec", name, "chown", "root:root", "/root/.ssh/authorized_keys")
        # A swap entry, as a VM image may have: the node role must comment it out.
        podman("exec", name, "sh", "-c", "echo '/swapfile none swap sw 0 0' >> /etc/fstab")
        for _ in range(60):
            if podman("exec", name, "systemctl", "is-active", "ssh", check=False).stdout.strip() \
                    == "active":
                break
            time.sleep(0.5)
        inventory = tmp / "inventory.ini"
        inventory.write_text(
            "[lab]\n"
            f"kflab-node ansible_host=127.0.0.1 ansible_port={port} ansible_user=root "
            f"ansible_ssh_private_key_file={key} ansible_python_interpreter=/usr/bin/python3 "
            # A throwaway test container: its host key is new on every run.
            "ansible_ssh_common_args='-o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null'\n")
        yield {"name": name, "inventory": str(inventory), "tmp": tmp, "port": port,
               "key": str(key)}
    finally:
        podman("rm", "-f", name, check=False)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A stand-in cluster (tests/standins/cluster.py: both API servers, the stand-in
    controllers and kubelet), one per module that asks for it; a controller error fails it."""
    from tests.conftest import SHARED, need_upstream
    from tests.standins.cluster import missing_binaries, start_world

    if missing_binaries():
        pytest.skip(f"API-server stand-ins not built ({', '.join(missing_binaries())}): run "
                    "scripts/standins/40-crd-apiserver.sh and 41-kube-apiserver.sh")
    need_upstream()
    w = start_world(tmp_path_factory.mktemp("world"), SHARED)
    yield w
    w.stop()
    assert not w.controllers.errors, w.controllers.errors


# Real API servers (v1.36 CRDs, v1.20 core), session-scoped: see apiservers.py.
from tests.integration.apiservers import core_apiserver, crd_apiserver  # noqa: E402, F401
