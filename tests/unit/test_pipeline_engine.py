"""The local pipeline engine: control flow, caching, concurrency, refusals, compiled YAML.

Real runs (task processes forked from kfp's executor, as `kflab pipeline run` runs them) of
small pipelines in tests/data/pipelines; the pure parts (CEL conditions, the cache
fingerprint, the command parser, the timeline) without processes."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from lab.backends import shapes
from lab.backends.local import LocalBackend
from lab.backends.local.pipelines import cel, taskproc
from lab.backends.local.pipelines.cache import fingerprint
from lab.errors import InputError, LabError
from lab.kube.timeline import render as timeline
from lab.scenarios.actions import pipeline_run_manifest

DATA = Path(__file__).resolve().parents[1] / "data" / "pipelines"


def _t(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _tasks(obj: dict) -> dict[str, dict]:
    return {t["display_name"]: t for t in shapes.tasks(obj)}


# --- pure parts ------------------------------------------------------------------------------

def test_cel_conditions_as_the_compiler_writes_them() -> None:
    v = {"pipelinechannel--flip-Output": "heads", "pipelinechannel--n": 3}
    assert cel.evaluate("inputs.parameter_values['pipelinechannel--flip-Output'] == 'heads'", v)
    assert not cel.evaluate(
        "!(inputs.parameter_values['pipelinechannel--flip-Output'] == 'heads') && "
        "inputs.parameter_values['pipelinechannel--flip-Output'] == 'tails'", v)
    assert cel.evaluate("int(inputs.parameter_values['pipelinechannel--n']) > 2 || false", v)
    assert cel.evaluate("double(inputs.parameter_values['pipelinechannel--n']) != 2.5", v)
    for bad in ("__import__('os')", "inputs.parameter_values['x'].upper()", "open('f')"):
        with pytest.raises(LabError):
            cel.evaluate(bad, {"x": "a"})


def test_fingerprint_follows_kfp_cache_key() -> None:
    """KFP 2.16 cacheutils.GenerateCacheKey: input values and artifact names, output specs
    without their URIs, image and command; environment variables are not part of it."""
    def ex(value: int, out_uri: str, in_uri: str = "/a/1") -> dict:
        return {"inputs": {"parameterValues": {"x": value},
                           "artifacts": {"d": {"artifacts": [{"uri": in_uri}]}}},
                "outputs": {"parameters": {"Output": {"outputFile": f"{out_uri}/Output"}},
                            "artifacts": {"m": {"artifacts": [
                                {"name": "m", "uri": out_uri, "type": {"schemaTitle": "s"},
                                 "metadata": {}}]}}}}

    key = fingerprint(ex(1, "/run1/t/m"), {"Output": "NUMBER_INTEGER"}, "python", ["c"])
    assert key == fingerprint(ex(1, "/run2/t/m"), {"Output": "NUMBER_INTEGER"}, "python", ["c"])
    assert key != fingerprint(ex(2, "/run1/t/m"), {"Output": "NUMBER_INTEGER"}, "python", ["c"])
    assert key != fingerprint(ex(1, "/r/t/m", "/a/2"), {"Output": "NUMBER_INTEGER"}, "python",
                              ["c"])
    assert key != fingerprint(ex(1, "/run1/t/m"), {"Output": "STRING"}, "python", ["c"])
    assert key != fingerprint(ex(1, "/run1/t/m"), {"Output": "NUMBER_INTEGER"}, "python",
                              ["c", "d"])


def test_lightweight_component_command_is_parsed(tmp_path: Path) -> None:
    from lab.backends.local.pipelines.runner import _load_module

    taskproc.import_kfp()  # as a run imports it: without kfp.client (seconds)
    (tmp_path / "comp.py").write_text(
        "from kfp import dsl\n"
        "@dsl.component(packages_to_install=['packaging>=20', 'no-such-package-kflab==1'])\n"
        "def comp(x: int) -> int:\n    return x\n")
    spec = _load_module(tmp_path / "comp.py").comp.pipeline_spec
    container = spec.deployment_spec["executors"]["exec-comp"]["container"]
    program = taskproc.parse(list(container["command"]))
    assert program is not None and "def comp(x: int)" in program.code
    assert "packaging>=20" in program.requirements
    assert taskproc.missing_packages(program.requirements) == ["no-such-package-kflab==1"]
    assert taskproc.parse(["sh", "-c", "echo hi"]) is None


def test_timeline_marks_overlaps_and_cache_hits() -> None:
    run = {"status": {"run_details": {"task_details": [
        {"display_name": "a", "state": "SUCCEEDED", "start_time": "2026-01-01T00:00:00.000Z",
         "end_time": "2026-01-01T00:00:02.000Z"},
        {"display_name": "b", "state": "SUCCEEDED", "start_time": "2026-01-01T00:00:00.500Z",
         "end_time": "2026-01-01T00:00:02.000Z"},
        {"display_name": "c", "state": "SKIPPED", "cached": True,
         "start_time": "2026-01-01T00:00:00.000Z", "end_time": "2026-01-01T00:00:00.000Z"}]}}}
    lines = timeline(run)
    assert lines[0].startswith("Timeline:")
    assert any(line.strip().startswith("c ") and "CACHED" in line for line in lines)
    assert "at most 2 task(s) at once; 1 from the cache" in lines[-1]


# --- real runs -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalBackend, dict, dict]:
    """One run of control_flow.py, then the same run again (cached)."""
    backend = LocalBackend(str(tmp_path_factory.mktemp("state")))
    first = backend.apply(pipeline_run_manifest("control_flow.py", "flow"), base_dir=DATA)
    first["logs"] = {"all": list(backend.logs("PipelineRun", "flow")),
                     "flip": list(backend.logs("PipelineRun", "flow", replica="flip"))}
    again = backend.apply(pipeline_run_manifest("control_flow.py", "flow"), base_dir=DATA)
    return backend, first, again


def test_control_flow_runs_as_on_a_cluster(flow: tuple[LocalBackend, dict, dict]) -> None:
    _, first, _ = flow
    assert shapes.state(first) == "SUCCEEDED", shapes.error_message(first)
    tasks = _tasks(first)
    states = {n: t["state"] for n, t in tasks.items()}
    # If/Elif/Else: n=3 -> heads; the other two branches are skipped
    assert states["condition-3"] == "SUCCEEDED"
    assert states["condition-4"] == states["condition-5"] == "SKIPPED"
    assert tasks["say"]["outputs"]["parameters"]["Output"] == "heads branch"
    # ParallelFor over a computed list, collected: 0 + 1 + 4
    assert tasks["total"]["outputs"]["parameters"]["Output"] == 5
    assert {f"square.{i}" for i in range(3)} <= set(tasks)
    # set_retry: the first attempt fails, the retry succeeds
    assert tasks["flaky"]["outputs"]["parameters"]["Output"] == "second attempt"
    # ExitHandler: the exit task ran last and saw the body's final state (its MLMD state, as
    # KFP 2.16's driver reports it)
    assert tasks["final"]["outputs"]["parameters"]["Output"] == "COMPLETE"
    assert _t(tasks["final"]["start_time"]) >= _t(tasks["exit-handler-1"]["end_time"]) - 0.01
    # set_env_variable reached the task; its log lines are prefixed in the run log with its
    # path (it runs in the exit handler's DAG)
    assert any(line.startswith("GREETING hello") for line in first["logs"]["flip"])
    assert any(line.startswith("[exit-handler-1/flip] GREETING hello")
               for line in first["logs"]["all"])
    assert tasks["flip"]["parent"] == "exit-handler-1" and "parent" not in tasks["final"]
    assert tasks["square.1"]["parent"] == "exit-handler-1/for-loop-6"


def test_cached_rerun_reuses_outputs(flow: tuple[LocalBackend, dict, dict]) -> None:
    _, first, again = flow
    assert shapes.state(again) == "SUCCEEDED", shapes.error_message(again)
    tasks, before = _tasks(again), _tasks(first)
    for name in ("make", "flip", "items", "total", "flaky", "square.0"):
        assert tasks[name]["state"] == "SKIPPED" and tasks[name].get("cached"), name
        assert tasks[name]["outputs"] == before[name]["outputs"], name
    # set_caching_options(False): these ran again
    assert not tasks["square-2.0"].get("cached") and tasks["square-2.0"]["state"] == "SUCCEEDED"


def test_no_cache_runs_everything_and_delete_keeps_cache_whole(
        flow: tuple[LocalBackend, dict, dict]) -> None:
    backend, first, _ = flow
    fresh = backend.apply(pipeline_run_manifest("control_flow.py", "fresh", cache=False),
                          base_dir=DATA)
    assert shapes.state(fresh) == "SUCCEEDED"
    assert not any(t.get("cached") for t in shapes.tasks(fresh))
    # the first run's artifacts are still named by cache entries: deleting a run keeps them
    backend.delete("PipelineRun", "flow")
    made = _tasks(first)["make"]["outputs"]["artifacts"]["data"]
    assert Path(made["path"]).exists()
    rerun = backend.apply(pipeline_run_manifest("control_flow.py", "flow"), base_dir=DATA)
    assert _tasks(rerun)["make"].get("cached")


def test_independent_tasks_overlap_within_parallelism(state: Path, tmp_path: Path) -> None:
    (tmp_path / "wide.py").write_text('''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def nap(i: int) -> int:
    import time
    time.sleep(1.0)
    return i

@dsl.pipeline
def wide():
    for i in range(3):
        nap(i=i)
''')
    backend = LocalBackend(str(state))

    def peak(parallelism: int) -> int:
        obj = backend.apply(pipeline_run_manifest("wide.py", f"wide-{parallelism}",
                                                  parallelism=parallelism, cache=False),
                            base_dir=tmp_path)
        spans = [(_t(t["start_time"]), _t(t["end_time"])) for t in shapes.tasks(obj)]
        return max(sum(1 for a, b in spans if a <= s < b) for s, _ in spans)

    assert peak(3) == 3
    assert peak(1) == 1


def test_refused_before_the_run(state: Path, tmp_path: Path) -> None:
    (tmp_path / "image.py").write_text('''
from kfp import dsl

@dsl.container_component
def echo():
    return dsl.ContainerSpec(image="alpine", command=["echo", "hi"])

@dsl.pipeline
def p():
    echo()
''')
    backend = LocalBackend(str(state))
    with pytest.raises(InputError, match="container component"):
        backend.apply(pipeline_run_manifest("image.py", "img"), base_dir=tmp_path)
    assert backend.get("PipelineRun", "img") is None  # nothing recorded, nothing ran
    with pytest.raises(InputError, match="unknown argument"):
        backend.apply(pipeline_run_manifest("control_flow.py", "x", {"nope": 1}),
                      base_dir=DATA)


def test_compiled_yaml_runs(state: Path, tmp_path: Path) -> None:
    from kfp import compiler

    from lab.backends.local.pipelines.runner import load_pipeline

    compiler.Compiler().compile(load_pipeline(DATA / "tiny.py"), str(tmp_path / "tiny.yaml"))
    backend = LocalBackend(str(state))
    obj = backend.apply(pipeline_run_manifest("tiny.yaml", "yaml", {"n": 4}), base_dir=tmp_path)
    assert shapes.state(obj) == "SUCCEEDED"
    assert _tasks(obj)["make"]["outputs"]["parameters"]["Output"] == 8
    # a task with a Metrics output (no file, only metadata) and a Model file is cached too
    again = backend.apply(pipeline_run_manifest("tiny.yaml", "yaml", {"n": 4}),
                          base_dir=tmp_path)
    train = _tasks(again)["train"]
    assert train.get("cached") and train["outputs"] == _tasks(obj)["train"]["outputs"]


def test_cluster_backend_takes_a_compiled_yaml_as_is(tmp_path: Path) -> None:
    """A compiled pipeline is uploaded as it is (no SDK environment, no recompiling); only
    the IR schema the server reads is checked."""
    taskproc.import_kfp()
    from kfp import compiler

    from lab.backends.cluster.pipelines.compile import compile_for_server
    from lab.backends.local.pipelines.runner import load_pipeline

    compiler.Compiler().compile(load_pipeline(DATA / "tiny.py"), str(tmp_path / "tiny.yaml"))
    ir = compile_for_server(tmp_path / "tiny.yaml", None, tmp_path / "out" / "ir.json")
    assert ir["pipelineInfo"]["name"] == "tiny" and ir["schemaVersion"] == "2.1.0"
    (tmp_path / "other.yaml").write_text("a: 1\n")
    with pytest.raises(InputError, match="not a compiled KFP pipeline"):
        compile_for_server(tmp_path / "other.yaml", None, tmp_path / "out" / "x.json")


def test_tasks_ending_side_by_side_keep_their_own_exit_codes(tmp_path: Path) -> None:
    """Real tasks started and awaited from 16 threads, as a wide ParallelFor runs them.
    multiprocessing polls every child on each start, and two threads polling one fork-server
    child used to turn its exit code into 255 (some 4% of tasks here): a task that had
    written its outputs then failed the run, now and then (CI's red run)."""
    import threading

    taskproc.import_kfp()
    program = taskproc.Program(
        code="import os\n\ndef f(code: int):\n    os._exit(code)\n", requirements=[])
    got: list[tuple[int, int | None]] = []

    def run(n: int) -> None:
        for i in range(25):
            want = (n + i) % 2 * 3
            executor_input = {"inputs": {"parameterValues": {"code": want}},
                              "outputs": {"outputFile": str(tmp_path / f"{n}-{i}.json")}}
            args = ["--executor_input", json.dumps(executor_input), "--function_to_execute", "f"]
            proc = taskproc.start(program, args, {"PATH": "/usr/bin:/bin"},
                                  str(tmp_path / f"{n}.log"), str(tmp_path))
            rc = None
            while rc is None:
                rc = taskproc.exit_code(proc, 0.01)
            got.append((want, rc))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wrong = [(want, rc) for want, rc in got if want != rc]
    assert len(got) == 400 and not wrong, (wrong[:5], (tmp_path / "0.log").read_text()[-2000:])
