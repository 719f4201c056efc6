"""The CLI as a user runs it: help, version, doctor, resource commands and their errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

from lab import __version__

DATA = Path(__file__).resolve().parents[1] / "data"


def test_help_lists_commands_and_is_fast(kflab) -> None:
    t0 = time.monotonic()
    out = kflab("--help")
    assert out.returncode == 0
    for cmd in ("apply", "check", "demo", "doctor", "get", "hint", "scenario", "solve"):
        assert cmd in out.stdout
    assert time.monotonic() - t0 < 5  # generous here; bench/ measures the real figure


def test_help_does_not_import_heavy_libraries() -> None:
    import subprocess
    import sys

    # the whole command tree, as `kflab --help` loads it (lab.cli alone loads only the entry
    # point: tests/unit/test_fastpath.py checks what the fast path imports)
    code = ("import sys; from lab.cli import app; "
            "print(sorted(m for m in ('kfp','torch','optuna','kserve','sklearn','rich',"
            "'kubernetes','jmespath','yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_version(kflab) -> None:
    assert kflab("version").stdout.startswith(f"kflab {__version__}  (Python ")


def test_doctor_json(kflab) -> None:
    out = kflab("doctor", "--json")
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert {"cpus", "memory", "disk", "virtualization", "vagrant", "nvidia gpu",
            "local backend"} <= set(rows)
    assert rows["local backend"]["status"] == "pass"
    assert out.returncode == (1 if any(r["status"] == "fail" for r in rows.values()) else 0)


def test_scenario_list_and_show(kflab, state) -> None:
    listed = json.loads(kflab("scenario", "list", "--json", env={
        "CUDA_VISIBLE_DEVICES": ""}).stdout)  # no GPU, whatever this machine has
    assert "pipeline-classifiers" in [s["id"] for s in listed]
    here = {s["id"]: s["cannot_run_here"] for s in listed}
    assert here["gpu-check"].startswith(
        "needs an NVIDIA GPU with bf16 (compute capability 8.0 or newer: Ampere, Ada, "
        "Hopper...) (0 GPU(s) here: ")  # and why: no driver, or the variable hides them
    assert here["pipeline-classifiers"] is None
    assert "step 3" in (here["mixed-precision-and-profiling"] or "")
    table = kflab("scenario", "list", env={"CUDA_VISIBLE_DEVICES": ""}).stdout
    assert "* gpu-check cannot run on this machine: needs an NVIDIA GPU" in table
    assert "(not here*)" in next(x for x in table.splitlines() if x.startswith("gpu-check"))
    shown = kflab("scenario", "show", "pipeline-classifiers")
    assert "Train five classifiers" in shown.stdout
    missing = kflab("scenario", "show", "pipeline-clasifiers")
    assert missing.returncode == 2 and "did you mean 'pipeline-classifiers'" in missing.stderr


def test_pipeline_run_get_describe_logs_delete(kflab, state) -> None:
    out = kflab("pipeline", "run", str(DATA / "pipelines" / "tiny.py"), "--name", "t",
                "-p", "n=4")
    assert out.returncode == 0 and "pipelinerun/t SUCCEEDED" in out.stdout, out.stderr
    table = kflab("get", "runs").stdout
    assert "t " in table and "SUCCEEDED" in table
    assert json.loads(kflab("get", "run", "t", "-o", "json").stdout)["status"]["state"] == \
        "SUCCEEDED"
    described = kflab("describe", "run", "t").stdout  # kubectl's layout, not YAML
    assert "Run Details:" in described and "TaskSucceeded" in described
    assert "[make] " in kflab("logs", "run", "t").stdout  # each line prefixed by its task
    assert kflab("delete", "run", "t").returncode == 0
    gone = kflab("get", "run", "t")
    assert gone.returncode == 1 and "not found" in gone.stderr  # kubectl's NotFound exit


def test_pipeline_run_options_and_timeline(kflab, state) -> None:
    tiny = str(DATA / "pipelines" / "tiny.py")
    assert kflab("pipeline", "run", tiny, "--name", "c").returncode == 0
    again = kflab("pipeline", "run", tiny, "--name", "c", "--no-cache", "--parallelism", "1")
    assert again.returncode == 0, again.stderr
    run = json.loads(kflab("get", "run", "c", "-o", "json").stdout)
    assert run["spec"]["cache"] is False and run["spec"]["parallelism"] == 1
    assert not any(t.get("cached") for t in run["status"]["run_details"]["task_details"])
    assert kflab("pipeline", "run", tiny, "--name", "c").returncode == 0  # cached this time
    described = kflab("describe", "run", "c").stdout
    assert "Timeline:" in described and "CACHED" in described
    assert kflab("pipeline", "run", tiny, "--parallelism", "0").returncode == 2


def test_failed_pipeline_exits_non_zero_with_the_log(kflab, state) -> None:
    out = kflab("pipeline", "run", str(DATA / "pipelines" / "tiny.py"), "-p", "fail=true")
    assert out.returncode == 1 and "FAILED" in out.stdout and "log:" in out.stderr


def test_apply_errors_name_file_and_field(kflab, state, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubeflow.org/v1beta1\nkind: Experiment\nmetadata: {}\n")
    out = kflab("apply", "-f", str(bad))
    assert out.returncode == 2 and f"{bad}:3: field 'metadata.name': missing" in out.stderr
    bad.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    assert "a Kubernetes Deployment is cluster plumbing" in kflab("apply", "-f", str(bad)).stderr


def test_check_without_a_scenario(kflab, state) -> None:
    out = kflab("check")
    assert out.returncode == 2 and "kflab scenario start" in out.stderr
