"""Real git repositories in a temporary folder: the reference the tree-hash code is held to,
and the way tests make archives in the exact format GitHub serves (GitHub runs git archive)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

GIT_ENV = {"GIT_AUTHOR_NAME": "kflab test", "GIT_AUTHOR_EMAIL": "test@kflab.invalid",
           "GIT_COMMITTER_NAME": "kflab test", "GIT_COMMITTER_EMAIL": "test@kflab.invalid",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    proc = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True,
                          env={**os.environ, **GIT_ENV}, check=True, timeout=120)
    return proc.stdout.decode().strip()


def commit_all(repo: Path) -> tuple[str, str]:
    """`git init` (once), add everything with no line-ending conversion, commit: (commit,
    tree) as git itself reports them."""
    if not (repo / ".git").exists():
        git(repo, "init", "-q")
        git(repo, "config", "core.autocrlf", "false")
        git(repo, "config", "core.fileMode", "true")
        git(repo, "config", "core.symlinks", "true")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "stand-in")
    return git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD^{tree}")


def archive(repo: Path, prefix: str, out: Path) -> Path:
    """`git archive --prefix=PREFIX/ HEAD` (tar or tar.gz by OUT's name): a pax header with
    the commit id, as GitHub serves them."""
    fmt = "tar" if out.name.endswith(".tar") else "tar.gz"
    git(repo, "archive", f"--format={fmt}", f"--prefix={prefix}/", "-o", str(out), "HEAD")
    return out
