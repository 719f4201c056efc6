"""Run the real ansible-playbook from the venv and read its PLAY RECAP."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"


def ansible_playbook() -> str:
    exe = Path(sys.executable).with_name("ansible-playbook")
    if exe.exists():
        return str(exe)
    found = shutil.which("ansible-playbook")
    if not found:
        pytest.skip("ansible-playbook not installed (pip install -e .[dev])")
    return found


@dataclass
class Result:
    rc: int
    output: str

    def recap(self, host: str) -> dict[str, int]:
        m = re.search(rf"^{re.escape(host)}\s*:\s*(.+)$", self.output, re.MULTILINE)
        assert m, f"no PLAY RECAP for {host}:\n{self.output[-3000:]}"
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}


def run_playbook(playbook: Path, inventory: str, extra: dict, tmp: Path, *args: str,
                 timeout: float = 600, prefix: tuple[str, ...] = ()) -> Result:
    """ansible-playbook with the repository's roles; `prefix` runs it under another command
    (e.g. `unshare -n`: no network)."""
    vars_file = tmp / "vars.json"
    vars_file.write_text(json.dumps(extra))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(PLAYBOOKS / "roles"),
           "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"), "ANSIBLE_FORCE_COLOR": "0",
           "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}
    proc = subprocess.run([*prefix, ansible_playbook(), "-i", inventory, str(playbook), "-e",
                           f"@{vars_file}", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return Result(proc.returncode, proc.stdout + proc.stderr)
