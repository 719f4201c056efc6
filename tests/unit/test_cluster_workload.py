"""How the cluster backend ships a work folder to pods and brings outputs back: the ConfigMap
(1 MiB limit, text vs binary, keys), the pod-template injection, and kflab's pod runner run
for real as a subprocess (copy-in, the command, outputs as log markers, written back safely)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from lab.backends.cluster import outputs, workload
from lab.errors import InputError, LabError

RUNNER = Path(workload.__file__).with_name("podrun.py")


def test_snapshot_skips_hidden_and_caches_and_carries_the_runner(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.bin").write_bytes(b"\x00\xff\x10")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.pyc").write_bytes(b"x")
    (tmp_path / ".secret").write_text("no")
    (tmp_path / "link.py").symlink_to(tmp_path / "train.py")
    files = workload.snapshot(tmp_path)
    paths = sorted(rel for rel, _ in files.entries.values())
    assert paths == [workload.RUNNER_PATH, "data/x.bin", "train.py"]
    cm = workload.configmap("kflab-files-x", "kflab-lab", files)
    assert cm["data"][next(k for k, (r, _) in files.entries.items() if r == "train.py")] \
        == "print('hi')\n"
    (key,) = cm["binaryData"]
    assert base64.b64decode(cm["binaryData"][key]) == b"\x00\xff\x10"
    assert all(set(k) <= set("-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
               for k in cm["data"])


def test_a_folder_over_the_configmap_limit_is_refused_naming_the_largest_file(
        tmp_path: Path) -> None:
    (tmp_path / "small.py").write_text("x = 1\n")
    (tmp_path / "big.csv").write_bytes(b"a" * (workload.CONFIGMAP_LIMIT + 1))
    with pytest.raises(LabError, match=r"1 MiB.*big\.csv"):
        workload.snapshot(tmp_path)


def test_inject_wraps_the_command_mounts_files_and_work_and_keeps_user_args(
        tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    files = workload.snapshot(tmp_path)
    pod = {"containers": [{"name": "main", "image": "python:3.11-slim",
                           "command": ["python3", "t.py", "--C=${trialParameters.C}"]},
                          {"name": "sidecar", "image": "busybox", "command": ["sleep", "1"]}]}
    workload.inject(pod, "kflab-files-e", files, where="spec", containers=["main"],
                    outputs=True)
    main, side = pod["containers"]
    assert main["command"][-4:] == ["--", "python3", "t.py", "--C=${trialParameters.C}"]
    assert main["workingDir"] == workload.WORK_DIR
    assert {m["mountPath"] for m in main["volumeMounts"]} == {workload.FILES_DIR,
                                                             workload.WORK_DIR}
    assert {"name": "KFLAB_OUTPUTS", "value": "1"} in main["env"]
    assert "volumeMounts" not in side and side["command"] == ["sleep", "1"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols[workload.FILES_VOLUME]["configMap"]["name"] == "kflab-files-e"
    assert "emptyDir" in vols[workload.WORK_VOLUME]


def test_inject_needs_a_command(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    pod = {"containers": [{"name": "main", "image": "x"}]}
    with pytest.raises(InputError, match=r"containers\[0\]\.command"):
        workload.inject(pod, "cm", workload.snapshot(tmp_path), where="spec.template.spec")


def _materialize(files: workload.Files, where: Path) -> None:
    """What the kubelet does with the ConfigMap volume: each key at its item path."""
    for _, (rel, data) in files.entries.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_bytes(data)


def test_pod_runner_runs_the_command_in_a_copy_and_sends_outputs_back(tmp_path: Path) -> None:
    src = tmp_path / "work-folder"
    src.mkdir()
    (src / "train.py").write_text(
        "import json, pathlib\n"
        "print('accuracy=0.97')\n"
        "pathlib.Path('out').mkdir(exist_ok=True)\n"
        "pathlib.Path('out/result.json').write_text(json.dumps({'ok': True}))\n"
        "pathlib.Path('big.bin').write_bytes(bytes(range(256)) * 600)\n")
    (src / "unchanged.txt").write_text("same\n")
    mounted, work = tmp_path / "cm", tmp_path / "emptydir"
    _materialize(workload.snapshot(src), mounted)
    proc = subprocess.run([sys.executable, str(mounted / workload.RUNNER_PATH), "--files",
                           str(mounted), "--work", str(work), "--", sys.executable, "train.py"],
                          capture_output=True, text=True, env={"KFLAB_OUTPUTS": "1",
                                                               "PATH": "/usr/bin:/bin"},
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "accuracy=0.97" in list(outputs.visible(lines))
    back = tmp_path / "learner"
    back.mkdir()
    written = outputs.collect(lines, back)
    assert written == ["big.bin", "out/result.json"]  # unchanged inputs are not sent back
    assert (back / "big.bin").read_bytes() == bytes(range(256)) * 600  # several chunks
    assert (back / "out" / "result.json").read_text() == '{"ok": true}'


def test_pod_runner_passes_the_exit_code_through(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    mounted = tmp_path / "cm"
    _materialize(workload.snapshot(tmp_path / "src"), mounted)
    proc = subprocess.run([sys.executable, str(mounted / workload.RUNNER_PATH), "--files",
                           str(mounted), "--work", str(tmp_path / "w"), "--", sys.executable,
                           "-c", "import sys; sys.exit(3)"], capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 3


@pytest.mark.parametrize("rel", ["../escape.txt", "/etc/passwd", "a/../../b", "./x"])
def test_outputs_refuse_paths_that_leave_the_work_folder(tmp_path: Path, rel: str) -> None:
    import hashlib
    import json

    data = b"x"
    line = outputs.MARKER + json.dumps({"path": rel, "part": 0, "parts": 1,
                                        "sha256": hashlib.sha256(data).hexdigest(),
                                        "data": base64.b64encode(data).decode()})
    with pytest.raises(LabError, match="refusing output path"):
        outputs.collect([line], tmp_path)


def test_outputs_skip_a_file_whose_chunks_are_missing_or_corrupt(tmp_path: Path) -> None:
    import json

    good = outputs.MARKER + json.dumps({"path": "a.txt", "part": 0, "parts": 2,
                                        "sha256": "0" * 64, "data": "eA=="})
    assert outputs.parse([good]) == {}
    assert outputs.parse([outputs.MARKER + "{not json"]) == {}
