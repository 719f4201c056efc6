"""Baked boxes without a VM: lab.yaml `vagrant: box:`, the metadata kflab writes and reads,
and the refusals that come before Vagrant is called (a box that is not the one its metadata
names is never added). The build and boot themselves run on a real TCG VM in
tests/integration/test_vagrant_libvirt_up.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import config
from lab.errors import InputError, LabError
from lab.providers import vagrant_box
from lab.providers.vagrant import render
from lab.teaching.box import HOSTKEYS_UNIT, clean_script


def _handout(tmp_path: Path, data: bytes = b"box bytes") -> tuple[Path, str]:
    out = tmp_path / "handout"
    out.mkdir()
    sha = vagrant_box.sha256_file(_write(out / "kflab-box-x.box", data))
    meta = vagrant_box.metadata_doc(vagrant_box.content_name(sha), "1.0.0", "libvirt",
                                    "kflab-box-x.box", sha)
    (out / "metadata.json").write_text(json.dumps(meta))
    return out / "metadata.json", sha


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_lab_yaml_box_is_resolved_beside_the_profile(tmp_path: Path) -> None:
    meta, _ = _handout(tmp_path)
    f = tmp_path / "lab.yaml"
    f.write_text("provider: vagrant-libvirt\nvagrant:\n  box: handout/metadata.json\n")
    prof = config.load(f)
    assert prof.vagrant.box == str(meta.resolve())
    # VirtualBox takes a box file too (the other vagrant options stay libvirt-only)
    f.write_text("provider: vagrant-virtualbox\nvagrant:\n  box: handout/metadata.json\n")
    assert config.load(f).vagrant.box == str(meta.resolve())


@pytest.mark.parametrize(("value", "words"), [
    ("handout/missing.json", "does not exist"),
    ("handout/notes.txt", "neither a .box file nor a .json"),
])
def test_lab_yaml_box_refusals_name_the_field(tmp_path: Path, value: str, words: str) -> None:
    _handout(tmp_path)
    f = tmp_path / "lab.yaml"
    f.write_text(f"provider: vagrant-libvirt\nvagrant:\n  box: {value}\n")
    with pytest.raises(InputError) as err:
        config.load(f)
    assert "vagrant.box" in str(err.value) and words in str(err.value)


def test_metadata_names_the_box_by_its_content_and_resolves_beside_itself(tmp_path: Path,
                                                                        monkeypatch) -> None:
    meta, sha = _handout(tmp_path)
    monkeypatch.chdir("/")
    ref = vagrant_box.read(meta, "libvirt")
    assert ref.name == f"kflab-box/{sha[:16]}" and ref.version == "1.0.0"
    assert ref.file == meta.parent / "kflab-box-x.box" and ref.sha256 == sha
    with pytest.raises(LabError, match="no box for the virtualbox provider"):
        vagrant_box.read(meta, "virtualbox")


def test_a_changed_box_or_edited_metadata_is_refused_before_vagrant(tmp_path: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # vagrant is never reached
    meta, sha = _handout(tmp_path)
    (meta.parent / "kflab-box-x.box").write_bytes(b"box bytes, changed")
    with pytest.raises(LabError, match="sha256 .* but .*metadata.json says " + sha):
        vagrant_box.ensure_added(meta, "libvirt", lambda _: None)
    doc = json.loads(meta.read_text())
    doc["name"] = "someone/else"
    meta.write_text(json.dumps(doc))
    with pytest.raises(LabError, match="not the box's content name"):
        vagrant_box.read(meta, "libvirt")
    doc["name"] = vagrant_box.content_name(sha)
    doc["versions"][0]["providers"][0]["checksum_type"] = "md5"
    meta.write_text(json.dumps(doc))
    with pytest.raises(LabError, match="no sha256 checksum"):
        vagrant_box.read(meta, "libvirt")


def test_up_box_option_reaches_the_profile(tmp_path: Path) -> None:
    meta, _ = _handout(tmp_path)
    prof = config.Profile(provider="vagrant-libvirt")
    from dataclasses import replace

    prof = prof.with_overrides(vagrant=replace(prof.vagrant, box=str(meta)))
    assert prof.vagrant.box == str(meta)
    assert 'lv.disk_driver discard: "unmap", detect_zeroes: "unmap"' in render(prof)


def test_clean_script_removes_the_vms_identity_and_keeps_the_images() -> None:
    text = clean_script("ssh-ed25519 AAAA vagrant insecure public key")
    for line in ("truncate -s 0 /etc/machine-id", "rm -f /etc/ssh/ssh_host_*",
                 "rm -rf /var/lib/apt/lists/*", "fstrim -v /",
                 "! -name images", "systemctl enable kflab-ssh-host-keys.service"):
        assert line in text, line
    assert "'ssh-ed25519 AAAA vagrant insecure public key'" in text  # quoted for sh
    assert "Before=ssh.service" in HOSTKEYS_UNIT and "ssh-keygen -A" in HOSTKEYS_UNIT


def test_clean_script_is_valid_sh(tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "clean.sh"
    script.write_text(clean_script("ssh-rsa AAAA it's a key"))
    proc = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
