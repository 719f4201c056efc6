"""`kflab debug bundle` without a cluster: the lab's own files still go in, what could not
be read is listed, and every credential shape the redactor knows is removed."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from lab.debugbundle import REDACTED, redact
from tests.conftest import run_kflab


@pytest.mark.parametrize(("text", "gone"), [
    ("password: hunter2", "hunter2"),
    ('{"adminPassword": "s3cr3t-value"}', "s3cr3t-value"),
    ("MINIO_SECRET_KEY=abc123xyz", "abc123xyz"),
    ("--token=abcdef0123456789", "abcdef0123456789"),
    ("token: K10aaaaaaaaaaaaaaaaaaaa::server:bbbbbbbb", "bbbbbbbb"),
    ("- name: HF_TOKEN\n  value: hf_planted", "hf_planted"),
    ("client-key-data: LS0tLS1CRUdJTi", "LS0tLS1CRUdJTi"),
    ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"),
    ("x eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXBhcnQ y", "eyJhbGci"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
    # a flag's value after a space, a password in a URL, a registry's `auth` (base64)
    ("k3s server --token planted-k3s-token --write-kubeconfig-mode 600", "planted-k3s-token"),
    ("HTTPS_PROXY=http://user:pr0xy-pass@proxy:3128", "pr0xy-pass"),
    ("configs:\n  ghcr.io:\n    auth: dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
])
def test_redact_removes_credentials(text: str, gone: str) -> None:
    out = redact(text)
    assert gone not in out and REDACTED in out


def test_redact_keeps_ordinary_text() -> None:
    text = "TASK [kubeflow : wait for webhook] ok: [lab] => katib-controller 1/1 available"
    assert redact(text) == text
    for text in ("author: me", "oauth2-proxy: 1/1", "https://example.com:8443/x",
                 "--write-kubeconfig-mode 600"):
        assert redact(text) == text


def test_a_lab_that_never_came_up_still_gets_a_bundle(tmp_path: Path) -> None:
    state = tmp_path / "state"
    lab = state / "labs" / "half"
    lab.mkdir(parents=True)
    (lab / "lab.json").write_text(json.dumps({"profile": {"provider": "host", "name": "half"},
                                              "phase": "create", "ok": False}))
    (lab / "ansible.log").write_text("fatal: [half]: FAILED! password=hunter2\n")
    out = tmp_path / "b.tar.gz"
    res = run_kflab("debug", "bundle", "-o", str(out), env={"KFLAB_STATE": str(state)},
                    timeout=60)
    assert res.returncode == 0, res.stderr
    assert "not collected: lab/verify.json" in res.stderr
    with tarfile.open(out) as tar:
        names = {m.name.split("/", 1)[1]: m for m in tar.getmembers()}
        log = tar.extractfile(names["lab/ansible.log"]).read().decode()
        errors = tar.extractfile(names["errors.txt"]).read().decode()
    assert "FAILED!" in log and "hunter2" not in log
    assert "lab/lab.yaml" in names and "versions/versions.txt" in names
    assert "verify.json" in errors


def test_no_lab_and_no_kubeconfig_is_one_clear_line(tmp_path: Path) -> None:
    res = run_kflab("debug", "bundle", env={"KFLAB_STATE": str(tmp_path / "none")}, timeout=60)
    assert res.returncode == 2 and "no lab here yet" in res.stderr
