"""An unchanged, all-cached pipeline run is answered from its memo (replay.py) without
compiling, and reports exactly what the engine reports for the same all-cached run.

Real runs of a small pipeline written here (a sibling module, an environment variable read
at compile time); `load_spec` is replaced by a function that fails in the runs that must not
compile, which is how a test sees that no compile happened."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.backends import shapes
from lab.backends.local import LocalBackend
from lab.backends.local.pipelines import runner
from lab.scenarios.actions import pipeline_run_manifest

PIPELINE = '''
import os
from kfp import dsl
from kfp.dsl import Dataset, Input, Output
from HELPERS import SCALE

@dsl.component(install_kfp_package=False)
def make(n: int, scale: int, data: Output[Dataset]) -> int:
    with open(data.path, "w") as fh:
        fh.write("x" * n)
    return n * scale

@dsl.component(install_kfp_package=False)
def size(data: Input[Dataset]) -> int:
    return len(open(data.path).read())

@dsl.pipeline(name="memo")
def memo(n: int = int(os.environ.get("KFLAB_TEST_N", "3"))):
    made = make(n=n, scale=SCALE)
    with dsl.If(made.outputs["Output"] > 100):
        size(data=made.outputs["data"])
    size(data=made.outputs["data"])
'''


def _comparable(obj: dict) -> list[tuple]:
    return sorted((t["display_name"], t["state"], bool(t.get("cached")), repr(t["outputs"]))
                  for t in shapes.tasks(obj))


def _no_compile(*_a: object, **_k: object) -> None:
    raise AssertionError("the pipeline was compiled")


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("KFLAB_TEST_N", raising=False)
    # a module name of its own: an earlier test's `helpers` stays imported in this process
    (tmp_path / "memo.py").write_text(PIPELINE.replace("HELPERS", f"helpers_{tmp_path.name}"))
    (tmp_path / f"helpers_{tmp_path.name}.py").write_text("SCALE = 2\n")
    return tmp_path


def test_replay_reports_what_the_engine_reports(project: Path, state: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    backend = LocalBackend(str(state))

    def apply() -> dict:
        return backend.apply(pipeline_run_manifest("memo.py", "m"), base_dir=project)

    first = apply()
    assert shapes.state(first) == "SUCCEEDED", shapes.error_message(first)
    with monkeypatch.context() as m:
        m.setattr(runner, "load_spec", _no_compile)
        replayed = apply()
    shutil.rmtree(state / "pipeline-replay")  # the same all-cached run, through the engine
    engine = apply()
    assert shapes.state(replayed) == shapes.state(engine) == "SUCCEEDED"
    assert _comparable(replayed) == _comparable(engine)
    assert {t["display_name"] for t in shapes.tasks(engine) if t.get("cached")} == \
        {"make", "size-2"}
    assert replayed["status"]["run_id"] != engine["status"]["run_id"]
    assert replayed["status"]["dag"] == engine["status"]["dag"]


def test_an_edit_or_a_changed_input_compiles_again(project: Path, state: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    backend = LocalBackend(str(state))

    def outputs() -> dict:
        obj = backend.apply(pipeline_run_manifest("memo.py", "m"), base_dir=project)
        assert shapes.state(obj) == "SUCCEEDED", shapes.error_message(obj)
        return {t["display_name"]: t for t in shapes.tasks(obj)}

    assert outputs()["make"]["outputs"]["parameters"]["Output"] == 6
    # a sibling module the file imports
    (project / f"helpers_{project.name}.py").write_text("SCALE = 5\n")
    assert outputs()["make"]["outputs"]["parameters"]["Output"] == 15
    monkeypatch.setenv("KFLAB_TEST_N", "30")  # an environment variable read at compile time
    tasks = outputs()
    assert tasks["make"]["outputs"]["parameters"]["Output"] == 150
    assert tasks["condition-1"]["state"] == "SUCCEEDED"
    # the cache entries it names are gone: the tasks run again, nothing is half-replayed
    shutil.rmtree(state / "pipeline-cache")
    tasks = outputs()
    assert tasks["make"]["state"] == "SUCCEEDED" and not tasks["make"].get("cached")
    # `size` and `size-2` have one cache key and ran side by side: the entry names one of
    # them, so no memo yet; the next run hits that entry for both and leaves one
    assert not list((state / "pipeline-replay").glob("*/*.json"))
    tasks = outputs()
    assert tasks["size"]["outputs"] == tasks["size-2"]["outputs"] and tasks["size"]["cached"]
    with monkeypatch.context() as m:
        m.setattr(runner, "load_spec", _no_compile)
        assert outputs()["make"].get("cached")


def test_no_memo_when_a_task_is_not_cacheable(state: Path, tmp_path: Path) -> None:
    (tmp_path / "nc.py").write_text('''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def one() -> int:
    return 1

@dsl.pipeline
def nc():
    one()
    one().set_caching_options(False)
''')
    backend = LocalBackend(str(state))
    for _ in range(2):
        obj = backend.apply(pipeline_run_manifest("nc.py", "nc"), base_dir=tmp_path)
        assert shapes.state(obj) == "SUCCEEDED"
    assert not list((state / "pipeline-replay").glob("*/*.json"))
    assert {t["display_name"]: bool(t.get("cached")) for t in shapes.tasks(obj)} == \
        {"one": True, "one-2": False}
