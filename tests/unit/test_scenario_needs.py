"""Steps with unmet `needs` (e.g. no GPU) are skipped with the reason, not failed; the
json-file, logs and gpus check types fail on missing state and pass on the real thing."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.errors import InputError
from lab.scenarios import checks, report
from lab.scenarios.context import Context
from lab.scenarios.loader import load_scenario
from lab.scenarios.model import Check
from lab.scenarios.runner import run_scenario
from tests.standins import nvml

SCENARIO = """
id: {sid}
title: t
level: beginner
duration: 1m
steps:
  - id: first
    title: first
    text: steps/a.md
    solve:
      - command: [python, -c, "open('a.json', 'w').write('{{\\"n\\": 3}}')"]
    checks:
      - type: json-file
        path: a.json
        query: n
        value: 3
        timeout: 1
        message: a.json must say n=3
  - id: second
    title: needs many GPUs
    text: steps/a.md
    needs:
      - type: gpus
        min: {gpus}
        message: needs {gpus} GPUs
    solve:
      - command: [python, -c, "open('b.txt', 'w').write('x')"]
    checks:
      - type: file-exists
        path: b.txt
        message: b.txt missing
"""


def make(tmp_path: Path, gpus: int, sid: str = "needs-demo") -> Path:
    root = tmp_path / sid
    (root / "steps").mkdir(parents=True)
    (root / "steps" / "a.md").write_text("do it\n")
    (root / "scenario.yaml").write_text(SCENARIO.format(sid=sid, gpus=gpus))
    return root


def test_unmet_need_skips_with_reason(tmp_path: Path, state: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # this backend offers no GPU
    result = run_scenario(load_scenario(make(tmp_path, 64)), state, mode="test")
    first, second = result.steps
    assert first.status == "passed" and first.before and not first.before[0].ok
    assert second.status == "skipped" and second.skip_reason.startswith("needs 64 GPUs (0 GPU")
    assert result.status == "skipped" and result.ok
    assert not (Path(result.workdir) / "b.txt").exists(), "a skipped step does not solve"
    junit = tmp_path / "r.xml"
    report.write_junit([result], junit)
    skipped = ET.parse(junit).getroot().find(".//testcase[@name='second']/skipped")
    assert skipped is not None and skipped.get("message", "").startswith("needs 64 GPUs")


def test_met_need_runs_the_step(tmp_path: Path, state: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.install(monkeypatch, nvml.gpus(2))  # a MOCK of NVML: two GPUs (none exists here)
    result = run_scenario(load_scenario(make(tmp_path, 2)), state, mode="test")
    assert result.status == "passed", [(s.id, s.status, s.error) for s in result.steps]


def test_a_failure_is_not_hidden_by_a_skip(tmp_path: Path, state: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    root = make(tmp_path, 64)
    text = (root / "scenario.yaml").read_text().replace("value: 3", "value: 4")
    (root / "scenario.yaml").write_text(text)
    result = run_scenario(load_scenario(root), state, mode="auto")
    assert result.status == "failed" and not result.ok


def test_needs_are_validated_like_checks(tmp_path: Path) -> None:
    root = make(tmp_path, 1)
    text = (root / "scenario.yaml").read_text().replace("min: 1", "min: many")
    (root / "scenario.yaml").write_text(text)
    where = r"scenario.yaml:\d+: field 'steps\[1\]\.needs\[0\]\.min'"
    with pytest.raises(InputError, match=where):
        load_scenario(root)


def chk(ctype: str, **params) -> Check:
    return Check(ctype, "msg", 0, params, "test:1")


def test_json_file_logs_and_gpus_checks(state: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    backend = LocalBackend(str(state))
    ctx = Context(backend, tmp_path)
    jf = chk("json-file", path="m.json", query="acc", op=">=", value=0.9)
    assert "does not exist" in checks.evaluate(jf, ctx).observed
    (tmp_path / "m.json").write_text("{not json")
    assert "not readable JSON" in checks.evaluate(jf, ctx).observed
    (tmp_path / "m.json").write_text(json.dumps({"acc": 0.8}))
    assert not checks.evaluate(jf, ctx).ok
    (tmp_path / "m.json").write_text(json.dumps({"acc": 0.95}))
    assert checks.evaluate(jf, ctx).ok

    logs = chk("logs", kind="pytorchjob", name="hi", replicas=["master-0", "worker-0"],
               contains=r"rank \d")
    assert "does not exist" in checks.evaluate(logs, ctx).observed or \
        "not found" in checks.evaluate(logs, ctx).observed
    code = "import os; print('rank', os.environ['RANK']) if os.environ['RANK'] == '0' else 0"
    spec = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "pytorch", "command": ["python", "-c", code]}]}}}
    backend.apply({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                   "metadata": {"name": "hi"},
                   "spec": {"pytorchReplicaSpecs": {"Master": spec, "Worker": spec}}},
                  base_dir=tmp_path)
    out = checks.evaluate(logs, ctx)
    assert not out.ok and "worker-0" in out.observed and "master-0" not in out.observed
    assert checks.evaluate(chk("logs", kind="pytorchjob", name="hi", replicas=["master-0"],
                               contains=r"rank 0"), ctx).ok

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not checks.evaluate(chk("gpus", min=1), ctx).ok
    nvml.install(monkeypatch, nvml.gpus(4))
    assert checks.evaluate(chk("gpus", min=1), ctx).ok
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert checks.evaluate(chk("gpus", min=1), ctx).ok
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4")  # names no GPU: the check says so
    out = checks.evaluate(chk("gpus", min=1), ctx)
    assert not out.ok and "'4' names no GPU" in out.observed
