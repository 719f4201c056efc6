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
    assert call(ui, "/static/js/main.js")[0] == 403
    assert call(ui, "/?token=wrong")[0] == 403
    status, body, headers = call(ui, f"/?token={ui.token}")
    assert status == 200 and b'id="main"' in body
    assert "SameSite=Strict" in headers["Set-Cookie"] and "HttpOnly" in headers["Set-Cookie"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    cookie = {"Cookie": f"{ui.cookie('token')}={ui.token}"}
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
    assert status == 200 and json.loads(body) == {"commit_sha": "unknown", "tag_name": "2.16.0",
                                                   "multi_user": False,
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
        assert client.list_experiments().total_size is None  # 0: left out, as KFP does
    finally:
        server.stop()


def test_only_the_page_files_are_served(ui: UiServer) -> None:
    cookie = {"Cookie": f"{ui.cookie('token')}={ui.token}"}
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
        assert call(server, "/ui-api/jobs", {"Cookie": f"{server.cookie('token')}={server.token}"}
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
    cookie = {"Cookie": f"{ui.cookie('token')}={ui.token}"}
    status, body, headers = call(ui, "/ui-api/runs/r/artifacts/t/good", cookie)
    assert status == 200 and body == b"<p>fine</p>"
    # as KFP's HTMLViewer: scripts run, in an opaque origin (no allow-same-origin); no network
    csp = headers["Content-Security-Policy"]
    assert csp.startswith("sandbox allow-scripts;") and "allow-same-origin" not in csp
    assert "default-src 'none'" in csp and "connect-src" not in csp
    status, body, _ = call(ui, "/ui-api/runs/r/artifacts/t/bad", cookie)
    assert status == 404 and b"secret" not in body


def test_markdown_and_metrics_artifacts_as_kfp_renders_them(ui: UiServer,
                                                            tmp_path: Path) -> None:
    """Markdown is rendered with raw HTML left as text and no script in its frame;
    ClassificationMetrics and Metrics come as KFP's viewers draw them, malformed data as an
    error naming the artifact (MetricsVisualizations.tsx validateConfusionMatrix)."""
    notes = tmp_path / "pipeline-root" / "default" / "m" / "t" / "notes"
    notes.parent.mkdir(parents=True)
    notes.write_text("# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<script>x()</script> "
                     "[bad](javascript:alert(1))\n")
    roc = [{"confidenceThreshold": t, "recall": r, "falsePositiveRate": f}
           for t, r, f in ((0.0, 1.0, 1.0), (2.0, 0.0, 0.0), (0.5, 0.8, 0.3))]
    arts = {"notes": {"type": "system.Markdown", "path": str(notes), "exists": True,
                      "metadata": {}},
            "cm": {"type": "system.ClassificationMetrics", "exists": False, "metadata": {
                "confidenceMetrics": roc,
                "confusionMatrix": {"annotationSpecs": [{"displayName": "a"}],
                                    "rows": [{"row": [1, 2]}]}}},
            "scores": {"type": "system.Metrics", "exists": False,
                       "metadata": {"display_name": "scores", "accuracy": 0.5}}}
    ui.backend.store.put({"apiVersion": "kflab.dev/v1", "kind": "PipelineRun",
                          "metadata": {"name": "m", "namespace": "default"}, "spec": {},
                          "status": {"state": "SUCCEEDED", "run_details": {"task_details": [
                              {"display_name": "t", "state": "SUCCEEDED",
                               "outputs": {"artifacts": arts}}]}}})
    cookie = {"Cookie": f"{ui.cookie('token')}={ui.token}"}
    status, body, headers = call(ui, "/ui-api/runs/m/artifacts/t/notes", cookie)
    assert status == 200 and b"<h1>Title</h1>" in body and b"<td>1</td>" in body
    assert b"&lt;script&gt;" in body and b"<script>" not in body
    assert b'href="javascript' not in body
    assert headers["Content-Security-Policy"].startswith("sandbox;")
    assert "script-src" not in headers["Content-Security-Policy"]
    status, body, _ = call(ui, "/ui-api/runs/m", cookie)
    task = json.loads(body)["tasks"][0]
    by_name = {a["name"]: a for a in task["artifacts"]}
    assert [(p["fpr"], p["tpr"], p["threshold"]) for p in by_name["cm"]["roc"]["points"]] == [
        (0.0, 0.0, 2.0), (0.3, 0.8, 0.5), (1.0, 1.0, 0.0)]  # sorted by fpr for the chart
    assert by_name["cm"]["confusion"]["error"].startswith(
        "Error in cm artifact's confusionMatrix data format")
    assert by_name["scores"]["scalars"] == [["accuracy", "0.5"]]


def _record(name: str) -> dict[str, Any]:
    return {"apiVersion": "kflab.dev/v1", "kind": "PipelineRun",
            "metadata": {"name": name, "namespace": "default"}, "spec": {},
            "status": {"state": "RUNNING"}}


def _stream(ui: UiServer, headers: dict[str, str]) -> tuple[Any, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
    conn.request("GET", "/events", headers={"Host": f"127.0.0.1:{ui.port}", **headers})
    return conn, conn.getresponse()


def _next_event(res: Any) -> dict[str, str]:
    """The next event's fields (keep-alive comments skipped)."""
    fields: dict[str, str] = {}
    while True:
        line = res.fp.readline().decode().rstrip("\n")
        if not line:
            if fields:
                return fields
            continue
        if not line.startswith(":"):
            key, _, value = line.partition(": ")
            fields[key] = value


def test_events_stream_says_when_records_change(ui: UiServer,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """/events: token required; `ready` at once, then `change` after a record is written
    (one shared watch, polled faster here than its 1 s); nothing scanned while no page
    listens; at most MAX_CLIENTS streams, the next one refused (503)."""
    import time

    from lab.webui import server

    ui.watcher.interval = 0.05
    monkeypatch.setattr(server, "HEARTBEAT", 0.05)  # a closed page is noticed at once
    assert call(ui, "/events")[0] == 403
    assert ui.watcher.polls == 0  # no page open: the state folder is never scanned
    cookie = {"Cookie": f"{ui.cookie('token')}={ui.token}"}
    conn, res = _stream(ui, cookie)
    try:
        assert res.status == 200 and res.getheader("Content-Type") == "text/event-stream"
        first = _next_event(res)
        assert first["event"] == "ready" and first["retry"] == "2000"
        deadline = time.monotonic() + 5
        while ui.watcher.polls < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # the watch has seen the folder as it is
        ui.backend.store.put(_record("live"))
        change = _next_event(res)
        assert change["event"] == "change" and int(change["data"]) > int(first["data"])
    finally:
        res.close()
        conn.close()
    deadline = time.monotonic() + 5
    while ui.watcher.clients and time.monotonic() < deadline:
        time.sleep(0.02)  # the stream's keep-alive found its page gone and let go
    assert ui.watcher.clients == 0
    others = [_stream(ui, cookie) for _ in range(ui.watcher.max_clients)]
    try:
        assert [res.status for _, res in others] == [200] * ui.watcher.max_clients
        status, _, headers = call(ui, "/events", cookie)
        assert status == 503 and headers["Retry-After"] == "10"
    finally:
        for conn, res in others:
            res.close()
            conn.close()


def test_guided_lab_progress_view(ui: UiServer, tmp_path: Path) -> None:
    """/ui-api/labs: a lab started, a hint taken and a failed `kflab check`, through the
    guided module the CLI uses; the view reads the progress and journal the commands wrote."""
    from lab.scenarios import guided, loader

    cookie = {"Cookie": f"{ui.cookie('token')}={ui.token}"}
    assert json.loads(call(ui, "/ui-api/labs", cookie)[1]) == []
    session = guided.start(loader.find("katib-hpo"), tmp_path, tmp_path / "work",
                           restart=False)
    guided.hint(session)
    ok, _ = guided.check(session, wait=0)
    assert not ok  # nothing done yet
    rows = json.loads(call(ui, "/ui-api/labs", cookie)[1])
    assert [(r["id"], r["step"], r["steps"], r["active"], r["finished"]) for r in rows] == [
        ("katib-hpo", 1, len(session.scenario.steps), True, False)]
    status, body, _ = call(ui, "/ui-api/labs/katib-hpo", cookie)
    page = json.loads(body)
    assert status == 200 and page["active"] and not page["finished"]
    first, second = page["steps"][:2]
    assert first["status"] == "current" and second["status"] == "todo"
    assert (first["attempts"], first["failed"], first["last"]["ok"]) == (1, 1, False)
    assert first["hints"] == 1 and first["hints_total"] == len(session.scenario.steps[0].hints)
    assert first["checks"] == [c.label for c in session.scenario.steps[0].needs
                               + session.scenario.steps[0].checks] and first["checks"]
    assert second["attempts"] == 0 and second["last"] is None
    for bad in ("nope", "..%2Fresources", "katib-hpo.events"):
        assert call(ui, f"/ui-api/labs/{bad}", cookie)[0] == 404, bad


def _raw(ui: UiServer, method: str, path: str, headers: dict[str, str], body: bytes = b""
         ) -> tuple[int, bytes]:
    """A request as a hostile client writes it (http.client would fix Content-Length)."""
    import socket

    if body and "Content-Length" not in headers:
        headers = {**headers, "Content-Length": str(len(body))}
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "Connection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", ui.port), timeout=10) as s:
        s.sendall(head.encode() + body)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    assert out, f"{method} {path}: connection dropped without an answer"
    return int(out.split(b" ", 2)[1]), out.split(b"\r\n\r\n", 1)[1]


BOMB = ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    + "root: [*h, *h]\n").encode()


def _upload(content: bytes) -> tuple[dict[str, str], bytes]:
    body = (b'--B\r\nContent-Disposition: form-data; name="uploadfile"; filename="p.yaml"\r\n'
            b"\r\n" + content + b"\r\n--B--\r\n")
    return {"Content-Type": "multipart/form-data; boundary=B"}, body


JSON = {"Content-Type": "application/json"}
API = "/apis/v2beta1"
HOSTILE: list[tuple[str, str, str, dict[str, str], bytes, int]] = [
    # (id, method, path, headers, body, status): every one an answer, none a dropped socket
    ("run-name-encoded-dotdot", "GET", "/ui-api/runs/..%2f..%2fx", {}, b"", 404),
    ("run-name-nul", "GET", "/ui-api/runs/%00", {}, b"", 404),
    ("run-name-5000", "GET", "/ui-api/runs/" + "a" * 5000, {}, b"", 404),
    ("job-name-dotdot", "GET", "/ui-api/jobs/PyTorchJob/..", {}, b"", 404),
    ("experiment-name-bytes", "GET", "/ui-api/experiments/%ff%ff", {}, b"", 404),
    ("isvc-name-upper", "GET", "/ui-api/inferenceservices/A_B", {}, b"", 404),
    ("static-encoded-dotdot", "GET", "/static/..%2f..%2fserver.py", {}, b"", 404),
    ("static-dotdot", "GET", "/static/../server.py", {}, b"", 404),
    ("length-abc", "POST", API + "/runs", {"Content-Length": "abc"}, b"{}", 400),
    ("length-negative", "POST", API + "/runs", {"Content-Length": "-5"}, b"{}", 400),
    ("length-huge", "POST", API + "/runs", {"Content-Length": str(10**12)}, b"", 413),
    ("body-deep", "POST", API + "/runs", JSON, b"[" * 100_000 + b"]" * 100_000, 400),
    ("runtime-config-5", "POST", API + "/runs", JSON,
     b'{"display_name": "r", "pipeline_spec": {"root": {}}, "runtime_config": 5}', 400),
    ("version-ref-text", "POST", API + "/runs", JSON,
     b'{"display_name": "r", "pipeline_version_reference": "x"}', 400),
    ("filter-key-list", "GET", API + "/experiments?filter=%7B%22predicates%22%3A%5B%7B%22"
     "operation%22%3A%22EQUALS%22%2C%22key%22%3A%5B1%5D%7D%5D%7D", {}, b"", 400),
    ("filter-predicates-5", "GET", API + "/experiments?filter=%7B%22predicates%22%3A5%7D",
     {}, b"", 400),
    ("upload-alias-bomb", "POST", API + "/pipelines/upload?name=b", *_upload(BOMB), 400),
    ("upload-deep", "POST", API + "/pipelines/upload?name=d",
     *_upload(b"root: " + b"[" * 50_000 + b"]" * 50_000), 400),
    ("upload-python-tag", "POST", API + "/pipelines/upload?name=t",
     *_upload(b"root: !!python/object/apply:os.system [id]\n"), 400),
    ("tryit-no-origin", "POST", "/ui-api/inferenceservices/x/predict", {}, b"{}", 403),
]


@pytest.mark.parametrize("case", HOSTILE, ids=lambda c: c[0])
def test_hostile_requests_get_an_answer(ui: UiServer, case: tuple, capfd: Any) -> None:
    """Bad ids, Content-Lengths, bodies and uploads: a 4xx with a message, never a dropped
    connection, a hang, a 500 or a traceback on the `kflab ui` terminal (each of these used to
    drop the connection and print socketserver's traceback, or hang the API's lock)."""
    _, method, path, headers, body, want = case
    status, out = _raw(ui, method, path, {"Authorization": f"Bearer {ui.token}", **headers},
                       body)
    assert status == want, out[:300]
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("content", [b"[1]", b'{"run_id": 5}', b"{", b"[" * 100_000])
def test_a_damaged_api_record_is_left_out_not_a_500(ui: UiServer, content: bytes) -> None:
    """kfp-api/runs/ID.json edited by hand: the list still answers (the record is moved
    aside as NAME.corrupt), and getting it by id is a 404."""
    folder = ui.api.dir / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bad.json").write_bytes(content)
    status, body = _raw(ui, "GET", API + "/runs", {})
    assert status == 200 and "runs" not in json.loads(body), body[:300]  # none: left out
    (folder / "bad.json").write_bytes(content)
    assert _raw(ui, "GET", API + "/runs/bad", {})[0] == 404


def test_a_server_never_started_stops_at_once(tmp_path: Path) -> None:
    """stop() on a server whose start failed or never came (an error between the two):
    socketserver's shutdown() would wait forever for a loop that never ran."""
    import threading

    server = UiServer(LocalBackend(str(tmp_path)), tmp_path)
    done = threading.Event()
    threading.Thread(target=lambda: (server.stop(), done.set()), daemon=True).start()
    assert done.wait(10), "stop() hung on a server that was never started"
    with pytest.raises(OSError):  # its socket is closed: the port is given back
        http.client.HTTPConnection("127.0.0.1", server.port, timeout=2).request("GET", "/")
