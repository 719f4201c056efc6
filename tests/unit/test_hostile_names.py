"""The repros of issue 10, re-run through the real CLI: names, namespaces and run names
that are paths never reach the disk, and a symlink planted in the state folder is never
followed out of it. Every refusal is exit 2 with a message, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    folder = tmp_path / "victim"
    (folder / "data").mkdir(parents=True)
    (folder / "precious.txt").write_text("keep me")
    (folder / "data" / "precious.txt").write_text("keep me")  # what main deleted
    return folder


def intact(victim: Path) -> bool:
    return all((victim / p).read_text() == "keep me"
               for p in ("precious.txt", "data/precious.txt"))


def refused(res, *needles: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "Traceback" not in out
    for needle in needles:
        assert needle in out, out


def test_pytorchjob_in_a_path_namespace(kflab, state: Path, tmp_path: Path,
                                        victim: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "data", "namespace": str(victim)},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "pytorch/pytorch",
                            "command": ["true"]}]}}}}}}))
    refused(kflab("apply", "-f", str(manifest)), f"{manifest}:", "metadata.namespace",
            "invalid namespace")
    refused(kflab("delete", "pytorchjob", "data", "-n", str(victim)), "-n")
    for verb in ("get", "describe", "logs"):
        refused(kflab(verb, "pytorchjob", "data", "-n", "../../x"), "namespace")
    assert intact(victim)
    assert not (state / "resources").exists()


def test_pipeline_run_name_that_is_a_path(kflab, state: Path, tmp_path: Path,
                                          victim: Path) -> None:
    pipe = tmp_path / "pipe.py"
    shutil.copy(REPO / "tests" / "data" / "pipelines" / "tiny.py", pipe)
    rel = "../" * (len(state.parts) + 2) + str(victim).lstrip("/")
    for _ in range(2):
        refused(kflab("pipeline", "run", str(pipe), "--name", rel),
                "Invalid value for --name", "not a valid PipelineRun name")
    refused(kflab("pipeline", "run", str(pipe), "--name", "x" * 300), "300 characters")
    assert intact(victim)
    assert not (state / "runs").exists()


@pytest.mark.parametrize(("kind", "name"), [("experiment", "../exp"), ("isvc", "a/b"),
                                             ("run", ".."), ("trial", "x" * 300)])
def test_hostile_names_on_every_command(kflab, kind: str, name: str) -> None:
    for verb in ("get", "delete", "logs", "describe"):
        # TYPE NAME with a '/' in the name reads as a misplaced TYPE/NAME: refused as such
        refused(kflab(verb, kind, name), "TYPE/NAME" if "/" in name else "Invalid value")
        refused(kflab(verb, f"{kind}/{name}"), "Invalid value")
    refused(kflab("predict", name, "-f", __file__), "Invalid value")


def test_planted_symlink_is_not_followed_by_delete(kflab, state: Path, victim: Path) -> None:
    """Someone links the job's run folder to a folder outside: delete refuses, names the
    link, and the folder it points to is untouched."""
    resource = state / "resources" / "pytorchjobs" / "default" / "data.json"
    resource.parent.mkdir(parents=True)
    resource.write_text(json.dumps({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                    "metadata": {"name": "data", "namespace": "default"},
                                    "spec": {}, "status": {}}))
    link = state / "runs" / "pytorchjobs" / "default" / "data"
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)
    refused(kflab("delete", "pytorchjob", "data"), "outside the state folder", str(link))
    assert intact(victim)
