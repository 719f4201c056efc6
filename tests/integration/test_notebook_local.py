"""Notebooks on the local backend with a real JupyterLab: a Notebook like the Kubeflow docs'
example applied as written, the status in the Notebook CRD's shape, the token kept 0600 and
required, nothing listening beyond 127.0.0.1, the CPU limit honoured as a CPU set, GPUs it
cannot have refused, ignored fields listed, `kflab open notebook` and `kflab delete`; and the
page opened in headless Chromium showing the lab's files (scripts/standins/50-chromium.sh)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml
from crds import crd_schema, schema_errors
from netaudit import listeners, reachable_beyond_loopback
from test_training_crd_schema import pruned

from lab.backends.local import LocalBackend
from lab.backends.local.notebooks.handler import server_info
from lab.errors import LabError
from tests.conftest import run_kflab

pytest.importorskip("jupyterlab",
                    reason="needs the notebooks extra: pip install 'kflab[notebooks]'")
REPO = Path(__file__).resolve().parents[2]
ASSETS = REPO / "scenarios" / "notebook-to-pipeline" / "assets"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def notebook(name: str = "my-notebook", **container: object) -> dict:
    """The shape of the Kubeflow docs' Notebook example: a namespace, one container with an
    image and CPU/memory requests and limits."""
    c = {"name": name, "image": "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0",
         "resources": {"requests": {"cpu": "0.5", "memory": "1Gi"},
                       "limits": {"cpu": "1", "memory": "1Gi"}}, **container}
    return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
            "metadata": {"name": name, "namespace": "kubeflow-user-example-com"},
            "spec": {"template": {"spec": {"containers": [c]}}}}


@pytest.fixture
def lab_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    shutil.copytree(ASSETS, folder)
    return folder


def get(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_notebook_serves_its_folder_on_loopback_with_a_private_token(
        shared: Path, state: Path, lab_folder: Path) -> None:
    backend = LocalBackend(str(state))
    events: list[dict] = []
    backend.sink = events.append
    ns = "kubeflow-user-example-com"
    obj = backend.apply(notebook(), base_dir=lab_folder)
    try:
        status = obj["status"]
        assert status["readyReplicas"] == 1 and "running" in status["containerState"]
        assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
        schema = crd_schema(shared, "Notebook")
        assert schema_errors(schema, obj) == [] and pruned(obj, schema) == []
        notes = {e.get("rule"): e["text"] for e in events if e.get("rule")}
        assert "resources.limits.memory" in notes["notebook.cluster-fields"]
        assert "jupyter-scipy:v1.10.0" in notes["notebook.image"]
        assert "may use 1 CPU(s)" in notes["notebook.cpu"]
        assert obj["metadata"]["annotations"]["kflab.dev/local-differences"] == \
            "notebook.image,notebook.cpu,notebook.cluster-fields"
        info = server_info(backend, "my-notebook", ns)
        record = state / "runs" / "notebooks" / ns / "my-notebook" / "server.json"
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        assert json.loads(record.read_text())["token"] == info["token"]
        base = f"http://127.0.0.1:{info['port']}/notebook/{ns}/my-notebook"
        assert get(f"{base}/api/contents") == 403  # no token, no files
        assert get(f"{base}/api/contents", info["token"]) == 200
        pid = backend.procs.get(f"nb_{ns}_my-notebook").pid
        proc = psutil.Process(pid)
        found = [entry for p in (proc, *proc.children(recursive=True)) for entry in
                 listeners(p.pid)]
        assert found and not [f for f in found if reachable_beyond_loopback(f)], found
        assert info["token"] not in " ".join(proc.cmdline())  # never on a command line
        environ = proc.environ()
        assert environ["NB_PREFIX"] == f"/notebook/{ns}/my-notebook"
        if len(os.sched_getaffinity(0)) > 1:  # limits.cpu "1": one CPU for it and its kernels
            assert len(proc.cpu_affinity()) == 1
        out = run_kflab("open", "notebook", "my-notebook", "-n", ns,
                        env={"KFLAB_STATE": str(state), "KFLAB_BACKEND": "local"})
        assert out.returncode == 0, out.stderr
        assert f"{base}/lab?token={info['token']}" in out.stdout
    finally:
        out = run_kflab("delete", "notebook", "my-notebook", "-n", ns,
                        env={"KFLAB_STATE": str(state), "KFLAB_BACKEND": "local"})
    assert out.returncode == 0, out.stderr
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_server_that_dies_is_reported_terminated(state: Path, lab_folder: Path) -> None:
    backend = LocalBackend(str(state))
    backend.apply(notebook("short"), base_dir=lab_folder)
    pid = backend.procs.get("nb_kubeflow-user-example-com_short").pid
    os.killpg(pid, 9)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # gone, or a zombie (this test process started it)
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    obj = backend.get("Notebook", "short", "kubeflow-user-example-com")
    assert obj["status"]["readyReplicas"] == 0
    assert "is not running" in obj["status"]["containerState"]["terminated"]["message"]
    assert {c["type"]: c["status"] for c in obj["status"]["conditions"]}["Ready"] == "False"


def test_what_cannot_be_given_is_refused_before_anything_starts(state: Path,
                                                                lab_folder: Path) -> None:
    backend = LocalBackend(str(state))
    too_many = notebook(resources={"limits": {"nvidia.com/gpu": 64}})
    with pytest.raises(LabError, match=r"asks for 64 GPU\(s\)"):
        backend.apply(too_many, base_dir=lab_folder)
    with pytest.raises(LabError, match=r"limits\.cpu.*not a Kubernetes quantity"):
        backend.apply(notebook(resources={"limits": {"cpu": "two"}}), base_dir=lab_folder)
    assert backend.procs.all() == []


@pytest.mark.skipif(CHROMIUM is None,
                    reason="chromium not installed (scripts/standins/50-chromium.sh)")
def test_jupyterlab_in_headless_chromium_shows_the_labs_files(state: Path, lab_folder: Path,
                                                              tmp_path: Path) -> None:
    """The real page, rendered by a browser: JupyterLab's file browser lists the work
    folder's files (read from the rendered DOM, and seen in the screenshot)."""
    from PIL import Image

    backend = LocalBackend(str(state))
    (lab_folder / "notebook.yaml").write_text(yaml.safe_dump(notebook("lab")))
    backend.apply(notebook("lab"), base_dir=lab_folder)
    try:
        url = backend.open_notebook  # the URL `kflab open notebook` prints
        with url("lab", "kubeflow-user-example-com") as (page, _):
            pass
        profile = tmp_path / "profile"
        shot = tmp_path / "jupyterlab.png"
        flags = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                 "--window-size=1280,800", "--virtual-time-budget=30000"]
        dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True,
                             timeout=180, check=False).stdout
        names = sorted(p.name for p in lab_folder.iterdir() if not p.name.startswith("."))
        listed = [n for n in names if f">{n}<" in dom]
        assert listed == names, f"file browser lists {listed} of {names}"
        subprocess.run([*flags, f"--screenshot={shot}", page], capture_output=True,
                       timeout=180, check=False)
        image = Image.open(shot).convert("RGB")
        assert image.size == (1280, 800)
        # the rendered page is JupyterLab, not a blank or an error page: many colours, and
        # the file browser's dark text in the left panel
        assert len(image.getcolors(maxcolors=100000) or []) > 50
        left = image.crop((0, 60, 320, 400)).convert("L")
        assert sum(left.histogram()[:100]) > 500
    finally:
        backend.delete("Notebook", "lab", "kubeflow-user-example-com")
