"""The k3s role's download step, for real (ansible-playbook on this machine), against a
loopback artifact server that stands in for github.com (kflab_github_url, as KFLAB_GITHUB_URL
sets it). REAL: the role, the pinned version and URLs of manifests/versions.yaml, the checksum
cross-check and the sha256 check. STAND-IN: the served bytes (a shell script that answers
`--version` like k3s) and the release's sha256sum-ARCH.txt (the real ones cannot be downloaded
here); where a test needs the bytes accepted, it pins the stand-in's sha256."""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.artifact_server import (
    K3S_RELEASE,
    K3S_VERSION,
    ArtifactServer,
    k3s_standin,
    serve,
    sha256,
    sums,
)
from tests.integration.ansible_helpers import REPO, run_playbook

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
STANDIN = k3s_standin()
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
    - name: Then its links (tasks/install.yml's first step)
      ansible.builtin.import_role:
        name: k3s
        tasks_from: links
"""


def real_versions() -> dict:
    return yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ArtifactServer]:
    with serve(tmp_path / "www") as srv:
        yield srv


def publish(srv: ArtifactServer, binary: bytes, listed: str | None) -> str:
    """Serve BINARY as this arch's k3s asset and a checksum file listing LISTED for it (no
    entry when None), next to other assets as in the real file."""
    name = real_versions()["artifacts"]["k3s"]["arch"][ARCH]["file"]
    srv.put(f"{K3S_RELEASE}/{name}", binary)
    entries = {"k3s-airgap-images-amd64.tar": "1" * 64}
    if listed:
        entries[name] = listed
    srv.put(f"{K3S_RELEASE}/sha256sum-{ARCH}.txt", sums(entries))
    return name


def setup(tmp_path: Path, srv_url: str, sha: str | None = "real", *,
          offline: Path | None = None, mutate=None) -> dict:
    """A versions file: the real one, with this arch's sha256 replaced by SHA unless "real"."""
    versions = real_versions()
    if sha != "real":
        versions["artifacts"]["k3s"]["arch"][ARCH]["sha256"] = sha
    if mutate:
        mutate(versions)
    vfile = tmp_path / "versions.yaml"
    vfile.write_text(yaml.safe_dump(versions))
    (tmp_path / "play.yml").write_text(PLAY)
    return {"kflab_versions_file": str(vfile), "kflab_state_dir": str(tmp_path / "state"),
            "k3s_bin_dir": str(tmp_path / "bin"), "kflab_offline_dir": str(offline or ""),
            "kflab_github_url": srv_url, "ansible_python_interpreter": sys.executable}


def play(tmp_path: Path, extra: dict):
    (tmp_path / "bin").mkdir(exist_ok=True)
    return run_playbook(tmp_path / "play.yml", "localhost,", extra, tmp_path)


def test_pinned_and_listed_download_installs_and_is_idempotent(tmp_path, server):
    name = publish(server, STANDIN, sha256(STANDIN))
    extra = setup(tmp_path, server.url, sha256(STANDIN))
    first = play(tmp_path, extra)
    assert first.rc == 0, first.output[-3000:]
    binary = tmp_path / "bin" / "k3s"
    assert binary.read_bytes() == STANDIN
    assert binary.stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "bin" / "kubectl").resolve() == binary
    assert server.fetched(f"/{K3S_VERSION}/sha256sum-{ARCH}.txt") == 1
    assert server.fetched(f"/{K3S_VERSION}/{name}") == 1
    assert first.recap("localhost")["changed"] >= 2
    second = play(tmp_path, extra)
    assert second.rc == 0 and second.recap("localhost")["changed"] == 0, second.output[-3000:]
    # the file in place is the pinned one (as in a baked box): nothing is fetched at all
    assert server.fetched(f"/{K3S_VERSION}/sha256sum-{ARCH}.txt") == 1
    assert server.fetched(f"/{K3S_VERSION}/{name}") == 1
    # a file in place that is not the pin is replaced, cross-checked again
    binary.write_bytes(b"#!/bin/sh\necho not k3s\n")
    third = play(tmp_path, extra)
    assert third.rc == 0, third.output[-3000:]
    assert binary.read_bytes() == STANDIN
    assert server.fetched(f"/{K3S_VERSION}/sha256sum-{ARCH}.txt") == 2
    assert server.fetched(f"/{K3S_VERSION}/{name}") == 2


def test_real_pins_cross_check_then_refuse_the_standin_bytes(tmp_path, server):
    """The REAL pinned sha256 of manifests/versions.yaml, listed in a stand-in checksum file
    (as the real sha256sum-ARCH.txt lists it): the cross-check passes, and the stand-in bytes
    are then refused by their sha256."""
    real = real_versions()["artifacts"]["k3s"]["arch"][ARCH]["sha256"]
    publish(server, STANDIN, real)
    result = play(tmp_path, setup(tmp_path, server.url))
    assert result.rc != 0
    assert "Cross-check the pinned sha256 with the release's own" in result.output
    assert "did not match" in result.output, result.output[-3000:]
    assert not (tmp_path / "bin" / "k3s").exists()


