"""`kflab notebook compile`: tags into steps, errors naming the cell and the tag, hostile
notebooks refused or embedded inertly, nothing executed at compile or load time; and a real
run of a compiled notebook whose failing cell is named in the task's error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lab import limits
from lab.errors import InputError
from lab.nbcompile import compile_notebook

REPO = Path(__file__).resolve().parents[2]


def cell(src: str, *tags: str) -> nbformat.NotebookNode:
    c = new_code_cell(src)
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def write(tmp_path: Path, *cells: nbformat.NotebookNode, name: str = "nb.ipynb",
          **meta: object) -> Path:
    nb = new_notebook(cells=list(cells), metadata=dict(meta))
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def good(tmp_path: Path, **meta: object) -> Path:
    return write(tmp_path,
                 new_markdown_cell("# title"),
                 cell("import math", "imports"),
                 cell("def double(v):\n    return 2 * v", "functions"),
                 cell("n = 3\nlabel = 'x'\nflag = True", "pipeline-parameters"),
                 cell("values = list(range(n))", "step:make"),
                 cell("total = sum(double(v) for v in values)", "step:add", "prev:make"),
                 cell("root = math.sqrt(total)"),  # untagged: continues step add
                 cell("print(values)  # only in the notebook", "skip"),
                 cell("total\nroot", "pipeline-metrics"), **meta)


def test_a_tagged_notebook_compiles_to_steps_in_dependency_order(tmp_path: Path) -> None:
    done = compile_notebook(good(tmp_path))
    assert done.steps == ["make", "add", "pipeline-metrics"]
    assert done.parameters == {"n": 3, "label": "x", "flag": True}
    assert done.path == tmp_path / "nb_pipeline.py" and done.name == "nb"
    text = done.path.read_text()
    assert "def add(n: int, label: str, flag: bool, after_make: Input[Artifact]" in text
    assert "'root = math.sqrt(total)'" in text  # the untagged cell joined step add
    assert "print(values)" not in text  # skip
    assert "def notebook_pipeline(n: int = 3, label: str = 'x', flag: bool = True)" in text


def test_compile_never_runs_the_notebook_nor_does_loading_the_pipeline(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = write(tmp_path, cell(f"open({str(marker)!r}, 'w').write('x')", "imports"),
                 cell(f"open({str(marker)!r}, 'w').write('y')", "step:only"))
    done = compile_notebook(path)
    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('p', "
            f"{str(done.path)!r}); m = importlib.util.module_from_spec(s); "
            "s.loader.exec_module(m); print(m.notebook_pipeline.name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.strip() == "nb"  # the pipeline's name: the module loaded, nothing ran
    assert not marker.exists()


def test_hostile_cell_text_is_embedded_as_inert_literals(tmp_path: Path) -> None:
    """Quotes, backslashes and a fake end of the literal stay data: the pipeline file is
    valid Python holding the cell's exact text."""
    nasty = "s = '''\\\n\"\"\"\n')\nimport os; os.system('boom')  # \\x00 \u202e\n'''"
    path = write(tmp_path, cell(nasty, "step:only"))
    done = compile_notebook(path)
    text = done.path.read_text()
    start = text.index("    _KFLAB_CELLS = ") + len("    _KFLAB_CELLS = ")
    end = text.index("\n    import pickle", start)
    import ast

    cells = ast.literal_eval(text[start:end])  # literals only: it could not hold code
    assert cells[0][1] == nasty


