"""`kflab class delete` without --yes, without a terminal and with nothing on its input (a
script, CI) says it would ask and names --yes, exit 2, before it reaches for a cluster:
click's confirm read end-of-file and printed only "aborted" (exit 130). An answer piped in
is still an answer (docs/teaching.md's session types y)."""

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
    assert "there is no answer on its input" in text, text
    assert "kflab class delete --class spring --yes" in text, text
    assert "aborted" not in text  # stdout holds the question it asked, nothing else
    assert done.stdout.strip() == "delete class 'spring' and everything its students made? [y/N]:"


def test_an_answer_piped_in_is_an_answer(state: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "lab.cli", "class", "delete", "--class",
                           "spring"], input="n\n", capture_output=True, text=True,
                          timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)})
    assert done.returncode == 130 and "aborted" in done.stderr, done.stdout + done.stderr
    assert "no answer on its input" not in done.stderr
