"""The start-up fast path (lab/fastpath.py) answers an unchanged, all-cached `kflab pipeline
run` exactly as the normal path (click, the CLI, the local backend's replay) does, imports
none of what it skips, and hands every other run to the normal path with nothing written.

Real runs of a small pipeline written here (a sibling module, an environment variable read
at compile time): one engine run makes the cache and the memo (module fixture), then the
same run is answered by the normal path (`lab.cli.app.main`, what ran before this change)
and by the entry point (`python -m lab.cli`), and the two records and outputs compared.
The conditions that must reach the normal path are checked in-process on `answer()`,
which returns None and leaves the state folder as it was."""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import fastpath, signals

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("click", "rich", "kfp", "yaml", "psutil", "lab.cli.app", "lab.backends.local")

PIPELINE = '''
import os
from kfp import dsl
from kfp.dsl import Dataset, Input, Output
from fast_helpers import SCALE

@dsl.component(install_kfp_package=False)
def make(n: int, scale: int, data: Output[Dataset]) -> int:
    with open(data.path, "w") as fh:
        fh.write("x" * n)
    return n * scale

@dsl.component(install_kfp_package=False)
def size(data: Input[Dataset]) -> int:
    return len(open(data.path).read())

@dsl.pipeline(name="fast")
def fast(n: int = int(os.environ.get("KFLAB_TEST_FAST_N", "3"))):
    size(data=make(n=n, scale=SCALE).outputs["data"])
'''

NORMAL = "import sys; sys.argv[0] = 'kflab'; from lab.cli.app import main; main()"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KFLAB_TEST_FAST_N", "FORCE_COLOR", "TTY_COMPATIBLE", "KFLAB_BACKEND",
                        "KFLAB_CONTEXT", "KFLAB_STATE")}
    return {**env, "PYTHONPATH": str(REPO)}


