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


def _bundle(path: Path) -> dict[str, str]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()
                for m in tar.getmembers() if m.isfile()}


def test_no_lab_bundles_the_local_backend_with_every_planted_secret_redacted(
        tmp_path: Path) -> None:
    """Issue 33 Why #7 (`debug bundle` refused on the local backend: "no lab here yet") and
    issue 34 Why #2 (18 of 36 planted secrets leaked). Two real PyTorchJobs on the local
    backend carry 47 secrets in their env, argv (after flags, `--flag=`, inside `sh -c`),
    annotations (the JSON-array k3s node args among them) and logs; a `kflab ui` launch file
    sits in the state folder. The bundle has the records, owner records and run logs, the
    names of every variable and flag, and none of the values."""
    from lab.backends.local import LocalBackend
    from lab.webui.server import UiServer
    from tests import planted_secrets as planted

    state = tmp_path / "state"
    backend = LocalBackend(str(state))
    for name, container in (("secrets", planted.shell_container()),
                            ("argv", planted.args_container())):
        container["name"] = "pytorch"
        done = backend.apply({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "annotations": planted.ANNOTATIONS},
            "spec": {"pytorchReplicaSpecs": {"Master": {
                "replicas": 1, "restartPolicy": "Never",
                "template": {"spec": {"containers": [container]}}}}}}, base_dir=tmp_path)
        conditions = {c["type"]: c["status"] for c in done["status"]["conditions"]}
        assert conditions.get("Succeeded") == "True", done["status"]
    backend.down()
    ui = UiServer(backend, state).start()
    opener = ui.launch_file(state / "ui")
    code = opener.read_text().split("code=")[1].split('"')[0]
    out = tmp_path / "b.tar.gz"
    res = run_kflab("debug", "bundle", "-o", str(out), env={"KFLAB_STATE": str(state)},
                    timeout=120)
    ui.stop()
    assert res.returncode == 0, res.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    files = _bundle(out)
    planted.assert_clean(files)
    text = "\n".join(files.values())
    assert ui.token not in text and code not in text
    for name in planted.KEPT:
        assert name in text, name
    assert "Cookie: <redacted>" in text  # the log line is there, its value is not
    for name in ("state/resources/pytorchjobs/default/secrets.yaml",
                 "state/resources/pytorchjobs/default/argv.yaml",
                 "state/owners/pytorchjobs/default/secrets.yaml", "state/summary.txt",
                 "versions/versions.txt"):
        assert name in files, (name, sorted(files))
    assert any(n.startswith("state/runs/pytorchjobs/default/secrets/") and n.endswith(".log")
               for n in files), sorted(files)
    assert not any(n.startswith(("state/ui", "state/sandboxes")) for n in files)


def test_a_named_lab_that_does_not_exist_is_one_clear_line(tmp_path: Path) -> None:
    res = run_kflab("debug", "bundle", "--name", "nope",
                    env={"KFLAB_STATE": str(tmp_path / "none")}, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2


def test_argv_redaction_keeps_names_and_drops_values() -> None:
    from lab.redact import argv, script

    assert argv(["mc", "alias", "set", "local", "http://m:9000", "AKIAX", "s3cr3t"]) == [
        "mc", "alias", "set", REDACTED, REDACTED, REDACTED, REDACTED]
    assert argv(["k3s", "server", "--token", "t0k", "--disable=traefik", "-p", "x"]) == [
        "k3s", "server", "--token", REDACTED, f"--disable={REDACTED}", "-p", REDACTED]
    assert script("python train.py --lr 0.1 && echo done") == \
        f"python train.py --lr {REDACTED} && echo done"
    assert script("echo 'unterminated") == REDACTED


def test_a_fifo_or_a_huge_file_in_the_state_folder_never_stalls_the_bundle(
        tmp_path: Path) -> None:
    """A FIFO planted as a run log and as a record (a read would block for ever), and a
    record over the cap: the bundle is written, says what it left out, and reads none."""
    import os

    from lab import debugbundle

    state = tmp_path / "state"
    logs = state / "runs" / "pytorchjobs" / "default" / "j"
    logs.mkdir(parents=True)
    os.mkfifo(logs / "master-0.log")
    records = state / "resources" / "pytorchjobs" / "default"
    records.mkdir(parents=True)
    os.mkfifo(records / "j.json")
    (records / "big.json").write_text('{"a": "' + "x" * (debugbundle.MAX_RECORD_BYTES + 1)
                                      + '"}')
    out = tmp_path / "b.tar.gz"
    res = run_kflab("debug", "bundle", "-o", str(out), env={"KFLAB_STATE": str(state)},
                    timeout=120)
    assert res.returncode == 0, res.stderr
    files = _bundle(out)
    errors = files["errors.txt"]
    assert "state/runs/pytorchjobs/default/j/master-0.log" in errors, errors
    assert "state/resources/pytorchjobs/default/j.json" in errors
    assert "state/resources/pytorchjobs/default/big.json" in errors
    assert "state/summary.txt" in files
