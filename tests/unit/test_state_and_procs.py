"""The state folder store and process tracking (real processes, no mocks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.backends.local.procs import (
    ChildGroup,
    ProcRecord,
    Registry,
    is_running,
    kill_group,
    signal_group,
    start_time,
    stop_all,
)
from lab.backends.local.store import Store
from lab.errors import LabError
from lab.kube.kinds import for_object, lookup
from lab.state import read_json, state_dir, write_json


def test_store_roundtrip_list_delete(tmp_path: Path) -> None:
    store = Store(tmp_path)
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "a"}}
    store.put(obj)
    store.put({**obj, "metadata": {"name": "b", "namespace": "team"}})
    assert store.get("ptj", "a")["metadata"]["namespace"] == "default"
    assert sorted(o["metadata"]["name"] for o in store.list("pytorchjobs")) == ["a", "b"]
    assert [o["metadata"]["name"] for o in store.list("PyTorchJob", "team")] == ["b"]
    (store.run_dir("PyTorchJob", "a") / "log").write_text("x")
    assert store.delete("PyTorchJob", "a") and not store.delete("PyTorchJob", "a")
    assert not (tmp_path / "runs" / "pytorchjobs" / "default" / "a").exists()


def test_atomic_json_and_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_json(tmp_path / "x" / "f.json", {"a": 1})
    assert read_json(tmp_path / "x" / "f.json") == {"a": 1}
    assert read_json(tmp_path / "missing.json") is None
    assert not list((tmp_path / "x").glob(".*tmp"))
    monkeypatch.setenv("KFLAB_STATE", str(tmp_path / "s"))
    path = state_dir()
    assert path == tmp_path / "s" and (path.stat().st_mode & 0o777) == 0o700


def test_kinds_lookup_and_group_check() -> None:
    assert lookup("isvc").kind == "InferenceService"
    with pytest.raises(LabError, match="unknown resource type"):
        lookup("deployments")
    with pytest.raises(LabError, match=r"expected group 'kubeflow\.org'"):
        for_object({"apiVersion": "batch/v1", "kind": "PyTorchJob"})


def test_background_process_is_tracked_and_stopped(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    # The child spawns a grandchild: stopping must take the whole group.
    code = ("import subprocess, sys, time;"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print('up', flush=True); time.sleep(60)")
    rec = reg.spawn("srv", [sys.executable, "-c", code], owner="test", log=tmp_path / "srv.log")
    deadline = time.monotonic() + 10
    while "up" not in (tmp_path / "srv.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rec.running and reg.get("srv").started == start_time(rec.pid)
    members = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == rec.pid]
    assert len(members) == 2
    assert reg.stop_all() == ["srv"]
    time.sleep(0.2)
    assert not any(is_running(pid) for pid in members)
    assert reg.all() == []


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    assert not is_running(os.getpid(), started=(start_time(os.getpid()) or 0) + 1)
    assert is_running(os.getpid(), started=start_time(os.getpid()))


def test_child_group_kills_children_even_when_they_ignore_sigterm(tmp_path: Path) -> None:
    code = "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    with ChildGroup() as group:
        proc = group.start([sys.executable, "-c", code])
        time.sleep(0.3)
        group.stop_all(grace=0.5)
    assert proc.returncode == -signal.SIGKILL


NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def _new_session_at(pid: int) -> subprocess.Popen[bytes]:
    """A real PID reuse: a sleeping session leader given the number `pid` (the kernel hands
    out ns_last_pid + 1 next; root only). Retried when another process takes it first."""
    for _ in range(100):
        try:
            NS_LAST_PID.write_text(str(pid - 1))
        except OSError as exc:
            pytest.skip(f"cannot choose the next PID here ({exc})")
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    pytest.skip(f"other processes took PID {pid} 100 times in a row")


def test_a_reaped_childs_number_taken_by_another_group_is_never_signalled() -> None:
    """The pipeline tasks that failed under a busy test run: a group stopped after its
    leader was reaped (ChildGroup's wait, a fork server's SIGCHLD handler) must not signal
    the new session that has taken the number. The reuse is real (ns_last_pid)."""
    group = ChildGroup()
    old = group.start(["sleep", "60"])
    old_started = group.started[old.pid]
    old.kill()
    old.wait()  # reaped and still listed, as stop_all's own wait leaves it
    time.sleep(0.1)  # start times tick in 10 ms steps: the new one must differ
    other = _new_session_at(old.pid)
    try:
        group.stop_all(grace=0.2)
        kill_group(other.pid, grace=0.2, started=old_started)
        assert not signal_group(other.pid, signal.SIGKILL, old_started)
        stop_all([ProcRecord("old", other.pid, old_started)])
        with pytest.raises(subprocess.TimeoutExpired):  # a signal lands asynchronously
            other.wait(timeout=0.5)
        assert signal_group(other.pid, signal.SIGKILL, start_time(other.pid))
        assert other.wait(timeout=5) == -signal.SIGKILL
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("broken", [
    {"pid": "PID", "started": "soon", "argv": 5, "log": 7, "owner": [], "id": 3},
    {"pid": True, "started": None},  # a PID that cannot be verified is never signalled
    {"pid": 1, "started": None, "id": "srv"},
])
def test_a_process_record_of_wrong_field_types_is_stopped_by_its_tag(
        tmp_path: Path, broken: dict) -> None:
    """Issue 23, point 8: valid JSON whose fields have the wrong types (or an unverifiable
    PID) made every `kflab down` fail and left the server up. Now the record's PID is not
    trusted, the process is found by its tag, and `down` goes on."""
    reg = Registry(tmp_path)
    rec = reg.spawn("srv", [sys.executable, "-c", "import time; time.sleep(60)"],
                    owner="test", log=tmp_path / "srv.log")
    path = tmp_path / "procs" / "srv.json"
    write_json(path, {**read_json(path), **broken})
    assert not reg.get("srv").running  # not trusted: pid 0 in the record
    assert reg.stop_all() == ["srv"]
    deadline = time.monotonic() + 30  # a busy machine is slow to reap
    while is_running(rec.pid, rec.started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_running(rec.pid, rec.started)
    assert reg.all() == []


def test_child_group_scans_for_tagged_strays_once_per_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan for tagged descendants reads every process on the machine: a supervisor
    stops its group when the job ends and again on its way out, and only the first looks
    (issue 37: the TrainJob launch's fixed costs)."""
    from lab.backends.local import procs

    scans: list[str] = []
    real = procs.tagged
    monkeypatch.setattr(procs, "tagged", lambda token: scans.append(token) or real(token))
    with ChildGroup(tag="kflab-test-scan") as group:
        group.start([sys.executable, "-c", "pass"]).wait()
        group.stop_all()
        assert len(scans) >= 1
        seen = len(scans)
        group.stop_all()  # nothing started since: no second scan
        assert len(scans) == seen
        group.start([sys.executable, "-c", "pass"]).wait()
    assert len(scans) > seen  # the exit's stop_all scans again after a new start