def _run(project: Path, *args: str, normal: bool = False,
         importtime: bool = False) -> subprocess.CompletedProcess[str]:
    """`kflab --state STATE pipeline run fast.py ARGS`: by the entry point, or (normal) by
    the command tree alone, as before the fast path existed."""
    argv = ["--state", str(project / "state"), "pipeline", "run", "fast.py", *args]
    cmd = [sys.executable, "-c", NORMAL, *argv] if normal else \
        [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "lab.cli", *argv]
    return subprocess.run(cmd, cwd=project, env=_env(), capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pipeline run once through the engine: its cache entries and its memo exist."""
    folder = tmp_path_factory.mktemp("fast")
    (folder / "fast.py").write_text(PIPELINE)
    (folder / "fast_helpers.py").write_text("SCALE = 2\n")
    first = _run(folder, "--name", "m", normal=True)
    assert first.returncode == 0, first.stderr
    assert list((folder / "state" / "pipeline-replay").glob("*/*.json")), "no memo"
    return folder


def _record(project: Path, name: str = "m") -> dict:
    path = project / "state" / "resources" / "pipelineruns" / "default" / f"{name}.json"
    return json.loads(path.read_text())


def _same_shape(record: dict) -> dict:
    """The record with what differs between two runs of the same replay (ids, times) set
    aside, after checking each of those is there and of its form."""
    rec = copy.deepcopy(record)
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$")
    assert stamp.match(rec["metadata"].pop("creationTimestamp"))
    status = rec["status"]
    run_id = status.pop("run_id")
    assert re.fullmatch(r"[0-9a-f-]{36}", run_id)
    assert status.pop("pipeline_root").endswith(f"/pipeline-root/default/{run_id}")
    assert stamp.match(status.pop("created_at")) and stamp.match(status.pop("finished_at"))
    assert stamp.match(status.pop("start_time")) and stamp.match(status.pop("end_time"))
    for task in status["run_details"]["task_details"]:
        assert task.pop("start_time") == task.pop("end_time")
    return rec


def _lines(out: str) -> list[str]:
    return [re.sub(r"^ *\d+\.\ds ", "<elapsed> ", line) for line in out.splitlines()]


def test_the_fast_path_answers_as_the_normal_path_does(project: Path) -> None:
    normal = _run(project, "--name", "m", "-p", "n=3", normal=True)
    before = _record(project)
    fast = _run(project, "--name", "m", "-p", "n=3")
    after = _record(project)
    assert normal.returncode == fast.returncode == 0, fast.stderr
    assert fast.stderr == normal.stderr == ""
    # the same lines (piped; the elapsed time aside), the same record
    # one line per task reused from the cache, SKIPPED as KFP shows a cache hit (issue 33)
    assert _lines(fast.stdout) == _lines(normal.stdout) == [
        "<elapsed>     pipeline run m: 2 tasks",
        "<elapsed>       task make SKIPPED (cached, from run m)",
        "<elapsed>       task size SKIPPED (cached, from run m)", "pipelinerun/m SUCCEEDED"]
    assert _same_shape(after) == _same_shape(before)
    assert after["status"]["run_id"] != before["status"]["run_id"]
    assert [t["cached"] for t in after["status"]["run_details"]["task_details"]] == [True] * 2
    # the replaced run's (empty) artifacts folder went, as the backend's delete does
    root = project / "state" / "pipeline-root" / "default"
    assert not (root / before["status"]["run_id"]).exists()
    assert (root / after["status"]["run_id"]).is_dir()
    run_dir = project / "state" / "runs" / "pipelineruns" / "default" / "m"
    assert sorted(p.name for p in run_dir.iterdir()) == ["logs", "run.log", "tmp"]
    # the owner record has what owners.acquire writes (and the normal path reads it back)
    owner = json.loads((project / "state" / "owners" / "pipelineruns" / "default" /
                        "m.json").read_text())
    assert set(owner) == {"kind", "namespace", "name", "pid", "started", "argv", "cwd",
                          "since", "token", "procs"}
    assert owner["argv"][:2] == ["kflab", "--state"] and owner["procs"] == {}
    assert owner["token"].startswith("pipelineruns.default.m.")
    again = _run(project, "--name", "m", "-p", "n=3", normal=True)
    assert again.returncode == 0 and _same_shape(_record(project)) == _same_shape(before)


def test_the_fast_path_imports_no_click_rich_kfp_or_yaml(project: Path) -> None:
    """Answered before click, rich, kfp, PyYAML, psutil, the command tree and the local
    backend are imported (as `kflab --help` keeps kfp and rich out: test_cli.py)."""
    fast = _run(project, "--name", "imports", importtime=True)
    assert fast.returncode == 0, fast.stderr
    assert fast.stdout.endswith("pipelinerun/imports SUCCEEDED\n")
    imported = {line.rsplit("|", 1)[1].strip() for line in fast.stderr.splitlines()
                if line.startswith("import time:")}
    assert "lab.fastpath" in imported and "lab.backends.pipeline_memo" in imported
    assert not {m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY
                or m.startswith(("lab.cli.", "lab.backends.local"))}
    assert "dataclasses" not in imported  # with inspect, a fifth of its start-up on 2 cores


def test_a_new_name_is_answered_as_the_normal_path_answers_it(project: Path) -> None:
    """The memo is keyed on the pipeline and its arguments, not on the run's name (the
    normal path replays any name too); a default name comes from the file's stem."""
    fast = _run(project, "--parallelism", "3")
    normal = _run(project, "--name", "fast-normal", "--parallelism", "3", normal=True)
    assert fast.returncode == normal.returncode == 0, fast.stderr
    assert _lines(fast.stdout)[-1] == "pipelinerun/fast SUCCEEDED"
    records = {}
    for name in ("fast", "fast-normal"):
        rec = _same_shape(_record(project, name))
        assert rec["status"].pop("display_name") == rec["metadata"].pop("name") == name
        assert rec["status"].pop("log").endswith(f"/runs/pipelineruns/default/{name}/run.log")
        records[name] = rec
    assert records["fast"] == records["fast-normal"]
    assert records["fast"]["status"]["parallelism"] == 3


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(root.rglob("*"))}


