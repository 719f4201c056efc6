"""The shell commands of the user docs, read as a reader reads them, and run as written.

Which docs: DOCS. Which blocks: fenced blocks tagged bash/sh/shell (every line is a command,
comments are the shell's), and console or untagged blocks whose lines start with `$ ` (those
lines are commands, the rest is their output). A block is exempt when the line directly above
its fence is `<!-- needs: WHAT THIS MACHINE LACKS -->` (docs/README convention); the reason is
printed in the test report.

A doc's commands run in one bash session, in document order (a `cd` or `source` carries on,
as in a reader's terminal), in a fresh HOME and state folder: tests/integration/
test_doc_commands.py says where each doc's session starts and what its reader has already done
(SESSIONS). Each command is bracketed by markers so its exit code and output are known.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/cli.md", "docs/teaching.md", "docs/grading.md",
        "docs/troubleshooting.md")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w-]*)")
NEEDS = re.compile(r"^\s*<!--\s*needs:\s*(.*?)\s*-->\s*$")
SHELL_TAGS = {"bash", "sh", "shell", "zsh"}
PROMPT_TAGS = {"console", "shell-session", "text", ""}
MARK = "\x1e"  # record separator: never in kflab's output


@dataclass
class Command:
    doc: str
    line: int  # 1-based line of the command's first line in the doc
    text: str

    @property
    def key(self) -> str:
        """The command without its trailing comment: what sessions name it by, so that a
        reworded comment in the doc changes nothing here."""
        return re.sub(r"\s+#[^'\"]*$", "", self.text) if "\n" not in self.text else self.text

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


@dataclass
class Block:
    doc: str
    line: int  # the fence's line
    lang: str
    needs: str | None
    commands: list[Command] = field(default_factory=list)


def _bash_complete(text: str) -> bool:
    """Whether TEXT is whole shell syntax (a multi-line for/if/heredoc is one command)."""
    return subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True,
                          check=False).returncode == 0


def _script_commands(doc: str, first: int, lines: list[str]) -> list[Command]:
    out: list[Command] = []
    buf: list[str] = []
    start = first
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not buf:
            start = first + i
        buf.append(line)
        if line.endswith("\\"):
            continue
        text = "\n".join(buf)
        if _bash_complete(text):
            out.append(Command(doc, start, text.strip()))
            buf = []
    if buf:
        out.append(Command(doc, start, "\n".join(buf).strip()))
    return out


def _prompt_commands(doc: str, first: int, lines: list[str]) -> list[Command]:
    out: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("$ "):
            start, parts = first + i, [line[2:]]
            while parts[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                parts.append(lines[i].strip().removeprefix("> "))
            out.append(Command(doc, start, "\n".join(parts)))
        i += 1
    return out


def blocks(doc: str, text: str | None = None) -> list[Block]:
    """The shell blocks of DOC (a path relative to the repository), in order."""
    lines = (text if text is not None else (REPO / doc).read_text()).splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence[0] * len(fence)):
            end += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip()
                for ln in lines[i + 1:end]]
        needs = NEEDS.match(lines[i - 1]) if i > 0 else None
        block = Block(doc, i + 1, lang, needs.group(1) if needs else None)
        if lang in SHELL_TAGS:
            block.commands = _script_commands(doc, i + 2, body)
        elif lang in PROMPT_TAGS:
            block.commands = _prompt_commands(doc, i + 2, body)
        if block.commands:
            found.append(block)
        i = end + 1
    return found


@dataclass
class Result:
    command: Command
    rc: int | None  # None: it never finished (the session timed out) or never started
    output: str
    seconds: float


@dataclass
class Session:
    """How one doc's commands run: where its reader starts and what they did before."""

    doc: str
    reader: str  # who runs it, for the report: "a newcomer in a fresh clone", ...
    activated: bool = True  # the repository's .venv/bin first on PATH (README's activate)
    clone: bool = False  # start in a copy of the repository (README: "from a clone")
    # command (as in the doc, less a trailing comment) -> the exit codes it may end with, why
    may_exit: dict[str, tuple[set[int], str]] = field(default_factory=dict)
    # a regex on the command text -> bash run before the first command it matches: what the
    # prose says the reader has at that point (a folder of hand-ins, a class roster)
    before: dict[str, str] = field(default_factory=dict)
    # command (less a trailing comment) -> what the reader types at its prompt
    answers: dict[str, str] = field(default_factory=dict)
    timeout: float = 1800


