"""The kserve-serving scenario end to end on the local backend, with the invariant: each
step's checks fail before its solution and pass after (real model servers, real requests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import InputError
from lab.scenarios.loader import find, load_scenario
from lab.scenarios.runner import run_scenario


def test_kserve_serving_invariant(tmp_path: Path) -> None:
    result = run_scenario(find("kserve-serving"), tmp_path, mode="test")
    failed = [(s.id, s.error, [c.observed for c in s.checks if not c.ok]) for s in result.steps
              if s.status != "passed"]
    assert result.ok, failed
    # the runner stopped every model server it started
    assert not list((tmp_path / "sandboxes" / "kserve-serving" / "state" / "procs").glob("*"))


@pytest.mark.parametrize(("check", "words"), [
    ("{type: http-predict, name: iris, message: m, expect: [1]}", "give exactly one of"),
    ("{type: http-predict, name: iris, message: m, instances: [[1]]}", "expect"),
    ("{type: http-predict, name: iris, message: m, request: {rows: [1]}, expect: [1]}",
     "not a V1"),
    ("{type: http-predict, name: iris, message: m, instances: [[1]], expect: [1], "
     "protocol: v3}", "not allowed"),
])
def test_http_predict_check_is_validated_at_load(tmp_path: Path, check: str,
                                                 words: str) -> None:
    folder = tmp_path / "demo"
    (folder / "steps").mkdir(parents=True)
    (folder / "steps" / "a.md").write_text("# a\n")
    (folder / "scenario.yaml").write_text(
        "id: demo\ntitle: t\nlevel: beginner\nduration: 1m\nsteps:\n"
        "  - id: a\n    title: a\n    text: steps/a.md\n"
        "    solve:\n      - predict: {name: iris, file: in.json}\n"
        f"    checks:\n      - {check}\n")
    with pytest.raises(InputError, match=words) as err:
        load_scenario(folder)
    assert "scenario.yaml:12: field 'steps[0].checks[0]" in str(err.value)