@pytest.fixture()
def inproc(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """answer() in this process, as the entry point calls it (its signal handlers left to
    the test process), from the project folder."""
    monkeypatch.setattr(signals, "install", lambda: None)
    for name in ("KFLAB_TEST_FAST_N", "FORCE_COLOR", "TTY_COMPATIBLE", "KFLAB_BACKEND",
                 "KFLAB_CONTEXT", "KFLAB_STATE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # as _run's children have it: part of the key
    # a run answer() hands over would start its task fork server in this test process
    monkeypatch.setenv("KFLAB_NO_PRESTART", "1")
    yield project


def _argv(project: Path, *extra: str) -> list[str]:
    return ["--state", str(project / "state"), "pipeline", "run", "fast.py", "--name", "m",
            *extra]


def test_in_process_answer_is_the_control(inproc: Path, capfd: pytest.CaptureFixture) -> None:
    """The same call the cases below make, unchanged: it is answered (so a None below is
    the condition's doing, not the test's)."""
    assert fastpath.answer(_argv(inproc)) == 0
    assert capfd.readouterr().out.endswith("pipelinerun/m SUCCEEDED\n")


@pytest.mark.parametrize("extra", [
    ["--no-cache"], ["--context", "kind-kflab"], ["--backend", "cluster"], ["--help"],
    ["--name", "other"], ["--parallelism", "0"], ["--parallelism", "-1"], ["-p", "n=4"],
    ["-p", "novalue"], ["--function", "fast"], ["fast.py"], ["--unknown"], ["--name=m"],
])
def test_other_command_lines_go_to_the_normal_path(inproc: Path, extra: list[str],
                                                   capfd: pytest.CaptureFixture) -> None:
    before = _snapshot(inproc / "state")
    assert fastpath.answer(_argv(inproc, *extra)) is None
    assert _snapshot(inproc / "state") == before and capfd.readouterr().out == ""


@pytest.mark.parametrize("variable", ["KFLAB_TEST_FAST_N=30", "KFLAB_BACKEND=cluster",
                                      "KFLAB_CONTEXT=kind-kflab"])
def test_an_environment_that_changes_the_run_goes_to_the_normal_path(
        inproc: Path, variable: str, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture) -> None:
    """KFLAB_TEST_FAST_N is read when the pipeline compiles; the others choose another
    backend."""
    name, value = variable.split("=")
    monkeypatch.setenv(name, value)
    before = _snapshot(inproc / "state")
    assert fastpath.answer(_argv(inproc)) is None
    assert _snapshot(inproc / "state") == before and capfd.readouterr().out == ""


@contextlib.contextmanager
def _edit(path: Path, text: str | None) -> Iterator[None]:
    old = path.read_bytes() if path.exists() else None
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    try:
        yield
    finally:
        if old is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(old)


def _entry_file(project: Path) -> Path:
    memo = json.loads(next((project / "state" / "pipeline-replay").glob("*/*.json"))
                      .read_text())
    key = next(t["key"] for t in memo["tasks"] if t.get("key"))
    return next((project / "state" / "pipeline-cache").glob(f"*/*/{key}.json"))


def _owner_file(project: Path) -> Path:
    return project / "state" / "owners" / "pipelineruns" / "default" / "m.json"


CHANGES = {
    "an edited sibling module": lambda p: (p / "fast_helpers.py", "SCALE = 5\n"),
    "a removed cache entry": lambda p: (_entry_file(p), None),
    "a damaged cache entry": lambda p: (_entry_file(p), "{"),
    "a lab profile here": lambda p: (p / "lab.yaml", "backend: local\n"),
    "a lab recorded by kflab up": lambda p: (p / "state" / "labs" / "x" / "lab.json", "{}"),
    "a stop request": lambda p: (_owner_file(p).with_suffix(".stop"), "{}"),
    "an owner that recorded a process": lambda p: (_owner_file(p), json.dumps(
        {**json.loads(_owner_file(p).read_text()), "procs": {"t": {"pid": 1}}})),
    "an unreadable owner record": lambda p: (_owner_file(p), "{"),
    "a record still running": lambda p: (
        p / "state" / "resources" / "pipelineruns" / "default" / "m.json",
        json.dumps({**_record(p), "status": {**_record(p)["status"], "state": "RUNNING"}})),
    "a damaged record": lambda p: (
        p / "state" / "resources" / "pipelineruns" / "default" / "m.json", "[]"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_input_or_state_goes_to_the_normal_path(
        inproc: Path, change: str, capfd: pytest.CaptureFixture) -> None:
    """Each of these sends the normal path through the engine (tests/unit/
    test_pipeline_replay.py) or through the backend's own rules for it (owners.py: a stop
    request, leftovers of an earlier owner; the store: a damaged record)."""
    path, text = CHANGES[change](inproc)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _edit(path, text):
        before = _snapshot(inproc / "state")
        assert fastpath.answer(_argv(inproc)) is None
        assert _snapshot(inproc / "state") == before and capfd.readouterr().out == ""


def test_a_busy_lock_or_a_live_tagged_process_go_to_the_normal_path(
        inproc: Path, capfd: pytest.CaptureFixture) -> None:
    state = inproc / "state"
    before = _snapshot(state)
    # another kflab process owns the run (a flock on its own open file, as owners.acquire)
    fd = os.open(_owner_file(inproc).with_suffix(".lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert fastpath.answer(_argv(inproc)) is None
    finally:
        os.close(fd)
    # a process of the earlier owner's run still alive (procs.tagged would stop it)
    token = json.loads(_owner_file(inproc).read_text())["token"]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, "KFLAB_RUN": token})
    try:
        assert fastpath.answer(_argv(inproc)) is None
    finally:
        child.kill()
        child.wait()
    assert _snapshot(state) == before and capfd.readouterr().out == ""


def _drain(fd: int) -> bytes:
    out = b""
    while select.select([fd], [], [], 0.05)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        out += chunk
    return out


@pytest.mark.parametrize(("kind", "env"), [
    ("pty", {"TERM": "xterm-256color"}), ("pty", {"TERM": "dumb"}),
    ("pty", {"TERM": "xterm", "NO_COLOR": "1"}), ("pty", {"TERM": "xterm", "COLUMNS": "60"}),
    ("pty", {"TERM": "xterm", "TTY_COMPATIBLE": "0"}), ("pipe", {"TERM": "xterm"}),
    ("pipe", {"TERM": "xterm", "FORCE_COLOR": "1"}), ("pipe", {"TTY_COMPATIBLE": "1"}),
])
def test_the_lines_are_what_rich_prints(
        inproc: Path, kind: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture) -> None:
    """The fast path's lines, against what lab.term's rich console prints for the same event
    to the same terminal or pipe in the same environment (styles, no wrapping)."""
    from lab.term import console as term_console
    from lab.term.progress import Progress

    for name in ("COLUMNS", "LINES", "NO_COLOR", "COLORTERM", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    main_fd, sub_fd = os.openpty() if kind == "pty" else os.pipe()
    try:
        with os.fdopen(sub_fd, "w", closefd=False) as tty:
            monkeypatch.setattr(sys, "stdout", tty)
            assert fastpath.answer(_argv(inproc)) == 0
            fast = _drain(main_fd)
            monkeypatch.setattr(term_console, "_console", None)
            progress = Progress()
            progress({"event": "run-started", "run": "m", "tasks": ["make", "size"]})
            for task in ("make", "size"):
                progress({"event": "task-finished", "task": task, "state": "SKIPPED",
                          "cached": True, "from": "m"})
            tty.write("pipelinerun/m SUCCEEDED\n")  # click.echo: no styles
            tty.flush()
            rich = _drain(main_fd)
    finally:
        os.close(main_fd)
        os.close(sub_fd)
    elapsed = re.compile(rb" *\d+\.\ds")
    assert elapsed.sub(b"<t>", fast) == elapsed.sub(b"<t>", rich)
    styled = (kind == "pty" and env.get("TERM") != "dumb" and "TTY_COMPATIBLE" not in env) \
        or "FORCE_COLOR" in env or env.get("TTY_COMPATIBLE") == "1"
    assert (b"\x1b[1mm\x1b[0m" in fast) == styled
    assert capfd.readouterr().out == ""


@pytest.mark.parametrize("columns", ["30", "45"])  # 45: the run's line fits, a task's not
def test_a_terminal_too_narrow_for_the_line_goes_to_the_normal_path(
        inproc: Path, monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    """rich would wrap a line there: not mirrored, the normal path prints it."""
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", columns)
    before = _snapshot(inproc / "state")
    main_fd, sub_fd = os.openpty()
    try:
        with os.fdopen(sub_fd, "w", closefd=False) as tty:
            monkeypatch.setattr(sys, "stdout", tty)
            assert fastpath.answer(_argv(inproc)) is None
    finally:
        os.close(main_fd)
        os.close(sub_fd)
    assert _snapshot(inproc / "state") == before


def test_an_other_state_folder_goes_to_the_normal_path(inproc: Path, tmp_path: Path) -> None:
    argv = _argv(inproc)
    argv[1] = str(tmp_path / "other")
    assert fastpath.answer(argv) is None


def test_parse_takes_only_the_plain_forms() -> None:
    req = fastpath.parse(["pipeline", "run", "p.py", "-p", "a=1", "--param", "b=x",
                          "--name", "n", "--parallelism", "2", "--backend", "local"])
    assert req is not None and (req.file, req.name, req.params, req.parallelism) == \
        ("p.py", "n", ["a=1", "b=x"], "2")
    for argv in (["pipeline", "run"], ["run", "p.py"], ["--state", "s"],
                 ["pipeline", "run", "p.py", "--name", "a", "--name", "b"],
                 ["pipeline", "run", "p.py", "--name", "-x"], ["--version"],
                 ["pipeline", "run", "p.py", "--", "x"]):
        assert fastpath.parse(argv) is None, argv


def test_what_the_fast_path_mirrors_matches_its_source() -> None:
    """The values it writes without importing their modules (the local backend's package
    imports psutil) are those modules' values."""
    import psutil

    from lab.backends.local import procs
    from lab.kube.kinds import lookup

    assert lookup("PipelineRun").plural == fastpath.PLURAL and fastpath.TAG == procs.TAG
    assert fastpath._start_time(os.getpid()) == psutil.Process().create_time()


def test_an_edited_sibling_runs_the_engine_through_the_entry_point(project: Path) -> None:
    """End to end: the entry point hands the edited pipeline to the normal path, whose
    engine runs `make` again with the new value; restored, the run is answered again."""
    helpers = project / "fast_helpers.py"
    old = helpers.read_text()
    try:
        helpers.write_text("SCALE = 5\n")
        res = _run(project, "--name", "m")
        assert res.returncode == 0, res.stderr
        make = next(t for t in _record(project)["status"]["run_details"]["task_details"]
                    if t["display_name"] == "make")
        assert make["outputs"]["parameters"]["Output"] == 15 and not make.get("cached")
    finally:
        helpers.write_text(old)
    res = _run(project, "--name", "m")  # the first compile's cache: every task a hit
    assert res.returncode == 0 and all(
        t["cached"] for t in _record(project)["status"]["run_details"]["task_details"])


def test_the_owner_record_carries_the_journal_anchor_and_the_solve_mark(
        inproc: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture) -> None:
    """A run answered here writes the owner record owners.acquire writes, with what grading
    checks it against (lab.hashchain): the active lab's journal head, and the mark of the
    `kflab solve` that ran it."""
    from lab import hashchain
    from lab.scenarios import journal

    root = inproc / "state"
    journal.record(root, "lab-x", "start")
    (root / "progress" / "active").write_text("lab-x")
    monkeypatch.setenv(hashchain.SOLVE_ENV, "ab" * 32)
    try:
        assert fastpath.answer(_argv(inproc)) == 0
        owner = json.loads((root / "owners" / "pipelineruns" / "default" / "m.json")
                           .read_text())
        assert owner["journal"] == hashchain.active_anchor(root)
        assert owner["journal"]["n"] == 1 and owner["solve"] == "ab" * 32
    finally:
        (root / "progress" / "active").unlink()
    capfd.readouterr()