@pytest.mark.parametrize("listed, says", [
    ("f" * 64, "lists " + "f" * 64),
    (None, "lists no entry for it"),
])
def test_checksum_file_disagreeing_refuses_before_download(tmp_path, server, listed, says):
    name = publish(server, STANDIN, listed)
    result = play(tmp_path, setup(tmp_path, server.url, sha256(STANDIN)))
    assert result.rc != 0
    out = " ".join(result.output.split())
    assert "the pins disagree" in out, result.output[-3000:]
    assert f"pins sha256 {sha256(STANDIN)} for {name}" in out and says in out
    assert server.fetched(f"/{K3S_VERSION}/{name}") == 0  # never downloaded
    assert not (tmp_path / "bin" / "k3s").exists()


def test_wrong_bytes_are_refused_and_nothing_installed(tmp_path, server):
    publish(server, STANDIN + b"# tampered\n", sha256(STANDIN))
    result = play(tmp_path, setup(tmp_path, server.url, sha256(STANDIN)))
    assert result.rc != 0
    assert "did not match" in result.output, result.output[-3000:]
    assert not (tmp_path / "bin" / "k3s").exists()


def test_binary_naming_another_version_is_refused(tmp_path, server):
    other = k3s_standin("v1.33.5+k3s1")
    publish(server, other, sha256(other))
    result = play(tmp_path, setup(tmp_path, server.url, sha256(other)))
    assert result.rc != 0
    out = " ".join(result.output.split())
    assert "k3s --version says \"k3s version v1.33.5+k3s1 (00000000)" in out, out[-3000:]
    assert f"pins {K3S_VERSION}" in out and "k3s is not started" in out
    assert not (tmp_path / "bin" / "kubectl").exists()  # stopped before linking


def test_unpinned_artifact_is_refused_before_any_download(tmp_path, server):
    publish(server, STANDIN, sha256(STANDIN))
    result = play(tmp_path, setup(tmp_path, server.url, None))
    assert result.rc != 0
    assert f"artifacts.k3s.arch.{ARCH} has no usable pin" in " ".join(result.output.split())
    assert server.requests == []


def test_architecture_without_a_pin_is_refused(tmp_path, server):
    result = play(tmp_path, setup(tmp_path, server.url,
                                  mutate=lambda v: v["artifacts"]["k3s"]["arch"].pop(ARCH)))
    assert result.rc != 0
    assert "has no pin for this node's architecture" in result.output, result.output[-3000:]
    assert server.requests == []


def test_plain_http_mirror_beyond_loopback_is_refused(tmp_path):
    result = play(tmp_path, setup(tmp_path, "http://example.invalid", sha256(STANDIN)))
    assert result.rc != 0 and "neither https:// nor loopback" in " ".join(result.output.split())


def test_offline_folder_is_verified_like_a_download(tmp_path):
    """Offline, the bundle carries the release's checksum file too; the cross-check reads it."""
    name = real_versions()["artifacts"]["k3s"]["arch"][ARCH]["file"]
    offline = tmp_path / "offline"
    offline.mkdir()
    (offline / name).write_bytes(STANDIN)
    (offline / f"sha256sum-{ARCH}.txt").write_bytes(sums({name: sha256(STANDIN)}))
    # No server: nothing listens on port 9, and the mirror is never contacted offline.
    extra = setup(tmp_path, "http://127.0.0.1:9", sha256(STANDIN), offline=offline)
    result = play(tmp_path, extra)
    assert result.rc == 0, result.output[-3000:]
    assert (tmp_path / "bin" / "k3s").read_bytes() == STANDIN
    (offline / name).write_bytes(STANDIN + b"# tampered\n")
    (tmp_path / "bin" / "k3s").unlink()
    tampered = play(tmp_path, extra)
    assert tampered.rc != 0 and "did not match" in tampered.output, tampered.output[-3000:]
    assert not (tmp_path / "bin" / "k3s").exists()
    (offline / f"sha256sum-{ARCH}.txt").unlink()
    no_sums = play(tmp_path, extra)
    out = " ".join(no_sums.output.split())
    assert no_sums.rc != 0 and f"lacks sha256sum-{ARCH}.txt" in out, out[-3000:]


def test_version_override_without_a_pin_is_refused(tmp_path, server):
    extra = setup(tmp_path, server.url, sha256(STANDIN))
    extra["kflab_version_overrides"] = {"k3s": "v1.33.5+k3s1"}
    result = play(tmp_path, extra)
    assert result.rc != 0
    assert "lab.yaml versions.k3s = v1.33.5+k3s1" in result.output, result.output[-3000:]
    assert "kflab components pin k3s=VERSION" in " ".join(result.output.split())
    assert server.requests == []
