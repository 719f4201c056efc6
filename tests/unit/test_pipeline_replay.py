"""An unchanged, all-cached pipeline run is answered from its memo (replay.py) without
compiling, and reports exactly what the engine reports for the same all-cached run; any
change to what the pipeline imports -- however it was loaded -- compiles it again.

Real runs of a small pipeline written here (a sibling module, an environment variable read
at compile time); `load_spec` is replaced by a function that fails in the runs that must not
compile, which is how a test sees that no compile happened. A learner's Python writes
bytecode (this machine sets PYTHONDONTWRITEBYTECODE=1): the `bytecode` fixture turns it on
for the test's process, and edits keep the file's old mtime and size (as an edit in the
same second, `cp -p` or `git checkout` leave them), the case a .pyc is trusted for."""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import sys
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


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytecode written, as on a learner's machine."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


def _edit(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` (same length), keeping the file's mtime: what Python's .pyc
    check sees after an edit in the same second as the last compile."""
    assert len(old) == len(new)
    st = path.stat()
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


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


def test_an_edit_or_a_changed_input_compiles_again(project: Path, state: Path, bytecode: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    backend = LocalBackend(str(state))

    def outputs() -> dict:
        obj = backend.apply(pipeline_run_manifest("memo.py", "m"), base_dir=project)
        assert shapes.state(obj) == "SUCCEEDED", shapes.error_message(obj)
        return {t["display_name"]: t for t in shapes.tasks(obj)}

    assert outputs()["make"]["outputs"]["parameters"]["Output"] == 6
    # a sibling module the file imports, its .pyc written by the first compile
    _edit(project / f"helpers_{project.name}.py", "SCALE = 2", "SCALE = 5")
    assert outputs()["make"]["outputs"]["parameters"]["Output"] == 15
    # the pipeline file itself, after a compile that found its .pyc (the issue's sequence)
    _edit(project / "memo.py", "scale=SCALE)", "scale=7)    ")
    assert outputs()["make"]["outputs"]["parameters"]["Output"] == 21
    _edit(project / "memo.py", "scale=7)    ", "scale=SCALE)")
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


def _run(backend: LocalBackend, folder: Path, file: str = "p.py") -> int:
    obj = backend.apply(pipeline_run_manifest(file, "p"), base_dir=folder)
    assert shapes.state(obj) == "SUCCEEDED", shapes.error_message(obj)
    return {t["display_name"]: t for t in shapes.tasks(obj)}["add"]["outputs"][
        "parameters"]["Output"]


ADD = '''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def add(a: int, b: int) -> int:
    return a + b
'''


def _pipeline(folder: Path, module: str) -> None:
    """p.py: `add` from this file (kfp needs a component's source), B from `module`."""
    (folder / "p.py").write_text(
        f"{ADD}\nfrom {module} import B\n\n"
        f"@dsl.pipeline(name='p-{folder.name}')\ndef p():\n    add(a=1, b=B)\n")


@pytest.mark.parametrize("how", ["source", "bytecode", "sourceless", "namespace"])
def test_every_way_a_module_is_loaded_is_keyed(how: str, tmp_path: Path, state: Path,
                                               bytecode: None) -> None:
    """The module the pipeline imports from the work folder, loaded from its source, from
    __pycache__, as a sourceless .pyc, or from a namespace package: an edit that keeps the
    file's size and mtime runs the new code."""
    name = f"m_{how}_{tmp_path.name}"
    folder = tmp_path / "work"
    folder.mkdir()
    if how == "namespace":
        (folder / "ns").mkdir()  # no __init__.py
        module, source = f"ns.{name}", folder / "ns" / f"{name}.py"
    else:
        module, source = name, folder / f"{name}.py"
    source.write_text("B = 2\n")
    _pipeline(folder, module)
    if how == "bytecode":  # a .pyc in __pycache__ before kflab ever compiles it
        py_compile.compile(str(source), doraise=True)
    target = source
    if how == "sourceless":  # only the .pyc beside where the source was
        target = source.with_suffix(".pyc")
        py_compile.compile(str(source), cfile=str(target), doraise=True)
        source.unlink()
    backend = LocalBackend(str(state))
    assert _run(backend, folder) == 3
    assert _run(backend, folder) == 3  # replayed
    if how == "sourceless":
        source.write_text("B = 7\n")
        py_compile.compile(str(source), cfile=str(target), doraise=True)
        source.unlink()
    else:
        _edit(source, "B = 2", "B = 7")
    assert _run(backend, folder) == 8


def test_a_module_added_beside_the_pipeline_compiles_again(tmp_path: Path, state: Path,
                                                           bytecode: None) -> None:
    """A new module (or package) in the work folder can shadow another or satisfy an import
    that failed at the last compile."""
    (tmp_path / f"base_{tmp_path.name}.py").write_text(ADD + "B = 2\n")
    (tmp_path / "p.py").write_text(f'''
from kfp import dsl
try:
    from extra_{tmp_path.name} import B
except ImportError:
    from base_{tmp_path.name} import B
from base_{tmp_path.name} import add

@dsl.pipeline(name="p-added")
def p():
    add(a=1, b=B)
''')
    backend = LocalBackend(str(state))
    assert _run(backend, tmp_path) == 3
    assert _run(backend, tmp_path) == 3
    (tmp_path / f"extra_{tmp_path.name}").mkdir()
    (tmp_path / f"extra_{tmp_path.name}" / "__init__.py").write_text("B = 40\n")
    assert _run(backend, tmp_path) == 41


def test_a_file_read_while_compiling_is_keyed_even_when_absent(tmp_path: Path, state: Path,
                                                               bytecode: None) -> None:
    (tmp_path / "p.py").write_text(ADD + '''
import json
try:
    B = json.load(open("settings.json"))["b"]
except FileNotFoundError:
    B = 2

@dsl.pipeline(name="p-read")
def p():
    add(a=1, b=B)
''')
    backend = LocalBackend(str(state))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert _run(backend, tmp_path) == 3
        assert _run(backend, tmp_path) == 3
        (tmp_path / "settings.json").write_text('{"b": 10}')
        assert _run(backend, tmp_path) == 11
    finally:
        os.chdir(cwd)


def test_a_compile_that_starts_a_process_leaves_no_memo(tmp_path: Path, state: Path) -> None:
    """When in doubt it runs: what a subprocess printed is not a file kflab can key on."""
    (tmp_path / "p.py").write_text(ADD + '''
import subprocess, sys
B = int(subprocess.run([sys.executable, "-c", "print(2)"], capture_output=True,
                       text=True).stdout)

@dsl.pipeline(name="p-proc")
def p():
    add(a=1, b=B)
''')
    backend = LocalBackend(str(state))
    assert _run(backend, tmp_path) == 3
    assert not list((state / "pipeline-replay").glob("*/*.json"))


def test_the_memo_key_holds_the_interpreter_and_kflab(tmp_path: Path, state: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import lab
    from lab.backends import pipeline_memo

    def key() -> Path:
        return pipeline_memo.memo_file(state, "default", tmp_path / "p.py", None, {})

    first = key()
    assert key() == first
    with monkeypatch.context() as m:
        m.setattr(sys, "executable", "/usr/bin/python3")
        assert key() != first
    with monkeypatch.context() as m:
        m.setattr(sys, "version", "3.11.2 (main)")
        assert key() != first
    with monkeypatch.context() as m:
        m.setattr(lab, "__version__", "9.9.9")
        assert key() != first
    with monkeypatch.context() as m:
        m.setenv("PYTHONPATH", str(tmp_path))  # another folder importable
        assert key() != first


def _learner_env(state: Path) -> dict[str, str]:
    """A learner's shell: bytecode written, no PYTHONUNBUFFERED."""
    drop = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "KFLAB_BACKEND", "KFLAB_CONTEXT")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "KFLAB_STATE": str(state), "PYTHONPATH": str(REPO), "COLUMNS": "80"}


def _kflab(folder: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab.cli", "pipeline", "run", *args],
                          cwd=folder, env=_learner_env(state), capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_issue_sequence_as_a_learner_runs_it(tmp_path: Path, state: Path) -> None:
    """Issue 33 Why 1, through the real CLI with bytecode on: run, edit the component module,
    run, run (replayed), then edit only pipe.py -- a syntax error is a failed run naming the
    file and line, and a real edit runs the new pipeline."""
    (tmp_path / "comp.py").write_text(ADD + "B = 2\n")
    (tmp_path / "pipe.py").write_text(
        "from kfp import dsl\nfrom comp import add, B\n\n"
        "@dsl.pipeline(name='pipe')\ndef pipe():\n    add(a=1, b=B)\n")

    def output() -> int:
        done = _kflab(tmp_path, state, "pipe.py")
        assert done.returncode == 0 and "pipelinerun/pipe SUCCEEDED" in done.stdout, \
            done.stdout + done.stderr
        from lab.backends.local.store import Store

        obj = Store(state).get("PipelineRun", "pipe")
        return shapes.tasks(obj)[0]["outputs"]["parameters"]["Output"]

    for name in ("comp.py", "pipe.py"):  # as an earlier `import pipe` in Python leaves them
        py_compile.compile(str(tmp_path / name), doraise=True)
    assert output() == 3
    _edit(tmp_path / "comp.py", "B = 2", "B = 5")
    assert output() == 6
    assert output() == 6  # replayed
    text = (tmp_path / "pipe.py").read_text()
    (tmp_path / "pipe.py").write_text(text + "syntax error (\n")
    done = _kflab(tmp_path, state, "pipe.py")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "SUCCEEDED" not in done.stdout
    assert "pipe.py:7: SyntaxError: '(' was never closed" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "SyntaxError(" not in done.stderr
    (tmp_path / "pipe.py").write_text(text.replace("b=B", "b=B * 2"))
    assert output() == 11


def test_os_exit_at_import_is_a_failed_run(tmp_path: Path, state: Path) -> None:
    (tmp_path / "pipe.py").write_text("import os\nos._exit(0)\n")
    done = _kflab(tmp_path, state, "pipe.py")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pipe.py:2: importing the pipeline called os._exit(0)" in done.stderr, done.stderr
    assert not (state / "resources").exists() or not list((state / "resources").rglob("*.json"))
