"""imagePullPolicy with a real registry: Debian's docker-registry on 127.0.0.1 (the stand-in
of scripts/standins/55-registry.sh) serves the test image, podman pulls it. A missing image
is pulled once, with a progress bar's events and the CLI's lines, for all the replicas of a
job; present, it is not pulled again (IfNotPresent); with Always it is pulled once per
command, however many trials use it; the registry's own log counts the manifest requests."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from containers_helpers import CONF, PYTHON, leftovers, podman, use_podman

from lab.backends.local import LocalBackend
from lab.backends.local.containers import images
from lab.backends.local.procs import free_port
from tests.conftest import run_kflab

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Debian's docker-registry on 127.0.0.1 holding the python test image: its address,
    an image name in it, the registries.conf that lets podman use plain HTTP there, and
    the registry's log (one line per request)."""
    if shutil.which("docker-registry") is None:
        pytest.skip("docker-registry is not installed (scripts/standins/55-registry.sh)")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "info", "accesslog": {"disabled": False}},
        "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    log = open(root / "registry.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")],
                            stdout=log, stderr=subprocess.STDOUT)
    conf = root / "registries.conf"
    conf.write_text(f'[[registry]]\nlocation = "127.0.0.1:{port}"\ninsecure = true\n')
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("docker-registry did not start")
                time.sleep(0.2)
        yield {"host": f"127.0.0.1:{port}", "conf": conf, "log": root / "registry.log"}
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def pushed(registry: dict, tag: str) -> str:
    """The test image pushed to the registry as kflab/python:TAG, and absent locally."""
    ref = f"{registry['host']}/kflab/python:{tag}"
    done = podman("push", "--tls-verify=false", PYTHON, f"docker://{ref}", timeout=300)
    assert done.returncode == 0, done.stderr
    podman("rmi", "-f", ref)
    assert podman("image", "exists", ref).returncode != 0
    return ref


def manifest_gets(registry: dict, ref: str) -> int:
    """How many times the registry served the image's manifest (a pull asks once)."""
    path = "/v2/" + ref.split("/", 1)[1].replace(":", "/manifests/")
    return sum(1 for line in registry["log"].read_text(errors="replace").splitlines()
               if f'"GET {path} ' in line or f'"HEAD {path} ' in line)


def job(name: str, image: str, policy: str, workers: int = 2) -> dict:
    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": image, "imagePullPolicy": policy,
             "command": ["python3", "-c", "import os; print('rank', os.environ['RANK'])"]}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(workers)}}}


def test_a_missing_image_is_pulled_once_with_progress(registry: dict, state: Path,
                                                      tmp_path: Path, monkeypatch) -> None:
    use_podman(monkeypatch)
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(registry["conf"]))
    ref = pushed(registry, "ifnotpresent")
    try:
        (tmp_path / "job.yaml").write_text(yaml.safe_dump(job("pulled", ref, "IfNotPresent")))
        env = {"KFLAB_STATE": str(state), "CONTAINERS_CONF": str(CONF),
               "CONTAINERS_REGISTRIES_CONF": str(registry["conf"]),
               "KFLAB_CONTAINER_ENGINE": "podman"}
        first = run_kflab("apply", "-f", str(tmp_path / "job.yaml"), cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        out = first.stdout
        # the CLI's lines (piped: no bar), one pull for three replicas
        assert out.count(f"pulling image {ref} (imagePullPolicy IfNotPresent)") == 1, out
        assert out.count(f"pulled image {ref} (") == 1, out
        assert manifest_gets(registry, ref) >= 1
        before = manifest_gets(registry, ref)
        assert podman("image", "exists", ref).returncode == 0
        # applied again: present, so never pulled (the registry sees no request)
        doc = job("again", ref, "IfNotPresent")
        (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
        second = run_kflab("apply", "-f", str(tmp_path / "job.yaml"), cwd=tmp_path, env=env)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "pulling image" not in second.stdout
        assert manifest_gets(registry, ref) == before
        assert leftovers(state) == {"containers": [], "networks": []}
    finally:
        podman("rmi", "-f", ref)


def test_progress_events_and_always_pulls_once_per_command(registry: dict, state: Path,
                                                           tmp_path: Path,
                                                           monkeypatch) -> None:
    """Always: one pull for an Experiment's four trials, the pull's events counting its
    layers (what the CLI's bar draws)."""
    use_podman(monkeypatch)
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(registry["conf"]))
    ref = pushed(registry, "always")
    images.forget()
    exp = {
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
        "metadata": {"name": "always", "namespace": "default"},
        "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                 "algorithm": {"algorithmName": "random"},
                 "parallelTrialCount": 2, "maxTrialCount": 4,
                 "parameters": [{"name": "x", "parameterType": "double",
                                 "feasibleSpace": {"min": "0", "max": "1"}}],
                 "trialTemplate": {
                     "primaryContainerName": "training-container",
                     "trialParameters": [{"name": "x", "reference": "x"}],
                     "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {
                         "template": {"spec": {"restartPolicy": "Never", "containers": [{
                             "name": "training-container", "image": ref,
                             "imagePullPolicy": "Always",
                             "command": ["python3", "-c",
                                         "print('loss=${trialParameters.x}')"]}]}}}}}}}
    backend = LocalBackend(str(state))
    events: list[dict] = []
    backend.sink = events.append
    before = manifest_gets(registry, ref)
    try:
        done = backend.apply(exp, base_dir=tmp_path)
        assert done["status"].get("trialsSucceeded") == 4, (done["status"], [
            t["status"] for t in backend.list("Trial")])
        pulls = [e for e in events if e["event"] == "pull"]
        ends = [e for e in events if e["event"] == "pulled"]
        assert len(ends) == 1 and ends[0]["image"] == ref
        assert pulls[0]["done"] == 0 and pulls[-1]["total"] >= 1
        assert pulls[-1]["done"] == pulls[-1]["total"] == ends[0]["layers"]
        assert manifest_gets(registry, ref) - before >= 1
        gets = manifest_gets(registry, ref) - before
        # a second command pulls again (Always), once more for all its trials
        images.forget()
        exp["metadata"]["name"] = "always2"
        events.clear()
        backend.apply(exp, base_dir=tmp_path)
        assert len([e for e in events if e["event"] == "pulled"]) == 1
        assert manifest_gets(registry, ref) - before == 2 * gets
    finally:
        podman("rmi", "-f", ref)
    assert leftovers(state) == {"containers": [], "networks": []}
