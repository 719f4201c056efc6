"""The state folder's one path helper: parts are checked, results are confined to the folder
(symlinks planted inside it included), deletes never leave it, corrupt files are reported
and moved aside. Real files and links; one test simulates a full disk (named so)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import yaml

from lab import state
from lab.backends.local import LocalBackend
from lab.backends.local.procs import is_running
from lab.backends.local.store import Store
from lab.errors import InputError, LabError
from lab.state import StateError


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A user's folder outside the state folder, with a file that must survive."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    return folder


def intact(folder: Path) -> bool:
    return (folder / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize("part", ["..", ".", "", "a/b", "/etc", ".hidden", "-x", "a\0b",
                                  "x" * 256, 5])
def test_bad_parts_are_refused(tmp_path: Path, part: object) -> None:
    with pytest.raises(StateError, match="refusing"):
        state.path(tmp_path, "runs", part)  # type: ignore[arg-type]


def test_store_refuses_hostile_names_before_touching_disk(tmp_path: Path, victim: Path) -> None:
    store = Store(tmp_path / "s")
    with pytest.raises(InputError, match="invalid namespace"):
        store.delete("PyTorchJob", "data", str(victim))
    with pytest.raises(InputError, match="invalid PipelineRun name"):
        store.run_dir("PipelineRun", "../../victim")
    with pytest.raises(InputError):
        store.put({"kind": "PyTorchJob", "metadata": {"name": "../x", "namespace": "default"}})
    assert intact(victim) and not (tmp_path / "s").exists()


def test_planted_symlink_out_of_the_state_folder_is_refused(tmp_path: Path,
                                                            victim: Path) -> None:
    """A link inside the state folder that points outside: delete refuses and names it."""
    root = tmp_path / "s"
    store = Store(root)
    store.put({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
               "metadata": {"name": "data"}, "spec": {}})
    link = root / "runs" / "pytorchjobs" / "default" / "data"
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)
    with pytest.raises(StateError, match="outside the state folder") as err:
        store.delete("PyTorchJob", "data")
    assert str(link) in str(err.value)
    assert intact(victim)
    # A link higher up (the namespace folder itself) is refused the same way.
    link.unlink()
    ns_link = root / "runs" / "pytorchjobs" / "team"
    ns_link.symlink_to(victim)
    with pytest.raises(StateError, match="outside the state folder"):
        store.run_dir("PyTorchJob", "data", "team")
    with pytest.raises(StateError, match="outside the state folder"):
        state.remove(root, ns_link / "precious.txt")
    assert intact(victim)


def test_link_to_inside_is_removed_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    target = state.path(root, "keep")
    target.mkdir(parents=True)
    (target / "f").write_text("x")
    link = state.path(root, "link")
    link.symlink_to(target)
    assert state.remove(root, link)
    assert not link.exists() and (target / "f").read_text() == "x"
    assert not state.remove(root, link)
    with pytest.raises(StateError, match="outside"):
        state.remove(root, tmp_path)
    with pytest.raises(StateError, match="state folder itself"):
        state.remove(root, root)


@pytest.mark.parametrize("content", [
    b"", b'{"kind": "Experi', b"\xff\xfe\x00", b"[1, 2]", b"[" * 100_000 + b"]" * 100_000,
    # valid JSON of the wrong shape (a hand edit): each was exit 70 in get/describe/delete
    b'{"metadata": 5}', b'{"kind": "Experiment"}', b'{"metadata": {"name": "exp"}, "status": [1]}',
    b'{"metadata": {"name": "exp"}, "spec": "x"}',
    b'{"metadata": {"name": "exp"}, "status": {"run_details": {"task_details": 5}}}',
    b'{"metadata": {"name": "exp"}, "status": {"run_details": 5}}'])
def test_corrupt_state_file_is_reported_and_moved_aside(tmp_path: Path, content: bytes) -> None:
    backend = LocalBackend(str(tmp_path / "s"))
    file = backend.root / "resources" / "experiments" / "default" / "exp.json"
    file.parent.mkdir(parents=True)
    file.write_bytes(content)
    with pytest.raises(StateError) as err:
        backend.list("Experiment")
    text = str(err.value)
    assert f"corrupt state file {file}" in text and "exp.json.corrupt" in text
    assert "apply the resource again" in text
    assert file.with_name("exp.json.corrupt").read_bytes() == content
    assert backend.list("Experiment") == []  # the next command works again


def test_unwritable_state_names_the_file_and_the_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "s" / "resources"
    blocker.parent.mkdir()
    blocker.write_text("a file where a folder belongs")
    store = Store(tmp_path / "s")
    with pytest.raises(StateError, match=r"cannot write .*exp\.json") as err:
        store.put({"kind": "Experiment", "metadata": {"name": "exp"}})
    assert "--state" in str(err.value)


def test_simulated_full_disk_stops_trials_and_leaves_nothing_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIMULATED ENOSPC at the write helper (tests/integration/test_state_broken.py fills a
    real tmpfs): two trials run; the disk "fills" once both have started, so the status
    write after the first one finishes fails. The experiment stops with a clear error, the
    other trial's process is gone, and the next look shows it Failed -- never Running."""
    from tuning_helpers import TRIAL, experiment, write

    write(tmp_path, "trial.py", TRIAL + (
        "\nimport pathlib\npathlib.Path(f'{os.getpid()}.pid').touch()\n"
        "try:\n    os.close(os.open('first', os.O_CREAT | os.O_EXCL))\n"
        "    time.sleep(1)\nexcept FileExistsError:\n    time.sleep(30)\n"))
    backend = LocalBackend(str(tmp_path / "s"))
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        if len(list(tmp_path.glob("*.pid"))) >= 2 and str(dst).endswith(".json"):
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(state.os, "replace", replace)
    with pytest.raises(StateError, match="no space left"):
        backend.apply(experiment(maxTrialCount=4, parallelTrialCount=2), base_dir=tmp_path)
    monkeypatch.setattr(state.os, "replace", real_replace)
    pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
    assert len(pids) == 2 and not any(is_running(pid) for pid in pids)
    exp = backend.get("Experiment", "exp")
    last = exp["status"]["conditions"][-1]
    assert last["type"] == "Failed" and "ended without finishing it" in last["message"]
    assert all(t["status"]["conditions"][-1]["type"] != "Running"
               for t in backend.list("Trial"))
    assert not list(tmp_path.glob("s/**/.tmp-*"))  # no half-written temp file left


def test_state_dir_is_private(tmp_path: Path) -> None:
    path = state.state_dir(tmp_path / "fresh")
    assert path.stat().st_mode & 0o777 == 0o700
    (tmp_path / "file").write_text("")
    with pytest.raises(LabError):
        state.state_dir(tmp_path / "file")


def test_records_are_json_written_atomically(tmp_path: Path) -> None:
    target = state.path(tmp_path, "a", "b.json")
    state.write_json(target, {"x": [1, 2]})
    assert json.loads(target.read_text()) == {"x": [1, 2]}
    assert [p.name for p in target.parent.iterdir()] == ["b.json"]
    assert yaml.safe_load(target.read_text()) == {"x": [1, 2]}
