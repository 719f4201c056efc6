"""A KServe InferenceService with a custom predictor image runs as a real container (podman):
its port published on 127.0.0.1 only, STORAGE_URI's folder mounted at /mnt/models as the
storage initializer would put it, Ready once its readinessProbe answers, read back with
the status KServe writes (validated against the upstream CRD), answering predictions; and
deleted, nothing is left. A Notebook of an image kflab does not run as JupyterLab is that
image's container, served the same way."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path

import pytest
from containers_helpers import PREDICTOR, PYTHON, leftovers, podman, use_podman
from crds import crd_schema, schema_errors

from lab.backends.local import LocalBackend
from lab.kube.conditions import is_true

pytestmark = pytest.mark.slow



def isvc(name: str, **container: object) -> dict:
    c = {"name": "kserve-container", "image": PREDICTOR,
         "args": [f"--model_name={name}"],
         "env": [{"name": "STORAGE_URI", "value": "file://./model"}],
         "ports": [{"containerPort": 8080, "protocol": "TCP"}],
         "readinessProbe": {"httpGet": {"path": f"/v1/models/{name}", "port": 8080}},
         **container}
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"predictor": {"containers": [c]}}}


def test_custom_predictor_image_serves_in_a_container(state: Path, tmp_path: Path,
                                                      shared: Path, monkeypatch) -> None:
    use_podman(monkeypatch, PREDICTOR)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text(json.dumps({"weights": [2, 3],
                                                               "bias": 1}))
    backend = LocalBackend(str(state))
    obj = backend.apply(isvc("linear"), base_dir=tmp_path)
    status = obj["status"]
    assert is_true(status, "Ready"), status
    url = status["url"]
    assert url.startswith("http://127.0.0.1:")
    assert status["components"]["predictor"]["url"] == url
    assert status["modelStatus"]["states"]["activeModelState"] == "Loaded"
    assert schema_errors(crd_schema(shared, "InferenceService"), obj) == []
    got = backend.predict("linear", {"instances": [[1, 1], [0, 2]]})
    assert got["predictions"] == [6, 7]
    # the container's own hostname answered (not a process on this machine), and its port
    # is published on the loopback address only
    name = leftovers(state)["containers"][0]
    assert got["host"] == podman("inspect", name, "--format",
                                 "{{.Config.Hostname}}").stdout.strip()
    published = podman("port", name).stdout
    assert published.strip() == f"8080/tcp -> 127.0.0.1:{url.rsplit(':', 1)[1]}"
    # a later command reads the same status (the container still answers)
    again = LocalBackend(str(state)).get("InferenceService", "linear")
    assert is_true(again["status"], "Ready")
    assert any("serving linear on 8080" in line for line in backend.logs("isvc", "linear"))
    assert backend.delete("InferenceService", "linear")
    assert leftovers(state) == {"containers": [], "networks": []}


def test_down_removes_a_predictor_whose_client_was_killed(state: Path, tmp_path: Path,
                                                          monkeypatch) -> None:
    """A container outlives a killed `podman run` client: `kflab down` still finds it by
    its labels and removes it."""
    use_podman(monkeypatch, PREDICTOR)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text(json.dumps({"weights": [1], "bias": 0}))
    backend = LocalBackend(str(state))
    obj = backend.apply(isvc("orphan"), base_dir=tmp_path)
    assert is_true(obj["status"], "Ready")
    rec = backend.procs.get("isvc_default_orphan")
    assert rec is not None
    os.killpg(rec.pid, signal.SIGKILL)  # the client dies; conmon keeps the container
    assert leftovers(state)["containers"], "the container should outlive its client"
    stopped = backend.down()
    assert leftovers(state) == {"containers": [], "networks": []}, stopped


def test_a_notebook_of_an_image_kflab_does_not_run_is_its_container(
        state: Path, tmp_path: Path, shared: Path, monkeypatch) -> None:
    """A Notebook whose image is not one of Kubeflow's JupyterLab images: the image's own
    server, NB_PREFIX in its env, its port on 127.0.0.1, the manifest's folder at
    /home/jovyan/lab-files as the cluster backend's ConfigMap puts it."""
    use_podman(monkeypatch, PYTHON)
    (tmp_path / "hello.txt").write_text("hi from the lab folder\n")
    nb = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
          "metadata": {"name": "web", "namespace": "default"},
          "spec": {"template": {"spec": {"containers": [{
              "name": "web", "image": PYTHON,
              "command": ["sh", "-c", "echo prefix=$NB_PREFIX; "
                          "exec python3 -m http.server 8888 --directory /home/jovyan"],
              "workingDir": "/home/jovyan",
              "ports": [{"containerPort": 8888, "name": "notebook-port"}]}]}}}}
    backend = LocalBackend(str(state))
    obj = backend.apply(nb, base_dir=tmp_path)
    assert obj["status"]["readyReplicas"] == 1, obj["status"]
    assert schema_errors(crd_schema(shared, "Notebook"), obj) == []
    url = backend._handler("Notebook").url(backend, "web")
    assert url.startswith("http://127.0.0.1:") and url.endswith("/notebook/default/web/")
    base = url.split("/notebook/")[0]
    with urllib.request.urlopen(f"{base}/lab-files/hello.txt", timeout=5) as resp:
        assert resp.read() == b"hi from the lab folder\n"
    assert any("prefix=/notebook/default/web" in ln for ln in backend.logs("notebook", "web"))
    assert backend.delete("Notebook", "web")
    assert leftovers(state) == {"containers": [], "networks": []}


def test_a_format_served_by_its_runtimes_image(state: Path, tmp_path: Path, shared: Path,
                                               monkeypatch) -> None:
    """modelFormat pmml: no local server loads it, so KServe's pick, kserve-pmmlserver, runs
    as its image with the runtime's args ({{.Name}} replaced, --model_dir=/mnt/models) and
    the storageUri mounted there. No registry is reachable here: the custom-predictor test
    image (which takes KServe's server flags) is tagged with the runtime's image name for
    this test, and said to be a stand-in."""
    use_podman(monkeypatch, PREDICTOR)
    runtime_image = "docker.io/kserve/pmmlserver:v0.16.0"
    if podman("image", "exists", runtime_image).returncode == 0:
        pytest.skip(f"{runtime_image} is here already: not overwriting it")
    assert podman("tag", PREDICTOR, runtime_image).returncode == 0
    try:
        (tmp_path / "pmml").mkdir()
        (tmp_path / "pmml" / "model.json").write_text(json.dumps({"weights": [1, 1],
                                                                  "bias": 0}))
        isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": {"name": "pmml-demo", "namespace": "default"},
                "spec": {"predictor": {"model": {"modelFormat": {"name": "pmml"},
                                                 "storageUri": "file://./pmml"}}}}
        backend = LocalBackend(str(state))
        obj = backend.apply(isvc, base_dir=tmp_path)
        assert is_true(obj["status"], "Ready"), obj["status"]
        assert schema_errors(crd_schema(shared, "InferenceService"), obj) == []
        assert backend.predict("pmml-demo", {"instances": [[2, 3]]})["predictions"] == [5]
        assert any("serving pmml-demo on 8080" in line
                   for line in backend.logs("isvc", "pmml-demo"))
        assert backend.delete("InferenceService", "pmml-demo")
        assert leftovers(state) == {"containers": [], "networks": []}
    finally:
        podman("untag", runtime_image, runtime_image)
