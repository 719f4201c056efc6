"""scripts/setup.sh says what it installs, k of N, and how long it took (issue 33: a cold
install printed nothing for minutes). Real pip, real wheels (two tiny ones made here, installed
from a folder with no index), into a venv of their own."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location("install_locked",
                                               REPO / "scripts" / "install_locked.py")
install_locked = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_locked)


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel (PEP 427): one module and its .dist-info."""
    mod = name.replace("-", "_")
    dist = f"{mod}-{version}.dist-info"
    files = {f"{mod}.py": b"VALUE = 1\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 .encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: kflab-test\nRoot-Is-Purelib: true"
                              b"\nTag: py3-none-any\n"}
    record = "".join(
        f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()}"
        f",{len(d)}\n" for n, d in files.items()) + f"{dist}/RECORD,,\n"
    out = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{dist}/RECORD", record)
    return out


def test_each_package_is_named_with_its_count(tmp_path: Path, monkeypatch) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    lock = tmp_path / "base.txt"
    lines = []
    for name in ("kflab-demo-a", "kflab-demo-b"):
        whl = _wheel(wheels, name, "1.0")
        lines.append(f"{name}==1.0 \\\n    --hash=sha256:"
                     f"{hashlib.sha256(whl.read_bytes()).hexdigest()}\n")
    lock.write_text("# a lock, as scripts/lock.py writes them\n" + "".join(lines))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    out = io.StringIO()
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
           "--disable-pip-version-check"]
    installed, already = install_locked.pip_locked([lock], site, install_locked.Progress(out),
                                                   pip_cmd=pip)
    text = out.getvalue()
    assert (installed, already) == (2, 0), text
    assert "  [1/2] getting kflab-demo-a 1.0\n" in text or \
        "  [1/2] getting kflab-demo-a 1.0 (" in text, text
    assert "[2/2] getting kflab-demo-b 1.0" in text, text
    assert "\r" not in text  # piped: plain lines
    assert sorted(p.name for p in site.glob("kflab_demo_*.dist-info")) == \
        ["kflab_demo_a-1.0.dist-info", "kflab_demo_b-1.0.dist-info"]

    out = io.StringIO()  # again: nothing to get, both already there
    assert install_locked.pip_locked([lock], site, install_locked.Progress(out),
                                     pip_cmd=pip) == (0, 2)


def test_setup_ends_with_the_time_it_took(tmp_path: Path) -> None:
    """A second run of the repository's own venv: nothing to install, and it says so."""
    venv = REPO / ".venv"
    if not (venv / ".kflab-installed").is_file():
        import pytest

        pytest.skip("needs the repository's .venv made by scripts/setup.sh")
    extras = "local,dev,tf,notebooks,sdk"
    env = {k: v for k, v in os.environ.items() if k != "KFLAB_VENV"}
    res = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh"), extras],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0] == f"the lock is installed already ({extras.replace(',', ', ')}): " \
                       "nothing to do", lines
    assert lines[-1].startswith("setup.sh: done in ") and lines[-1].endswith(
        f" s (extras: {extras})"), lines


class _Tty(io.StringIO):
    def isatty(self) -> bool:  # a terminal (a real pty is not needed to see the wrapping)
        return True


def test_progress_lines_wrap_between_words_on_a_terminal(monkeypatch) -> None:
    """At 80 columns a newcomer saw `(also looking in /opt/wheel` / `s)`: on a terminal a
    line breaks between words, never inside a path; piped it stays one line."""
    monkeypatch.setenv("COLUMNS", "40")
    msg = ("torch 2.13.0 (CPU build) (also looking in /opt/wheels/torch-cpu-mirror): the "
           "largest package, a minute or more")
    out = _Tty()
    install_locked.say(msg, file=out)
    lines = out.getvalue().splitlines()
    assert len(lines) > 1 and all(len(line) <= 39 or " " not in line.strip()
                                  for line in lines), lines
    assert " ".join(w for line in lines for w in line.split()) == msg
    assert "/opt/wheels/torch-cpu-mirror):" in out.getvalue()
    piped = io.StringIO()
    install_locked.say(msg, file=piped)
    assert piped.getvalue() == msg + "\n"
