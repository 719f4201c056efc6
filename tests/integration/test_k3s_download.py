"""The k3s role's download-and-verify step, for real, against a local HTTP file server on
127.0.0.1 serving a STAND-IN file (not the k3s binary, which cannot be downloaded here): the
pinned sha256 is computed from the stand-in, so the role's own get_url/checksum path runs."""

from __future__ import annotations

import hashlib
import http.server
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.ansible_helpers import REPO, run_playbook

STANDIN = b"#!/bin/sh\necho 'kflab test stand-in for the k3s binary'\n"
PLAY = """
- name: Download and verify k3s only
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The k3s role's download step
      ansible.builtin.import_role:
        name: k3s
        tasks_from: download
"""


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    (root / "k3s-standin").write_bytes(STANDIN)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def setup(tmp_path: Path, url: str, sha: str | None, offline: Path | None = None) -> dict:
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    versions["artifacts"]["k3s"].update(url=url, sha256=sha, file="k3s-standin")
    vfile = tmp_path / "versions.yaml"
    vfile.write_text(yaml.safe_dump(versions))
    (tmp_path / "play.yml").write_text(PLAY)
    return {"kflab_versions_file": str(vfile), "kflab_state_dir": str(tmp_path / "state"),
            "k3s_bin_dir": str(tmp_path / "bin"), "kflab_offline_dir": str(offline or ""),
            "ansible_python_interpreter": sys.executable}


def play(tmp_path: Path, extra: dict):
    (tmp_path / "bin").mkdir(exist_ok=True)
    return run_playbook(tmp_path / "play.yml", "localhost,", extra, tmp_path)


def test_download_verifies_installs_and_is_idempotent(tmp_path, file_server):
    url, _ = file_server
    extra = setup(tmp_path, f"{url}/k3s-standin", hashlib.sha256(STANDIN).hexdigest())
    first = play(tmp_path, extra)
    assert first.rc == 0, first.output[-3000:]
    binary = tmp_path / "bin" / "k3s"
    assert binary.read_bytes() == STANDIN
    assert binary.stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "bin" / "kubectl").resolve() == binary
    assert first.recap("localhost")["changed"] >= 2
    second = play(tmp_path, extra)
    assert second.rc == 0 and second.recap("localhost")["changed"] == 0, second.output[-3000:]


def test_wrong_checksum_is_refused_and_nothing_installed(tmp_path, file_server):
    url, _ = file_server
    extra = setup(tmp_path, f"{url}/k3s-standin", hashlib.sha256(b"something else").hexdigest())
    result = play(tmp_path, extra)
    assert result.rc != 0
    assert "did not match" in result.output, result.output[-3000:]
    assert not (tmp_path / "bin" / "k3s").exists()


def test_unpinned_artifact_is_refused_before_any_download(tmp_path, file_server):
    url, _ = file_server
    result = play(tmp_path, setup(tmp_path, f"{url}/k3s-standin", None))
    assert result.rc != 0
    assert "artifacts.k3s has no usable pin" in result.output, result.output[-3000:]
    assert not (tmp_path / "bin" / "k3s").exists()


def test_plain_http_beyond_loopback_is_refused(tmp_path):
    extra = setup(tmp_path, "http://example.invalid/k3s", hashlib.sha256(STANDIN).hexdigest())
    result = play(tmp_path, extra)
    assert result.rc != 0 and "no usable pin" in result.output


def test_offline_folder_is_verified_like_a_download(tmp_path):
    offline = tmp_path / "offline"
    offline.mkdir()
    (offline / "k3s-standin").write_bytes(STANDIN)
    # The URL is never contacted in offline mode (nothing listens on port 9).
    extra = setup(tmp_path, "https://127.0.0.1:9/unused", hashlib.sha256(STANDIN).hexdigest(),
                  offline)
    result = play(tmp_path, extra)
    assert result.rc == 0, result.output[-3000:]
    assert (tmp_path / "bin" / "k3s").read_bytes() == STANDIN
    (offline / "k3s-standin").write_bytes(STANDIN + b"# tampered\n")
    (tmp_path / "bin" / "k3s").unlink()
    tampered = play(tmp_path, extra)
    assert tampered.rc != 0 and "did not match" in tampered.output, tampered.output[-3000:]
    assert not (tmp_path / "bin" / "k3s").exists()


def test_version_override_without_a_pin_is_refused(tmp_path, file_server):
    url, _ = file_server
    extra = setup(tmp_path, f"{url}/k3s-standin", hashlib.sha256(STANDIN).hexdigest())
    extra["kflab_version_overrides"] = {"k3s": "v1.33.5+k3s1"}
    result = play(tmp_path, extra)
    assert result.rc != 0
    assert "lab.yaml versions.k3s = v1.33.5+k3s1" in result.output, result.output[-3000:]
    assert not (tmp_path / "bin" / "k3s").exists()
