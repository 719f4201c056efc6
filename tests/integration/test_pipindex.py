"""An offline class's package index for pipeline steps, rehearsed as far as this machine
allows (issue 35 point 1).

REAL: the wheels (pip download from the package index, for this Python and platform), the
PEP 503 index kflab writes, served on 127.0.0.1 by `python3 -m http.server` (the same command
the lab's Deployment runs), a pipeline compiled by `kflab pipeline compile --index-url` with
the lab server's SDK (kfp 2.16.0), and the step's own install command (the `sh -c` script
kfp compiled) run in a new venv whose pip knows no other index (no pip configuration, no
PIP_* variables). The index image (the wheels layered on a python image, run by podman).
STAND-IN: the server's base image is localhost/kflab-python:bookworm (Debian's python3,
built offline by scripts/standins/25-workload-images.sh) instead of python:3.11-slim, which
no registry here serves; a KFP pod is this machine's shell (no cluster runs here).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lab.backends.cluster.pipelines.index import Target
from lab.backends.local.procs import free_port
from lab.cli import cli
from lab.teaching import oci, pipindex
from tests.integration.conftest import CONF

pytestmark = pytest.mark.integration
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
BASE = "localhost/kflab-python:bookworm"
PIPELINE = '''
from kfp import dsl

@dsl.component(base_image="docker.io/library/python:3.11-slim",
               packages_to_install={packages!r})
def hello(n: int) -> str:
    import six
    return six.text_type(n)

@dsl.pipeline(name="offline-hello")
def pipe(n: int = 3):
    hello(n=n)
'''


def _clean_env(home: Path) -> dict[str, str]:
    """A learner's pod has no pip configuration: none of this machine's PIP_* and pip.conf."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"), "PIP_NO_CACHE_DIR": "1"}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """What a bundle's index holds for a pipeline whose step installs six: six, and kfp
    2.16.0 without its dependencies (as the step installs it)."""
    into = tmp_path_factory.mktemp("wheels")
    pipindex.download(["six", 'typing-extensions>=3.7.4,<5; python_version<"3.9"'], "2.16.0",
                      Target(python=PYTHON, arch=ARCH), into)
    return into


def _serve(root: Path, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                             "127.0.0.1", "--directory", str(root)],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115
    _wait(port, proc)
    return proc


