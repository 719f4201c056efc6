"""The InferenceService try-it form: the UI's one write. A real sklearn model server on the
local backend (one per module); the POST is refused without the token, without or with
another Origin, without the CSRF token of the page's own session, or for a service whose
record points off loopback; with all of them it answers V1 and V2 as `kflab predict` does.
Then the form itself, in headless Chromium over CDP."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from lab.backends.local import LocalBackend
from lab.webui.server import UiServer
from tests.integration.test_webui_browser import AXE, CHROMIUM, Cdp

ROWS = [[6.8, 2.8, 4.8, 1.4], [5.1, 3.5, 1.4, 0.2]]


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    models = tmp_path_factory.mktemp("models")
    X, y = load_iris(return_X_y=True)
    (models / "sk").mkdir()
    joblib.dump(LogisticRegression(max_iter=500).fit(X, y), models / "sk" / "model.joblib")
    root = tmp_path_factory.mktemp("state")
    backend = LocalBackend(str(root))
    obj = backend.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                         "metadata": {"name": "iris"},
                         "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                                          "storageUri": f"file://{models / 'sk'}"
                                                          }}}}, base_dir=models)
    assert obj["status"]["url"].startswith("http://127.0.0.1:"), obj["status"]
    server = UiServer(backend, root).start()
    yield server
    server.stop()
    backend.down()


def post(ui: UiServer, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=30)
    conn.request("POST", path, body=body, headers={"Host": f"127.0.0.1:{ui.port}", **headers})
    res = conn.getresponse()
    body = res.read()
    conn.close()
    is_json = res.getheader("Content-Type") == "application/json"
    return res.status, json.loads(body) if is_json else body.decode()


def session(ui: UiServer) -> tuple[str, str]:
    """A page's session cookie (from loading the page) and its CSRF token."""
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
    conn.request("GET", f"/?token={ui.token}", headers={"Host": f"127.0.0.1:{ui.port}"})
    res = conn.getresponse()
    res.read()
    cookies = [v for k, v in res.getheaders() if k == "Set-Cookie"]
    sid = next(c.split(";")[0].split("=", 1)[1] for c in cookies
               if c.startswith(ui.cookie("session") + "="))
    conn.request("GET", "/ui-api/csrf", headers={
        "Host": f"127.0.0.1:{ui.port}",
        "Cookie": f"{ui.cookie('token')}={ui.token}; {ui.cookie('session')}={sid}"})
    res = conn.getresponse()
    csrf = json.loads(res.read())["csrf"]
    conn.close()
    return sid, csrf


def test_the_one_write_is_gated_and_answers_v1_and_v2(ui: UiServer) -> None:
    sid, csrf = session(ui)
    other_sid, other_csrf = session(ui)
    assert sid != other_sid and csrf != other_csrf
    path = "/ui-api/inferenceservices/iris/predict"
    v1 = json.dumps({"instances": ROWS}).encode()
    good = {"Cookie": f"{ui.cookie('token')}={ui.token}; {ui.cookie('session')}={sid}",
            "Origin": f"http://127.0.0.1:{ui.port}", "Content-Type": "application/json",
            "X-Kflab-Csrf": csrf}
    refused = {
        "no token": {**good, "Cookie": f"{ui.cookie('session')}={sid}"},
        "no Origin": {k: v for k, v in good.items() if k != "Origin"},
        "another Origin": {**good, "Origin": "http://evil.example"},
        "no CSRF token": {k: v for k, v in good.items() if k != "X-Kflab-Csrf"},
        "another session's CSRF token": {**good, "X-Kflab-Csrf": other_csrf},
        "no session": {**good, "Cookie": f"{ui.cookie('token')}={ui.token}"},
    }
    for why, headers in refused.items():
        assert post(ui, path, v1, headers)[0] == 403, why
    assert post(ui, path, v1, {**good, "Content-Type": "text/plain"})[0] == 415
    assert post(ui, "/ui-api/runs", v1, good)[0] == 405  # no other write path
    status, out = post(ui, path, v1, good)
    assert status == 200, out
    expected = ui.backend.predict("iris", {"instances": ROWS})["predictions"]
    assert out["predictions"] == expected and len(expected) == 2
    v2 = {"inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP64",
                      "data": [v for row in ROWS for v in row]}]}
    status, out = post(ui, path + "?protocol=v2", json.dumps(v2).encode(), good)
    assert status == 200 and "outputs" in out["response"], out
    assert out["predictions"] == expected
    status, out = post(ui, path, b'{"rows": [1]}', good)
    assert status == 400 and "V1" in out["message"]
    assert post(ui, "/ui-api/inferenceservices/nope/predict", v1, good)[0] == 404


def test_a_record_pointing_off_loopback_is_not_followed(ui: UiServer) -> None:
    """A record edited to send the form's request to another host: refused before any
    request is made."""
    obj = ui.backend.get("InferenceService", "iris")
    moved = json.loads(json.dumps(obj))
    moved["metadata"]["name"] = "moved"
    moved["status"]["url"] = "http://example.com"
    ui.backend.store.put(moved)
    try:
        sid, csrf = session(ui)
        status, out = post(ui, "/ui-api/inferenceservices/moved/predict",
                           b'{"instances": [[1, 2, 3, 4]]}',
                           {"Cookie": f"{ui.cookie('token')}={ui.token}; "
                                      f"{ui.cookie('session')}={sid}",
                            "Origin": f"http://127.0.0.1:{ui.port}",
                            "Content-Type": "application/json", "X-Kflab-Csrf": csrf})
        assert status == 409 and "127.0.0.1" in out["message"]
    finally:
        ui.backend.store.delete("InferenceService", "moved")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_the_form_in_a_browser(ui: UiServer, tmp_path: Path) -> None:
    """Keyboard only: Tab to the protocol, arrow to V2 (its example body replaces V1's), Tab
    to Send, Enter: the model server's V2 answer appears; axe-core finds nothing to fix."""
    cdp = Cdp(tmp_path)
    try:
        cdp.call("Page.navigate", url=f"{ui.url}#/inferenceservices/iris")
        cdp.until("document.getElementById('main').dataset.view === 'inferenceservices/iris'")
        cdp.until("document.getElementById('tryit-body') !== null")
        cdp.tab_to("#tryit-v1")
        cdp.key("ArrowRight", 39)  # the radio group: V1 -> V2
        assert cdp.js("document.getElementById('tryit-v2').checked") is True
        assert '"inputs"' in cdp.js("document.getElementById('tryit-body').value")
        cdp.tab_to("button[type=submit]")
        cdp.key("Enter", 13)
        answer = cdp.until("(t => t.startsWith('predictions:') && t)"
                           "(document.getElementById('tryit-out').textContent)")
        assert '"outputs"' in answer, answer
        # axe-core (WCAG 2 A and AA) on the form with its answer, injected over CDP: the
        # page itself never loads it
        cdp.js(AXE.read_text())
        violations = cdp.js("axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']})"
                            ".then(r => r.violations.map(v => v.id))", wait=True)
        assert violations == [], violations
    finally:
        cdp.close()
