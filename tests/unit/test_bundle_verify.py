"""`kflab bundle verify` on hostile bundles: a tampered manifest, paths that leave the folder,
symlinks pointing out, special files, deep or truncated JSON. Each is refused naming the file
(LabError, exit 2), before anything of the bundle is used."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.teaching.bundle import MANIFEST, verify


def _bundle(root: Path) -> Path:
    (root / "images").mkdir(parents=True)
    (root / "images" / "a.tar").write_text("image")
    (root / "k3s").write_text("k3s")
    files = {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in root.rglob("*") if p.is_file()}
    (root / MANIFEST).write_text(json.dumps({"kind": "kflab-bundle", "format": 1,
                                             "files": files, "images": {}}))
    return root


def _listing(extra: dict[str, object]) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        m = json.loads((root / MANIFEST).read_text())
        m["files"].update(extra)
        (root / MANIFEST).write_text(json.dumps(m))
    return edit


def _symlink_listed(root: Path) -> None:
    os.symlink("/etc/hostname", root / "host")
    _listing({"host": hashlib.sha256(Path("/etc/hostname").read_bytes()).hexdigest()})(root)


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "sha-mismatch": (lambda r: (r / "k3s").write_text("changed"), "k3s: sha256"),
    "missing": (lambda r: (r / "k3s").unlink(), "k3s is missing"),
    "extra": (lambda r: (r / "extra").write_text("x"), "extra is not in"),
    "dotdot": (_listing({"../../etc/passwd": "0" * 64}), "refusing the path '../../etc/passwd'"),
    "absolute": (_listing({"/etc/passwd": "0" * 64}), "refusing the path '/etc/passwd'"),
    "not-a-sha": (_listing({"k3s": None}), "files.k3s: None is not a sha256"),
    "symlink-listed": (_symlink_listed, "a symlink (to /etc/hostname)"),
    "symlink-dir": (lambda r: os.symlink("/etc", r / "etc"), "a symlink (to /etc)"),
    "symlink-loop": (lambda r: os.symlink("loop", r / "loop"), "a symlink (to loop)"),
    "fifo": (lambda r: os.mkfifo(r / "fifo"), "fifo: not a regular file"),
    "deep-json": (lambda r: (r / MANIFEST).write_text("[" * 100_000 + "]" * 100_000),
                  "MAX_DEPTH"),
    "truncated": (lambda r: (r / MANIFEST).write_text('{"kind": "kf'), "invalid JSON"),
    "not-utf8": (lambda r: (r / MANIFEST).write_bytes(b"\xff\xfe"), "unreadable"),
    "manifest-to-dev-zero": (lambda r: ((r / MANIFEST).unlink(),
                                        os.symlink("/dev/zero", r / MANIFEST)),
                             "bundle.json: not a plain file"),
    "manifest-fifo": (lambda r: ((r / MANIFEST).unlink(), os.mkfifo(r / MANIFEST)),
                      "bundle.json: not a plain file"),
    "files-list": (lambda r: (r / MANIFEST).write_text('{"kind": "kflab-bundle", "files": []}'),
                   "not a kflab bundle manifest"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tampered_bundle_is_refused_naming_the_file(tmp_path: Path, case: str) -> None:
    root = _bundle(tmp_path / "b")
    assert verify(root)["kind"] == "kflab-bundle"
    edit, expect = CASES[case]
    edit(root)
    with pytest.raises(LabError) as err:
        verify(root)
    assert expect in str(err.value) and str(root) in str(err.value), str(err.value)


def test_a_file_given_as_the_bundle_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(LabError, match="not a folder"):
        verify(tmp_path / "f")
