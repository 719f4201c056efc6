"""What the container-runner tests share: the engine environment, the images, leftovers.

The images are built offline by scripts/standins/25-workload-images.sh (Debian's python3 on
a debootstrap base; the torch image adds the CPU wheel torch==2.13.0); podman reads the
project's containers.conf (this machine's open-files cap)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.backends.local.containers import cleanup, engine, images

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "tests" / "integration" / "systemd_target" / "containers.conf"
PYTHON = "localhost/kflab-python:bookworm"
PREDICTOR = "localhost/kflab-custom-predictor:bookworm"
TORCH = "localhost/kflab-torch:bookworm"
SCRIPT = "scripts/standins/25-workload-images.sh"


def podman(*args: str, check: bool = False, timeout: float = 120,
           user: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": str(CONF)}
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=check)


def use_podman(monkeypatch: pytest.MonkeyPatch, *needed: str) -> engine.Engine:
    """Podman as kflab's engine for this test, with the images it needs; skips (naming the
    stand-in script) when they are not here."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/standins/20-systemd-target.sh)")
    if os.geteuid() != 0:
        pytest.skip(f"the test images are in root's podman store ({SCRIPT})")
    monkeypatch.setenv("CONTAINERS_CONF", str(CONF))
    monkeypatch.setenv(engine.ENV, "podman")
    engine.forget()
    images.forget()
    for image in needed:
        if podman("image", "exists", image).returncode != 0:
            pytest.skip(f"{image} is not built: run {SCRIPT}")
    found = engine.current()
    assert found is not None and found.running, found
    return found


def leftovers(state: Path) -> dict[str, list[str]]:
    """Containers and networks still labelled with this state folder."""
    label = f"label={cleanup.STATE}={cleanup.state_id(state)}"
    ps = podman("ps", "-a", "--filter", label, "--format", "{{.Names}}")
    nets = podman("network", "ls", "--filter", label, "--format", "{{.Name}}")
    return {"containers": ps.stdout.split(), "networks": nets.stdout.split()}


def inspect_labels(name: str) -> dict[str, str]:
    out = podman("inspect", name, "--format", "{{json .Config.Labels}}")
    return json.loads(out.stdout or "{}") if out.returncode == 0 else {}