def _wait(port: int, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/simple/", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
                pytest.fail(f"the index on 127.0.0.1:{port} did not start")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def index(wheels, tmp_path_factory) -> Iterator[dict]:
    files, packages = pipindex.build(wheels)
    root = pipindex.write(files, tmp_path_factory.mktemp("index"))
    port = free_port()
    log = root.parent / "http.log"
    proc = _serve(root, port, log)
    try:
        yield {"url": f"http://127.0.0.1:{port}/simple/", "root": root, "packages": packages,
               "log": log, "files": files}
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_index_is_pep_503(index):
    """Project pages under simple/<normalised name>/, links with #sha256= of the file."""
    assert set(index["packages"]) == {"six", "kfp"}
    assert index["packages"]["kfp"] == ["2.16.0"]
    page = (index["root"] / "simple" / "kfp" / "index.html").read_text()
    name = next(n for n in os.listdir(index["root"] / "files") if n.startswith("kfp-"))
    import hashlib

    digest = hashlib.sha256((index["root"] / "files" / name).read_bytes()).hexdigest()
    assert f'href="../../files/{name}#sha256={digest}"' in page
    root = (index["root"] / "simple" / "index.html").read_text()
    assert '<a href="six/">six</a>' in root


def _compile(tmp: Path, packages: list[str], url: str, name: str = "out.yaml"):
    (tmp / "pipe.py").write_text(PIPELINE.format(packages=packages))
    return CliRunner().invoke(cli, ["pipeline", "compile", str(tmp / "pipe.py"), "-o",
                                    str(tmp / name), "--index-url", url])


def _install_script(compiled: Path) -> str:
    ir = next(yaml.safe_load_all(compiled.read_text()))
    (spec,) = ir["deploymentSpec"]["executors"].values()
    command = spec["container"]["command"]
    assert command[:2] == ["sh", "-c"]
    return command[2]


def _venv(tmp: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return venv


def test_a_compiled_step_installs_from_the_index_and_nothing_else(index, tmp_path):
    """The step's own install command, as kfp compiled it with --index-url, run with pip's
    only index being ours: six and kfp 2.16.0 come from it."""
    res = _compile(tmp_path, ["six"], index["url"])
    assert res.exit_code == 0, res.output
    assert "the index has every step's packages" in res.output
    script = _install_script(tmp_path / "out.yaml")
    host = index["url"].split("/")[2]
    assert f"--index-url {index['url']} --trusted-host {host} 'six'" in script
    assert f"--index-url {index['url']} --trusted-host {host} 'kfp==2.16.0' '--no-deps'" \
        in script
    venv = _venv(tmp_path)
    env = _clean_env(tmp_path)
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"  # the pod's python3 and pip
    before = (index["log"]).read_text()
    run = subprocess.run(["sh", "-c", script, "true"], capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    got = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import six, importlib.metadata as m; print(m.version('kfp'))"],
                         capture_output=True, text=True, timeout=60)
    assert got.stdout.strip() == "2.16.0", got.stderr
    asked = index["log"].read_text()[len(before):]
    assert "GET /simple/six/" in asked and "GET /simple/kfp/" in asked
    assert "GET /files/six-" in asked


def test_a_package_the_index_lacks_is_refused_at_compile_time(index, tmp_path):
    res = _compile(tmp_path, ["six", "not-in-the-index"], index["url"])
    assert res.exit_code != 0
    assert not (tmp_path / "out.yaml").exists()  # nothing half-written
    first = str(res.exception).splitlines()[0]
    assert first == (f"{tmp_path / 'pipe.py'}: step 'hello' installs not-in-the-index "
                     f"(the index has no not-in-the-index), from the package index "
                     f"{index['url']}")


def test_at_the_step_pip_names_the_missing_package(index, tmp_path):
    """Compiled while the index could not be asked (not checked), the step itself fails
    naming the package: pip's own line."""
    port = free_port()
    res = _compile(tmp_path, ["not-in-the-index"], f"http://127.0.0.1:{port}/simple/")
    assert res.exit_code == 0 and "not checked" in res.output, res.output
    script = _install_script(tmp_path / "out.yaml").replace(str(port), index["url"]
                                                            .split(":")[2].split("/")[0])
    venv = _venv(tmp_path)
    env = _clean_env(tmp_path)
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    run = subprocess.run(["sh", "-c", script, "true"], capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode != 0
    assert "No matching distribution found for not-in-the-index" in run.stderr


def _podman(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                          check=check, env={**os.environ, "CONTAINERS_CONF": str(CONF)})


def test_the_index_image_serves_it(wheels, tmp_path):
    """The image a bundle carries: the index layered on a python image, run with the
    Deployment's own command; pip installs six from it."""
    import shutil

    if shutil.which("podman") is None or _podman("image", "exists", BASE,
                                                 check=False).returncode != 0:
        pytest.skip(f"{BASE} not built (scripts/standins/25-workload-images.sh)")
    base = tmp_path / "base.tar"
    _podman("save", "--format", "oci-archive", "-o", str(base), BASE)
    with pytest.MonkeyPatch.context() as mp:  # the wheels are already here: no download
        mp.setattr(pipindex, "download", lambda reqs, kfp, target, into: [
            (into / w.name).write_bytes(w.read_bytes()) for w in wheels.iterdir()])
        made = pipindex.make_image(base, tmp_path / "images", ["six"], "2.16.0",
                                   Target(python=PYTHON, arch=ARCH))
    archive = tmp_path / made.file
    assert oci.platform(archive).startswith(f"linux/{ARCH}")
    deployment = next(o for o in pipindex.objects(made.record()) if o["kind"] == "Deployment")
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    port = free_port()
    command = [*command[:3], str(port), "--bind", "127.0.0.1", *command[6:]]
    name = f"kflab-index-{port}"
    _podman("run", "-d", "--rm", "--name", name, "--network", "host", "--user", "65534",
            "--read-only", f"oci-archive:{archive}", *command, timeout=600)
    try:
        _wait(port)
        venv = _venv(tmp_path)
        env = _clean_env(tmp_path)
        run = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                              "--index-url", f"http://127.0.0.1:{port}/simple/",
                              "--trusted-host", f"127.0.0.1:{port}", "six"],
                             capture_output=True, text=True, timeout=600, env=env)
        assert run.returncode == 0, run.stderr
    finally:
        _podman("rm", "-f", name, check=False)
        _podman("rmi", "-f", made.image, check=False)  # podman imported the archive
    record = made.record()
    assert record["url"] == "http://kflab-pip-index.kubeflow.svc.cluster.local/simple/"
    assert set(record["packages"]) == {"kfp", "six"} and record["packages"]["kfp"] == ["2.16.0"]
    assert record["image"].startswith("localhost/kflab/pip-index:")
