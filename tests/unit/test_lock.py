"""The install lock (locks/, scripts/lock.py) and setup.sh's fail-fast lines.

The lock is what every install uses (`pip --no-deps --require-hashes`: nothing is resolved at
install time), so a pyproject.toml change without `python3 scripts/lock.py` must fail here, and
every direct requirement must be in the lock, pinned and hashed, for every supported platform
set and Python (3.11.2 is Debian 12's: soupsieve 4 needs 3.11.5, so its entry is forked).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PYTHONS = ["3.11.2", "3.11.7", "3.12.1", "3.13.0"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


lock = _load("lock")
install_locked = _load("install_locked")

ENVS = {  # what packaging's markers see on each platform set
    "linux-x86_64": {"sys_platform": "linux", "platform_machine": "x86_64",
                     "platform_system": "Linux", "os_name": "posix"},
    "linux-aarch64": {"sys_platform": "linux", "platform_machine": "aarch64",
                      "platform_system": "Linux", "os_name": "posix"},
    "macos-arm64": {"sys_platform": "darwin", "platform_machine": "arm64",
                    "platform_system": "Darwin", "os_name": "posix"},
}


def entries(path: Path) -> list[tuple[Requirement, list[str]]]:
    """(requirement, its hashes) per package block of a lock file."""
    out: list[tuple[Requirement, list[str]]] = []
    for name, lines in lock.blocks(path.read_text()):
        head = lines[0].rstrip(" \\")
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", "\n".join(lines))
        out.append((Requirement(head), hashes))
    return out


def env_for(plat: str, python: str) -> dict[str, str]:
    return {**ENVS[plat], "python_version": ".".join(python.split(".")[:2]),
            "python_full_version": python, "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "extra": ""}


def test_lock_matches_pyproject() -> None:
    assert lock.check() == [], "run: python3 scripts/lock.py"
    assert set(ENVS) == set(lock.PLATFORMS)


def test_a_pyproject_change_makes_the_lock_stale(tmp_path: Path) -> None:
    shutil.copytree(REPO / "locks", tmp_path / "locks")
    text = (REPO / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text)
    assert lock.check(tmp_path) == []
    changed = text.replace('"psutil>=5.9",', '"psutil>=5.9",\n  "tabulate>=0.9",', 1)
    assert changed != text
    (tmp_path / "pyproject.toml").write_text(changed)
    problems = lock.check(tmp_path)
    assert problems and all("other inputs" in p for p in problems)


@pytest.mark.parametrize("plat", sorted(ENVS))
def test_every_requirement_is_locked_pinned_and_hashed(plat: str) -> None:
    project = lock.project()["project"]
    for group in lock.groups(lock.project()):
        locked = entries(REPO / "locks" / plat / f"{group}.txt")
        for req, hashes in locked:
            spec = list(req.specifier)
            assert len(spec) == 1 and spec[0].operator == "==", (plat, group, str(req))
            assert hashes, f"{plat}/{group}: {req.name} has no hash"
            name = canonicalize_name(req.name)
            assert name != "torch" and not name.startswith(("nvidia-cu", "cuda-", "triton")), \
                f"{plat}/{group}: {name} is torch's CUDA runtime (the GPU user's, never locked)"
        wanted = [Requirement(r) for r in project["dependencies"]]
        if group != "base":
            wanted += [Requirement(r) for r in project["optional-dependencies"][group]]
        for python in PYTHONS:
            env = env_for(plat, python)
            active = {}
            for req, _ in locked:
                if req.marker is None or req.marker.evaluate(env):
                    name = canonicalize_name(req.name)
                    assert name not in active, f"{plat}/{group}/{python}: {name} twice"
                    active[name] = next(iter(req.specifier)).version
            for want in wanted:
                name = canonicalize_name(want.name)
                if (want.marker and not want.marker.evaluate(env)) or name == "torch":
                    continue
                assert name in active, f"{plat}/{group} on Python {python} lacks {name}"
                assert want.specifier.contains(active[name], prereleases=True), \
                    f"{plat}/{group}/{python}: {name}=={active[name]} is not {want.specifier}"


def test_debian12_python_gets_a_soupsieve_it_can_run() -> None:
    """The 29-minute backtrack of issue 20: soupsieve 4 needs Python >= 3.11.5."""
    locked = entries(REPO / "locks" / "linux-x86_64" / "notebooks.txt")
    env = env_for("linux-x86_64", "3.11.2")
    soup = [r for r, _ in locked if r.name == "soupsieve" and r.marker.evaluate(env)]
    assert len(soup) == 1
    assert Marker("python_full_version >= '3.11.5'").evaluate(env) is False
    assert int(next(iter(soup[0].specifier)).version.split(".")[0]) < 4


def test_torch_range_keeps_a_cuda_build_and_replaces_others() -> None:
    rng = ">=2.11,<2.14"
    assert install_locked.in_range("2.11.0+cu128", rng)
    assert install_locked.in_range("2.13.0+cpu", rng)
    assert not install_locked.in_range("2.14.0", rng)
    assert not install_locked.in_range("2.10.2+cu126", rng)
    py = lock.project()
    assert install_locked.in_range(py["tool"]["kflab"]["torch"], next(
        r for r in py["project"]["optional-dependencies"]["local"]
        if r.startswith("torch")).split("torch", 1)[1])


def _setup(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KFLAB_VENV": str(tmp_path / "venv"), **env}
    return subprocess.run(["bash", str(REPO / "scripts" / "setup.sh"), "local"], env=env,
                          capture_output=True, text=True, timeout=300)


def test_setup_refuses_an_unsupported_python_in_one_line(tmp_path: Path) -> None:
    """A stand-in interpreter (no Python 3.10 or 3.14 is installed here): it answers the version
    test as an old Python would."""
    fake = tmp_path / "python3.10"
    fake.write_text('#!/bin/sh\ncase "$2" in *version_info*) exit 1;; *) echo 3.10.12;; esac\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    res = _setup(tmp_path, {"KFLAB_PYTHON": str(fake)})
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        "setup.sh: 3.10.12 is not supported: kflab needs Python 3.11, 3.12 or 3.13 "
        "(set KFLAB_PYTHON=/path/to/python3.X)"]


def test_setup_names_python3_venv_when_ensurepip_is_missing(tmp_path: Path) -> None:
    """Debian's python3 without python3-venv has no ensurepip: shadowed here by a module that
    fails to import as Debian's stub does."""
    (tmp_path / "ensurepip").mkdir()
    (tmp_path / "ensurepip" / "__init__.py").write_text("raise ImportError('no ensurepip')\n")
    res = _setup(tmp_path, {"KFLAB_PYTHON": sys.executable, "PYTHONPATH": str(tmp_path)})
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1
    assert "sudo apt install python3-venv" in res.stderr


def test_setup_fails_at_once_without_the_package_index(tmp_path: Path) -> None:
    """No network, as a closed port on loopback: one line, before pip starts (the venv is made
    without pip: creating one with pip takes ~20 s on a busy machine, and pip is never reached)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True)
    res = _setup(tmp_path, {"KFLAB_PYTHON": sys.executable,
                            "PIP_INDEX_URL": "http://127.0.0.1:9/simple/"})
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the package index" in lines[0], res.stderr
    assert not (tmp_path / "venv" / ".kflab-installed").exists()
