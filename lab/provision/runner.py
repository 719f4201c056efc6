"""Runs the lab's Ansible playbook and turns its events into progress; owns nothing else.

ansible-playbook is started as an argv (never a shell) with a JSON extra-vars file and a
one-host inventory. A small callback plugin (callbacks/kflab_events.py) writes one JSON line
per event; we follow that file for the live display, while Ansible's normal output goes to
the full log. Re-running converges: the roles are idempotent, so `kflab up` after a failure
simply runs again.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import content
from lab.backends.local.procs import ChildGroup
from lab.errors import LabError
from lab.providers.base import Inventory
from lab.state import remove, write_json

REPO = content.root()  # the clone, or the copy a wheel carries (lab/content.py)
PLAYBOOK = REPO / "playbooks" / "site.yml"
CALLBACKS = Path(__file__).resolve().parent / "callbacks"
ROLES = ("node", "k3s", "gpu", "kubeflow", "verify")

Sink = Callable[[dict[str, Any]], None]


@dataclass
class Plan:
    """One ansible-playbook run: what, where, with which variables and roles (tags)."""

    inventory: Inventory
    extra_vars: dict[str, Any]
    tags: list[str]
    workdir: Path
    playbook: Path = PLAYBOOK
    host_name: str = "lab"
    become_password: bool = False
    check: bool = False  # --check --diff: report what would change, change nothing
    start_at: str = ""  # --start-at-task (a check resumed after a task it cannot judge)

    @property
    def log(self) -> Path:
        return self.workdir / "ansible.log"

    @property
    def events(self) -> Path:
        return self.workdir / "ansible-events.jsonl"


@dataclass
class Outcome:
    ok: bool
    log: Path
    failed: dict[str, Any] | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    roles: dict[str, float] = field(default_factory=dict)  # seconds each role took


def extra_vars(profile: Any, kubeconfig: Path, gpu: bool, *,
               versions_file: Path = REPO / "manifests" / "versions.yaml",
               github_url: str = "https://github.com") -> dict[str, Any]:
    """The contract with playbooks/site.yml (see docs and the roles' defaults).

    kflab_provider tells the roles whose machine it is (a VM's swap and disk are theirs to
    change, a user's own machine's are not; an existing cluster is reached with the user's
    kubectl from here); kflab_lab_dir is where the verify role leaves verify.json."""
    return {
        "kflab_lab_name": profile.name,
        "kflab_provider": profile.provider,
        "kflab_lab_dir": str(kubeconfig.parent),  # the verify role leaves verify.json here
        "kflab_components": list(profile.components),
        "kflab_gpu": gpu,
        "kflab_offline_dir": profile.offline or "",
        "kflab_kubeconfig_dest": str(kubeconfig),
        "kflab_api_address": "127.0.0.1",
        "kflab_api_port": profile.api_port,
        "kflab_versions_file": str(versions_file),
        "kflab_github_url": github_url,
        "kflab_version_overrides": dict(profile.versions),
        "kflab_overlays_dir": str(REPO / "manifests" / "overlays"),
    }


def tags_for(provisions_node: bool, gpu: bool, components: tuple[str, ...] | list[str],
             only: list[str] | None = None) -> list[str]:
    """Roles to run, in order: a node needs node + k3s; gpu only with one; kubeflow only
    when components are wanted; `only` narrows it (e.g. just `node`)."""
    tags = []
    if provisions_node:
        tags += ["node", "k3s"] + (["gpu"] if gpu else [])
    if components:
        tags += ["kubeflow", "verify"]
    if only:
        unknown = [t for t in only if t not in ROLES]
        if unknown:
            raise LabError(f"unknown role {', '.join(unknown)}", hint=f"roles: {', '.join(ROLES)}")
        tags = [t for t in ROLES if t in only]
    return tags


def _ansible_playbook() -> str:
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = str(beside) if beside.exists() else shutil.which("ansible-playbook")
    if not found:
        raise LabError("ansible-playbook not found", hint="pip install 'kflab' (ansible-core)")
    return found


def argv_for(plan: Plan, vars_file: Path, inv_file: Path) -> list[str]:
    argv = [_ansible_playbook(), "-i", str(inv_file), str(plan.playbook),
            "-e", f"@{vars_file}"]
    if plan.tags:
        argv += ["--tags", ",".join(plan.tags)]
    if plan.become_password:
        argv.append("--ask-become-pass")
    if plan.check:
        argv += ["--check", "--diff"]
    if plan.start_at:
        argv += ["--start-at-task", plan.start_at]
    return argv


def _env(plan: Plan) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
        "ANSIBLE_CALLBACKS_ENABLED": "kflab_events",
        "KFLAB_EVENTS": str(plan.events),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        # One SSH round trip per task instead of several (sudo without requiretty).
        "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_LOCAL_TEMP": str(plan.workdir / "ansible-tmp"),
        "PYTHONUNBUFFERED": "1",
    })
    # The playbooks' own ansible.cfg (roles_path, interpreter...): we run from the repo root,
    # where Ansible would not look for it.
    cfg = plan.playbook.parent / "ansible.cfg"
    if cfg.exists() and "ANSIBLE_CONFIG" not in os.environ:
        env["ANSIBLE_CONFIG"] = str(cfg)
    return env


def _write_inputs(plan: Plan) -> tuple[Path, Path]:
    plan.workdir.mkdir(parents=True, exist_ok=True)
    inv_file = plan.workdir / "inventory.ini"
    inv_file.write_text(plan.inventory.render(plan.host_name))
    vars_file = plan.workdir / "vars.json"
    write_json(vars_file, plan.extra_vars)
    os.chmod(vars_file, 0o600)
    return inv_file, vars_file


def list_tasks(plan: Plan) -> list[tuple[str, str]]:
    """(role, task) in play order, from `ansible-playbook --list-tasks` (static tasks only)."""
    import subprocess

    inv_file, vars_file = _write_inputs(plan)
    proc = subprocess.run([*argv_for(plan, vars_file, inv_file), "--list-tasks"],
                          capture_output=True, text=True, env=_env(plan), cwd=REPO,
                          timeout=120, check=False)
    if proc.returncode != 0:
        raise LabError(f"the playbook does not load: {proc.stderr.strip()[-600:]}",
                       hint=f"check {plan.playbook}")
    tasks = []
    in_tasks = False
    for line in proc.stdout.splitlines():
        stripped = line.strip()
        if stripped == "tasks:":
            in_tasks = True
            continue
        if in_tasks and stripped and "\tTAGS:" in line:
            name = stripped.split("\tTAGS:")[0].strip()
            role, _, task = name.partition(" : ")
            tasks.append((role, task) if task else ("", role))
    return tasks


def _follow(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    try:
        with open(path) as fh:
            fh.seek(offset)
            chunk = fh.read()
    except FileNotFoundError:
        return [], offset
    complete, _, _rest = chunk.rpartition("\n")
    events = []
    for line in complete.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events, offset + len(complete) + (1 if complete else 0)


def run(plan: Plan, sink: Sink) -> Outcome:
    """Run the playbook; feed every event to `sink`; the Outcome names the failed task."""
    inv_file, vars_file = _write_inputs(plan)
    remove(plan.workdir, plan.events)
    argv = argv_for(plan, vars_file, inv_file)
    t0 = time.monotonic()
    failed: dict[str, Any] | None = None
    stats: dict[str, Any] = {}
    firsts: dict[str, float] = {}  # role -> when its first task started
    with open(plan.log, "a") as log, ChildGroup() as group:
        log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n")
        log.flush()
        proc = group.start(argv, cwd=REPO, env=_env(plan), stdout=log)
        offset = 0
        while True:
            done = proc.poll() is not None
            events, offset = _follow(plan.events, offset)
            for ev in events:
                if ev.get("event") == "result" and ev.get("status") in ("failed",
                                                                       "unreachable"):
                    failed = failed or ev
                if ev.get("event") == "stats":
                    stats = ev.get("hosts", {})
                if ev.get("event") == "task" and ev.get("role") and not ev.get("handler"):
                    firsts.setdefault(str(ev["role"]), float(ev.get("t") or time.time()))
                sink(ev)
            if done:
                break
            time.sleep(0.2)
        code = proc.returncode
    ok = code == 0 and failed is None
    if not ok and failed is None:
        failed = {"task": "(ansible-playbook)", "role": "", "host": plan.host_name,
                  "msg": f"exit code {code}; see the log"}
    return Outcome(ok, plan.log, failed, stats, time.monotonic() - t0,
                   role_seconds(firsts, time.time()))


def role_seconds(firsts: dict[str, float], end: float) -> dict[str, float]:
    """How long each role ran: from its first task to the next role's (or the end)."""
    order = sorted(firsts.items(), key=lambda kv: kv[1])
    ends = [t for _, t in order[1:]] + [end]
    return {role: round(max(0.0, stop - start), 1)
            for (role, start), stop in zip(order, ends, strict=True)}


def failure_error(outcome: Outcome) -> LabError:
    f = outcome.failed or {}
    where = f"{f.get('role')} : {f.get('task')}" if f.get("role") else str(f.get("task"))
    detail = str(f.get("msg") or "").strip() or str(f.get("stderr") or "").strip()
    return LabError(f"task '{where}' failed on {f.get('host', '?')}: {detail[:500]}",
                    hint=f"full log: {outcome.log}; fix the cause and re-run `kflab up` "
                    "(finished roles converge quickly); to report it, `kflab debug bundle` "
                    "collects the log, the lab and the cluster's state in one file")


class ProgressView:
    """The live display: current role/task, elapsed time, and what is left."""

    def __init__(self, tasks: list[tuple[str, str]], tags: list[str],
                 say: Callable[[str], None]) -> None:
        self.tasks = tasks
        self.tags = tags
        self.say = say
        self.t0 = time.monotonic()
        self.seen = 0
        self.role = ""

    def __call__(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        elapsed = f"{time.monotonic() - self.t0:6.1f}s"
        if kind == "task" and not ev.get("handler"):
            self.seen += 1
            role = ev.get("role") or ""
            if role and role != self.role:
                self.role = role
                left = self.tags[self.tags.index(role) + 1:] if role in self.tags else []
                self.say(f"{elapsed} ▶ role {role}" + (f" (then: {', '.join(left)})"
                                                        if left else ""))
            total = max(len(self.tasks), self.seen)
            self.say(f"{elapsed}   [{self.seen}/~{total}] {ev.get('task')}")
        elif kind == "result" and ev.get("status") in ("failed", "unreachable"):
            self.say(f"{elapsed}   ✘ {ev.get('status')}: {str(ev.get('msg'))[:300]}")
        elif kind == "stats":
            for host, s in (ev.get("hosts") or {}).items():
                self.say(f"{elapsed} done on {host}: ok={s.get('ok')} changed={s.get('changed')}"
                         f" failed={s.get('failures')} unreachable={s.get('unreachable')}")
