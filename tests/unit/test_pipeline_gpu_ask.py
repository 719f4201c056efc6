"""A pipeline task asking for more GPUs than the machine has does not start: on a cluster its
pod waits Pending for a node with them (the driver sets the accelerator limit, from a task's
output too: backend/src/v2/driver/driver.go initPodSpecPatch); locally none will appear, so
the task fails before it runs, saying why, instead of running on the CPU and failing in the
user's code (found by the fidelity sweep: KFP 2.16.0 samples/core/resource_spec/
runtime_resource_request_gpu.py)."""

from __future__ import annotations

from pathlib import Path

from lab.backends import shapes
from lab.backends.local import LocalBackend, gpus
from lab.backends.shapes import pipeline_run_manifest

PIPELINE = '''
from typing import NamedTuple
from kfp import dsl

@dsl.component(install_kfp_package=False)
def ask() -> NamedTuple("out", n=str):
    return NamedTuple("out", n=str)("{n}")

@dsl.component(install_kfp_package=False)
def train(marker: str):
    open(marker, "w").write("ran")

@dsl.pipeline
def gpu_ask(marker: str):
    n = ask()
    train(marker=marker).set_accelerator_limit(n.outputs["n"])
'''


def _run(tmp_path: Path, n: int) -> tuple[dict, Path]:
    (tmp_path / "p.py").write_text(PIPELINE.replace("{n}", str(n)))
    marker = tmp_path / "ran"
    obj = LocalBackend(str(tmp_path / "state")).apply(
        pipeline_run_manifest("p.py", "gpu-ask", {"marker": str(marker)}),
        base_dir=tmp_path)
    return obj, marker


def test_a_task_asking_for_more_gpus_than_here_fails_before_it_starts(tmp_path: Path) -> None:
    n = len(gpus.inventory()) + 1
    obj, marker = _run(tmp_path, n)
    assert shapes.state(obj) == "FAILED"
    assert not marker.exists()  # the component never ran
    log = (tmp_path / "state").rglob("train.log")
    text = "".join(p.read_text() for p in log)
    assert f"asks for {n} GPU(s)" in text and "Pending" in text


def test_a_task_asking_for_none_runs(tmp_path: Path) -> None:
    obj, marker = _run(tmp_path, 0)
    assert shapes.state(obj) == "SUCCEEDED", shapes.error_message(obj)
    assert marker.read_text() == "ran"