@pytest.mark.parametrize(("cells", "match"), [
    ([cell("x = 1", "step:a", "prev:nope")],
     r"cell 1 \('x = 1'\), tag 'prev:nope': no step named 'nope'"),
    ([cell("x = 1", "step:a", "prev:b"), cell("y = 2", "step:b", "prev:a")],
     r"tag 'prev:a': the steps run in a circle: (a -> b -> a|b -> a -> b)"),
    ([cell("x = 1", "step:a", "imports")], r"tag 'imports': the cell already has tag 'step:a'"),
    ([cell("x = 1", "step:Load_Data")], r"tag 'step:Load_Data': 'Load_Data' is not a valid"),
    ([cell("x = 1", "step:import")], r"'import' is reserved"),
    ([cell("%matplotlib inline\nx = 1", "step:a")],
     r"cell 1 \('%matplotlib inline'\), tag 'step:a': line 1 .* IPython magic"),
    ([cell("x = = 1", "step:a")], r"cell 1 \('x = = 1'\), tag 'step:a': line 1: invalid syntax"),
    ([cell("n = len('abc')", "pipeline-parameters")], r"only `NAME = literal`"),
    ([cell("x = 1")], r"cell 1 \('x = 1'\): an untagged code cell before any step"),
    ([cell("x = 1", "prev:a")], r"tag 'prev:a': prev: needs a step: tag"),
    ([cell("x = 1", "steps:a")], r"tag 'steps:a': not a kflab tag"),
    ([cell("x = 1", "imports")], r"no cell is tagged step:NAME"),
    ([cell("x = 1", "step:a"), cell("accuracy + 1", "pipeline-metrics")],
     r"cell 2 .*tag 'pipeline-metrics': line 1: write one variable name per line"),
])
def test_errors_name_the_cell_and_the_tag(tmp_path: Path, cells: list, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        compile_notebook(write(tmp_path, *cells))
    assert str(err.value).startswith("nb.ipynb: ")
    assert err.value.hint


def test_bad_files_and_settings_are_refused(tmp_path: Path) -> None:
    text = tmp_path / "x.ipynb"
    text.write_text("{not json")
    with pytest.raises(InputError, match="not a valid Jupyter notebook"):
        compile_notebook(text)
    (tmp_path / "x.py").write_text("")
    with pytest.raises(InputError, match=r"not a notebook \(.ipynb\)"):
        compile_notebook(tmp_path / "x.py")
    with pytest.raises(InputError, match="not a package requirement"):
        compile_notebook(good(tmp_path, kflab={"packages": ["ok", "bad; rm -rf /"]}))
    with pytest.raises(InputError, match="not an image reference"):
        compile_notebook(good(tmp_path), image="python:3.11 --privileged")
    with pytest.raises(InputError, match="not a valid pipeline name"):
        compile_notebook(good(tmp_path), name="Bad_Name")
    with pytest.raises(InputError, match=r"must end in \.py"):
        compile_notebook(good(tmp_path), tmp_path / "nb.ipynb")


def test_size_limits_are_checked_before_parsing(tmp_path: Path, monkeypatch) -> None:
    path = good(tmp_path)
    monkeypatch.setattr(limits, "MAX_NOTEBOOK_BYTES", 100)
    with pytest.raises(InputError, match="MAX_NOTEBOOK_BYTES"):
        compile_notebook(path)
    monkeypatch.setattr(limits, "MAX_NOTEBOOK_BYTES", 10**8)
    monkeypatch.setattr(limits, "MAX_PIPELINE_STEPS", 2)
    cells = [cell(f"x{i} = {i}", f"step:s{i}") for i in range(3)]
    with pytest.raises(InputError, match=r"cell 3 .*MAX_PIPELINE_STEPS"):
        compile_notebook(write(tmp_path, *cells, name="many.ipynb"))


def test_cli_compiles_and_reports_errors_without_a_traceback(tmp_path: Path) -> None:
    from tests.conftest import run_kflab

    good(tmp_path)
    ok = run_kflab("notebook", "compile", "nb.ipynb", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "steps make, add, pipeline-metrics;" in ok.stdout
    write(tmp_path, cell("x = 1", "step:a", "prev:zz"), name="bad.ipynb")
    bad = run_kflab("notebook", "compile", "bad.ipynb", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "cell 1 ('x = 1'), tag 'prev:zz'" in bad.stderr


@pytest.mark.slow
def test_a_compiled_notebook_runs_and_a_failing_cell_is_named(state: Path,
                                                              tmp_path: Path) -> None:
    """Real runs on the local backend (kfp.local): variables flow from step to step, the
    metrics are logged; a cell that raises fails its task with the cell in the traceback."""
    from lab.backends.local import LocalBackend
    from lab.scenarios.actions import pipeline_run_manifest

    backend = LocalBackend(str(state))
    done = compile_notebook(good(tmp_path))
    run = backend.apply(pipeline_run_manifest(done.path.name, "nb", {"n": 5}),
                        base_dir=tmp_path)
    assert run["status"]["state"] == "SUCCEEDED", json.dumps(run["status"])[:2000]
    metrics = next(t for t in run["status"]["run_details"]["task_details"]
                   if t["display_name"] == "pipeline-metrics")["outputs"]["metrics"]
    assert metrics == {"total": 20.0, "root": pytest.approx(20 ** 0.5)}  # n=5: 2*(0+..+4)
    broken = write(tmp_path, cell("x = 1", "step:first"),
                   cell("y = x / 0", "step:second", "prev:first"), name="broken.ipynb")
    failed = backend.apply(pipeline_run_manifest(compile_notebook(broken).path.name, "broken"),
                           base_dir=tmp_path)
    assert failed["status"]["state"] == "FAILED"
    log = "\n".join(backend.logs("PipelineRun", "broken", replica="second"))
    assert "broken.ipynb cell 2 (step second)" in log and "ZeroDivisionError" in log
