"""`kflab class delete` without --yes and without a terminal (a script, CI, a pipe) says
it would ask and names --yes, exit 2, before it reaches for a cluster: click's confirm
would read end-of-file and print only "aborted" (exit 130)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_class_delete_without_a_terminal_names_yes(state: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "lab.cli", "class", "delete", "--class",
                           "spring"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)})
    text = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no terminal to answer" in text, text
    assert "kflab class delete --class spring --yes" in text, text
    assert "aborted" not in text and not done.stdout.strip()