def repo_copy(dest: Path) -> Path:
    """The checkout as `git clone` would give it, with the working tree's changes: tracked
    files and new files git does not ignore (no .venv, no caches)."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "-c", "-o",
                            "--exclude-standard"], capture_output=True, check=True,
                           timeout=60).stdout.decode().split("\0")
    for name in filter(None, names):
        src = REPO / name
        if not src.is_file() or src.is_symlink():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(src.read_bytes())
        target.chmod(src.stat().st_mode & 0o777)
    return dest


def environment(session: Session, home: Path) -> dict[str, str]:
    """A reader's terminal: a fresh HOME (so ~/.kflab is a fresh state folder), 80 columns,
    nothing of this test run (no KFLAB_STATE, no PYTHONPATH), the machine's network access
    (the CA bundle and index variables) and torch's wheelhouse for a setup.sh in a clone."""
    path = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if Path(p).resolve() != (REPO / ".venv" / "bin").resolve()]
    if session.activated:
        path.insert(0, str(REPO / ".venv" / "bin"))
    env = {"PATH": os.pathsep.join(path), "HOME": str(home), "LANG": "C.UTF-8",
           "COLUMNS": "80", "LINES": "24", "TERM": "dumb", "USER": os.environ.get("USER", "")}
    for key in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                "PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST",
                "KFLAB_TORCH_FIND_LINKS", "TMPDIR"):
        if key in os.environ:
            env[key] = os.environ[key]
    env["PIP_CACHE_DIR"] = str(REPO / ".cache" / "pip")  # a cache: later runs download less
    return env


def script(session: Session, commands: list[Command]) -> str:
    lines = ["set +e", "exec </dev/null 2>&1"]
    pending = dict(session.before)
    for i, cmd in enumerate(commands):
        for pattern in list(pending):
            if re.search(pattern, cmd.text):
                lines.append(f"# before {cmd}: what the prose says the reader has")
                lines.append(pending.pop(pattern))
        text = cmd.text
        if cmd.key in session.answers:  # stdin is the reader's keyboard for this one
            text = f"{{ {cmd.text}\n}} <<'KFLAB_DOC_ANSWER'\n{session.answers[cmd.key]}\n" \
                   "KFLAB_DOC_ANSWER"
        lines += [f"printf '\\n{MARK}BEGIN {i} %s\\n' \"$(date +%s.%N)\"", text,
                  f"printf '\\n{MARK}END {i} %s %s\\n' \"$?\" \"$(date +%s.%N)\""]
    if pending:
        raise AssertionError(f"{session.doc}: no command matches {sorted(pending)} any more: "
                             "update the session's `before` in tests/integration/"
                             "test_doc_commands.py")
    return "\n".join(lines) + "\n"


def run_session(session: Session, workdir: Path | None = None, skip: set[str] = frozenset(),
                extra_env: dict[str, str] | None = None) -> list[Result]:
    """Every command of the doc's blocks that are not marked `needs:` (nor in SKIP: run by
    another test), in one bash session. EXTRA_ENV: values the `before` snippets read (never
    the commands themselves)."""
    commands = [c for b in blocks(session.doc) if b.needs is None for c in b.commands
                if c.key not in skip]
    root = Path(workdir or tempfile.mkdtemp(prefix="kflab-doc-"))
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    cwd = repo_copy(root / "kflab") if session.clone else home
    text = script(session, commands)
    (root / "session.sh").write_text(text)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(["bash", str(root / "session.sh")], cwd=cwd,
                              env={**environment(session, home), **(extra_env or {})},
                              capture_output=True,
                              timeout=session.timeout, check=False)
        out = proc.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode("utf-8", "replace") + \
            f"\n(the session was stopped after {session.timeout:.0f} s)"
    finally:
        _clean_up(session, root, cwd, home)
    return parse(out, commands, time.monotonic() - t0)


def _clean_up(session: Session, root: Path, cwd: Path, home: Path) -> None:
    """Stop whatever the session left running (a model server, a notebook) with the reader's
    own `kflab down`, and drop the clone's venv (a GB of disk per run)."""
    kflab = next((k for k in (cwd / ".venv" / "bin" / "kflab", REPO / ".venv" / "bin" / "kflab")
                  if k.exists()), None)
    if kflab is not None:
        subprocess.run([str(kflab), "down"], cwd=home, env=environment(session, home),
                       capture_output=True, timeout=300, check=False)
    if session.clone:
        shutil.rmtree(cwd / ".venv", ignore_errors=True)


def parse(out: str, commands: list[Command], total: float) -> list[Result]:
    results = [Result(c, None, "", 0.0) for c in commands]
    current, begun = None, 0.0
    buf: list[str] = []
    for line in out.split("\n"):  # not splitlines(): it splits at the \x1e marks too
        if line.startswith(f"{MARK}BEGIN "):
            _, idx, t = line.split()
            current, begun, buf = int(idx), float(t), []
        elif line.startswith(f"{MARK}END ") and current is not None:
            _, idx, rc, t = line.split()
            results[int(idx)] = Result(commands[int(idx)], int(rc), "\n".join(buf).strip(),
                                       float(t) - begun)
            current = None
        elif current is not None:
            buf.append(line)
    if current is not None:  # started, never ended: the session timed out in it
        results[current] = Result(commands[current], None, "\n".join(buf).strip(), total)
    return results


def failures(session: Session, results: list[Result]) -> list[str]:
    """One paragraph per command that did not end as the doc implies, with what to do."""
    bad = []
    for r in results:
        allowed = session.may_exit.get(r.command.key, ({0}, ""))[0]
        if r.rc is not None and r.rc in allowed:
            continue
        what = "did not run to its end (the session timed out)" if r.rc is None else \
            f"exited {r.rc}"
        tail = "\n    ".join(r.output.splitlines()[-12:])
        bad.append(f"{r.command}\n  {what} (as {session.reader}); its last output:\n    {tail}")
    return bad
