"""Every bundled scenario, end to end on the local backend, with the invariant:
each step's checks FAIL before its solution and PASS after (`kflab scenario test`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.scenarios.loader import discover, load_scenario
from lab.scenarios.runner import run_scenario

SCENARIOS = {sid: load_scenario(path) for sid, path in discover().items()}


@pytest.mark.slow
@pytest.mark.parametrize("sid", sorted(s for s, sc in SCENARIOS.items() if "local" in sc.backends))
def test_scenario_invariant(sid: str, state: Path) -> None:
    result = run_scenario(SCENARIOS[sid], state, mode="test")
    lines = []
    for step in result.steps:
        lines.append(f"{step.id}: {step.status} {step.error or ''}")
        lines += [f"   {'ok' if c.ok else 'FAIL'} {c.label}: {c.observed}" for c in step.checks]
    assert result.ok, "\n".join(lines)
    ran = [step for step in result.steps if not step.skip_reason]
    assert all(step.before for step in ran), "every step was checked before solving"
    if result.status == "skipped":  # e.g. gpu-check without a GPU: skipped with its reason
        assert all(step.skip_reason for step in result.steps if step.status == "skipped")
        # CI installs every extra (scripts/test.sh): only hardware may be missing there
        reasons = " ".join(step.skip_reason or "" for step in result.steps)
        assert not (os.environ.get("CI") and "pip install" in reasons), reasons
