"""playbooks/ is ansible-lint clean (offline: no Galaxy, no GitHub) at the production profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def test_ansible_lint_offline_clean():
    lint = Path(sys.executable).with_name("ansible-lint")
    if not lint.exists():
        pytest.skip("ansible-lint not installed (pip install -e .[dev])")
    env = {**os.environ, "ANSIBLE_LINT_NODEPS": "1", "NO_COLOR": "1"}
    proc = subprocess.run([str(lint), "--offline", "--nocolor", "--profile", "production"],
                          cwd=PLAYBOOKS, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
