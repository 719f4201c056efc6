"""The gpu role's apt key step (the artifact role, kind openpgp-key), for real with gpg, on
this machine: a key is trusted only when gpg reads exactly one primary key with the pinned
fingerprint. STAND-INS: throwaway keys generated here in a temporary GNUPGHOME (the real
NVIDIA key is never fetched), served by a loopback http server in place of
nvidia.github.io; the test pins the throwaway key's fingerprint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.artifact_server import ArtifactServer, serve
from tests.integration.ansible_helpers import REPO, run_playbook

PLAY = """
- name: The NVIDIA apt key step only
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Install the repository key (trusted only with the pinned fingerprint)
      ansible.builtin.import_role:
        name: artifact
      vars:
        artifact_name: nvidia-container-toolkit-key
        artifact_dest: "{{ keyring }}"
"""


def gpg(home: Path, *args: str) -> str:
    return subprocess.run(["gpg", "--batch", "--homedir", str(home), *args], check=True,
                          capture_output=True, text=True, timeout=120).stdout


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Iterator[dict[str, tuple[str, bytes]]]:
    """Two throwaway signing keys: name -> (fingerprint, armored public key); the gpg-agent
    that making them started is stopped afterwards (it would outlive the tests)."""
    if shutil.which("gpg") is None or os.geteuid() != 0:
        pytest.skip("needs gpg and root (the role writes root-owned files)")
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    out = {}
    for name in ("first", "second"):
        uid = f"kflab test {name} <{name}@kflab.invalid>"
        gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
        fpr = next(line.split(":")[9] for line in gpg(home, "--with-colons", "--list-keys", uid)
               .splitlines() if line.startswith("fpr:"))
        out[name] = (fpr, gpg(home, "--armor", "--export", fpr).encode())
    yield out
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ArtifactServer]:
    with serve(tmp_path / "www") as srv:
        yield srv


def setup(tmp_path: Path, url: str, fingerprint: str, offline: Path | None = None) -> dict:
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    versions["artifacts"]["nvidia-container-toolkit-key"].update(url=url,
                                                                fingerprint=fingerprint)
    (tmp_path / "versions.yaml").write_text(yaml.safe_dump(versions))
    (tmp_path / "play.yml").write_text(PLAY)
    return {"kflab_versions_file": str(tmp_path / "versions.yaml"),
            "kflab_state_dir": str(tmp_path / "state"), "kflab_offline_dir": str(offline or ""),
            "keyring": str(tmp_path / "keyrings" / "nvidia.asc"),
            "ansible_python_interpreter": sys.executable}


def play(tmp_path: Path, extra: dict):
    (tmp_path / "keyrings").mkdir(exist_ok=True)
    return run_playbook(tmp_path / "play.yml", "localhost,", extra, tmp_path)


def test_the_pinned_key_is_trusted_and_the_step_converges(tmp_path, server, keys):
    fpr, key = keys["first"]
    server.put("libnvidia-container/gpgkey", key)
    extra = setup(tmp_path, f"{server.url}/libnvidia-container/gpgkey", fpr)
    first = play(tmp_path, extra)
    assert first.rc == 0, first.output[-3000:]
    keyring = tmp_path / "keyrings" / "nvidia.asc"
    assert keyring.read_bytes() == key and keyring.stat().st_mode & 0o777 == 0o644
    again = play(tmp_path, extra)
    assert again.rc == 0 and again.recap("localhost")["changed"] == 0, again.output[-3000:]


@pytest.mark.parametrize("served, says", [
    ("second", "gpg reads {second}"),
    ("both", "(2 primary keys: exactly one expected)"),
    ("garbage", "gpg reads no key"),
])
def test_any_other_key_is_refused_and_not_installed(tmp_path, server, keys, served, says):
    fpr = keys["first"][0]
    data = {"second": keys["second"][1], "both": keys["first"][1] + keys["second"][1],
            "garbage": b"<html>not a key</html>\n"}[served]
    server.put("libnvidia-container/gpgkey", data)
    result = play(tmp_path, setup(tmp_path, f"{server.url}/libnvidia-container/gpgkey", fpr))
    out = " ".join(result.output.split())
    assert result.rc != 0
    assert "is not the pinned key, so it is not trusted" in out, out[-3000:]
    assert f"pins fingerprint {fpr}" in out
    assert says.format(second=keys["second"][0]) in out
    assert not (tmp_path / "keyrings" / "nvidia.asc").exists()


def test_offline_key_is_checked_the_same_way(tmp_path, keys):
    offline = tmp_path / "offline"
    offline.mkdir()
    name = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())[
        "artifacts"]["nvidia-container-toolkit-key"]["file"]
    (offline / name).write_bytes(keys["second"][1])
    extra = setup(tmp_path, "https://127.0.0.1:9/unused", keys["first"][0], offline)
    refused = play(tmp_path, extra)
    assert refused.rc != 0 and "is not the pinned key" in refused.output
    (offline / name).write_bytes(keys["first"][1])
    accepted = play(tmp_path, extra)
    assert accepted.rc == 0, accepted.output[-3000:]
    assert (tmp_path / "keyrings" / "nvidia.asc").read_bytes() == keys["first"][1]


def test_the_real_pin_is_nvidias_published_fingerprint():
    entry = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())[
        "artifacts"]["nvidia-container-toolkit-key"]
    assert entry["kind"] == "openpgp-key"
    assert entry["fingerprint"] == "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
