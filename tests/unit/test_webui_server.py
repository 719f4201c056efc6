"""`kflab ui`'s access rules, over real HTTP on loopback: the token, the Origin and Host
checks, the page's files only, and the KFP API only where it belongs (the local backend)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from lab.backends.local import LocalBackend
from lab.webui.server import UiServer


@pytest.fixture
def ui(tmp_path: Path) -> Any:
    server = UiServer(LocalBackend(str(tmp_path)), tmp_path).start()
    yield server
    server.stop()


def call(ui: UiServer, path: str, headers: dict[str, str] | None = None,
         method: str = "GET") -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
    conn.request(method, path, headers={"Host": f"127.0.0.1:{ui.port}", **(headers or {})})
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res.status, body, dict(res.getheaders())


def test_token_gates_every_page(ui: UiServer) -> None:
    assert ui.url.startswith("http://127.0.0.1:") and "token=" in ui.url
    assert call(ui, "/")[0] == 403
    assert call(ui, "/ui-api/runs")[0] == 403
    assert call(ui, "/static/app.js")[0] == 403
    assert call(ui, "/?token=wrong")[0] == 403
    status, body, headers = call(ui, f"/?token={ui.token}")
    assert status == 200 and b'id="main"' in body
    assert "SameSite=Strict" in headers["Set-Cookie"] and "HttpOnly" in headers["Set-Cookie"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    cookie = {"Cookie": f"kflab_token={ui.token}"}
    status, body, _ = call(ui, "/ui-api/runs", cookie)
    assert status == 200 and json.loads(body) == []
    assert call(ui, "/ui-api/runs", {"Authorization": f"Bearer {ui.token}"})[0] == 200
    assert call(ui, "/ui-api/runs/nope", cookie)[0] == 404
    assert call(ui, "/ui-api/runs", cookie, method="POST")[0] == 405  # read-only


def test_other_origins_and_hosts_are_refused(ui: UiServer) -> None:
    good = f"/?token={ui.token}"
    assert call(ui, good, {"Origin": "http://evil.example"})[0] == 403
    assert call(ui, good, {"Origin": f"http://127.0.0.1:{ui.port}"})[0] == 200
    assert call(ui, good, {"Host": f"evil.example:{ui.port}"})[0] == 403  # DNS rebinding
    assert call(ui, "/apis/v2beta1/healthz", {"Origin": "http://evil.example"})[0] == 403
    # the KFP API answers a client that sends no Origin (kfp.Client), token or not
    status, body, _ = call(ui, "/apis/v2beta1/healthz")
    assert status == 200 and json.loads(body) == {"multi_user": False,
                                                   "pipeline_store": "database"}
    # ... but a browser page of the UI's own origin still needs the token
    assert call(ui, "/apis/v2beta1/healthz", {"Origin": f"http://127.0.0.1:{ui.port}"}
                )[0] == 403


def test_api_token_option_gates_the_kfp_api(tmp_path: Path) -> None:
    """`kflab ui --api-token`: kfp.Client must send the token (existing_token=...)."""
    import kfp

    server = UiServer(LocalBackend(str(tmp_path)), tmp_path, api_token=True).start()
    try:
        assert call(server, "/apis/v2beta1/healthz")[0] == 403
        client = kfp.Client(host=server.host, existing_token=server.token)
        assert client.get_kfp_healthz().multi_user is False
        assert client.list_experiments().total_size == 0
    finally:
        server.stop()


def test_only_the_page_files_are_served(ui: UiServer) -> None:
    cookie = {"Cookie": f"kflab_token={ui.token}"}
    assert call(ui, "/static/vendor/dagre.min.js", cookie)[0] == 200
    for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/nope.js",
                 "/etc/passwd"):
        assert call(ui, path, cookie)[0] == 404, path


def test_no_kfp_api_on_a_cluster_backend(tmp_path: Path) -> None:
    """A stand-in object for the cluster backend (no cluster here): the UI's pages use only
    `list`, and the KFP API is left to the cluster's own KFP."""
    class Cluster:
        name = "cluster"

        def list(self, kind: str, namespace: str | None = None) -> list[Any]:
            return []

    server = UiServer(Cluster(), tmp_path).start()
    try:
        status, body, _ = call(server, "/apis/v2beta1/healthz")
        assert status == 404 and b"kflab open pipelines" in body
        assert call(server, "/ui-api/jobs", {"Cookie": f"kflab_token={server.token}"}
                    )[1] == b"[]"
    finally:
        server.stop()


def test_kflab_ui_prints_its_url_and_serves(tmp_path: Path) -> None:
    """The command itself: starts, prints the UI URL and the kfp.Client host, serves both,
    and stops on SIGINT (Ctrl-C)."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import urllib.request

    from tests.conftest import REPO

    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.cli", "--state", str(tmp_path), "ui", "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None
        first, second = proc.stdout.readline(), proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", first)
        host = re.search(r'host="(http://127\.0\.0\.1:\d+)"', second)
        assert url and host, first + second
        assert b'id="main"' in urllib.request.urlopen(url.group(0), timeout=10).read()
        health = urllib.request.urlopen(f"{host.group(1)}/apis/v2beta1/healthz", timeout=10)
        assert json.loads(health.read())["multi_user"] is False
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0


def test_an_artifact_outside_the_pipeline_root_is_refused(ui: UiServer, tmp_path: Path) -> None:
    """A run record edited to point an HTML artifact at another file: never served."""
    outside = tmp_path.parent / f"{tmp_path.name}-secret.html"
    outside.write_text("<p>secret</p>")
    inside = tmp_path / "pipeline-root" / "default" / "r" / "t" / "page"
    inside.parent.mkdir(parents=True)
    inside.write_text("<p>fine</p>")
    arts = {name: {"type": "system.HTML", "uri": "", "path": str(path), "exists": True,
                   "metadata": {}}
            for name, path in (("bad", outside), ("good", inside))}
    ui.backend.store.put({"apiVersion": "kflab.dev/v1", "kind": "PipelineRun",
                          "metadata": {"name": "r", "namespace": "default"}, "spec": {},
                          "status": {"state": "SUCCEEDED", "run_details": {"task_details": [
                              {"display_name": "t", "state": "SUCCEEDED",
                               "outputs": {"artifacts": arts}}]}}})
    cookie = {"Cookie": f"kflab_token={ui.token}"}
    status, body, headers = call(ui, "/ui-api/runs/r/artifacts/t/good", cookie)
    assert status == 200 and body == b"<p>fine</p>"
    assert headers["Content-Security-Policy"].startswith("sandbox;")
    status, body, _ = call(ui, "/ui-api/runs/r/artifacts/t/bad", cookie)
    assert status == 404 and b"secret" not in body
