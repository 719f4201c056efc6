"""The http-predict check and predict action are validated when a scenario loads (the
kserve-serving scenario itself runs end to end in tests/scenarios/test_scenarios.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import InputError
from lab.scenarios.loader import load_scenario


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
