"""What `kflab up` will change on the target, shown before anything changes.

Two sources, each labelled in the output so that nothing is claimed that was not observed:
- **checked**: `ansible-playbook --check --diff` on the target as it is now. Modules that
  support check mode say whether they would change something and show the diff (a file's
  lines, apt's list of new packages); commands say they would run. Check mode changes
  nothing, except tasks a role marks `check_mode: false` (read-only probes such as
  dpkg-query). It stops at the first task that depends on an earlier change it did not make
  (k3s must be installed before it can be started), and it needs a node that exists.
- **from the role**: everything check mode could not reach is listed from the roles' task
  files, their defaults and group_vars: each task's module and target (package names, paths
  under /etc, services, sysctl files' content, commands), rendered where the variables are
  known before the run, and shown as written where they are not.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# Task keys that are not the module (Ansible's task keywords).
KEYWORDS = {
    "name", "when", "register", "loop", "loop_control", "with_items", "with_dict",
    "with_fileglob", "vars", "notify", "become", "become_user", "tags", "changed_when",
    "failed_when", "check_mode", "retries", "delay", "until", "ignore_errors", "no_log",
    "environment", "args", "delegate_to", "run_once", "timeout", "diff", "throttle",
    "listen", "connection", "module_defaults", "any_errors_fatal", "local_action",
    "ignore_unreachable", "debugger", "collections", "block", "rescue", "always",
}
# Modules that only read or decide: never a change to list.
READ_ONLY = {
    "stat", "slurp", "assert", "debug", "set_fact", "include_vars", "wait_for", "meta",
    "fail", "package_facts", "setup", "pause", "getent", "find", "service_facts", "k8s_info",
    "validate_argument_spec", "add_host", "group_by", "uri", "fetch", "gather_facts",
    "set_stats", "wait_for_connection", "ping",
}
# module -> (kind, the argument that names the target)
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "apt": ("package", ("name", "pkg", "deb")), "package": ("package", ("name",)),
    "dnf": ("package", ("name",)), "yum": ("package", ("name",)),
    "pip": ("package", ("name",)),
    "apt_key": ("apt source", ("url", "file", "id")),
    "apt_repository": ("apt source", ("repo",)),
    "deb822_repository": ("apt source", ("name",)),
    "copy": ("file", ("dest",)), "template": ("file", ("dest",)), "file": ("file", ("path",
                                                                                      "dest")),
    "replace": ("file", ("path", "dest")), "lineinfile": ("file", ("path", "dest")),
    "blockinfile": ("file", ("path", "dest")), "unarchive": ("file", ("dest",)),
    "get_url": ("download", ("dest",)), "mount": ("file", ("path",)),
    "systemd": ("service", ("name",)), "systemd_service": ("service", ("name",)),
    "service": ("service", ("name",)), "sysctl": ("sysctl", ("name",)),
    "modprobe": ("module", ("name",)), "user": ("user", ("name",)),
    "group": ("user", ("name",)), "k8s": ("cluster", ("name", "src")),
    "command": ("command", ("argv", "cmd", "_raw_params")),
    "shell": ("command", ("cmd", "_raw_params")), "raw": ("command", ("_raw_params",)),
    "script": ("command", ("cmd", "_raw_params")),
}
INCLUDES = {"import_tasks", "include_tasks", "import_role", "include_role"}
_UNRESOLVED = object()


@dataclass
class Change:
    """One task that may change the target, and what check mode said about it."""

    role: str
    task: str
    kind: str
    target: str
    detail: list[str] = field(default_factory=list)
    status: str = "planned"  # planned | change | ok | run | skip | failed
    note: str = ""
    handler: bool = False
    notify: list[str] = field(default_factory=list)  # handlers this task notifies


@dataclass
class Preview:
    lab: str
    provider: str
    target: str  # in words: "this machine (sudo)", "VM kflab (libvirt)"
    provider_lines: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    checked: bool = False
    check_note: str = ""  # why check mode did not run, or where it stopped
    log: str = ""

    def own_machine_summary(self) -> dict[str, list[str]]:
        """Per kind, what would change on the target (for the confirmation prompt)."""
        out: dict[str, list[str]] = {}
        for c in self.changes:
            if c.status in ("ok", "skip"):
                continue
            kind = "swap" if c.kind == "swap" else c.kind
            entry = c.target + ("" if c.status != "planned" else " (from the role)")
            if entry not in out.setdefault(kind, []):
                out[kind].append(entry)
        return out

    def render(self) -> list[str]:
        return [run_time_names(line) for line in self._render()]

    def _render(self) -> list[str]:
        mark = {"change": "~ will change", "ok": "= unchanged", "run": "! will run",
                "skip": "- not needed", "failed": "✘ check stopped", "planned": "* planned",
                "unknown": "? check can't tell"}
        lines = [f"What kflab up will change: lab {self.lab}, provider {self.provider}, "
                 f"target: {self.target}"]
        lines += [f"  {ln}" for ln in self.provider_lines]
        for b in self.blockers:
            lines.append(f"  ✘ kflab up would stop here: {b}")
        how = ("checked on the target with ansible --check --diff" if self.checked
               else "NOT checked on the target")
        lines.append(f"roles: {', '.join(self.roles) or 'none'} ({how}"
                     + (f"; {self.check_note}" if self.check_note else "") + ")")
        role = None
        for c in self.changes:
            if c.role != role:
                role = c.role
                lines.append(f"{role}:")
            label = mark.get(c.status, c.status)
            what = f"{c.kind} {c.target}".strip()
            lines.append(f"  {label:<16} {what}   [{'handler: ' if c.handler else ''}"
                         f"{c.task}]")
            if c.note:
                lines.append(f"      {c.note}")
            lines += [f"      {d}" for d in c.detail[:14]]
            if len(c.detail) > 14:
                lines.append(f"      ... {len(c.detail) - 14} more line(s)")
        legend = ("~ check mode saw a change; ! a command check mode does not run; "
                  "? a task check mode cannot judge; * listed from the role's tasks "
                  "(not observed); <name>: a value the role computes at run time")
        lines.append(f"legend: {legend}")
        if self.log:
            lines.append(f"check-mode log: {self.log}")
        return lines


_JINJA = re.compile(r"\{\{-?\s*([^{}]*?)\s*-?\}\}|\{%[^{}]*?%\}", re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def run_time_names(text: str) -> str:
    """A template the preview could not render, as the value it stands for: `{{
    artifact_file.sha256 }}` -> `<artifact_file.sha256>` (a newcomer reads no Jinja)."""
    def name(m: re.Match[str]) -> str:
        if m.group(0).startswith("{%"):
            return ""
        found = _NAME.match(m.group(1) or "")
        return f"<{found.group(0)}>" if found else "<run-time value>"

    return _JINJA.sub(name, text)


# --- templating: the roles' variables, rendered where they are known before the run -----

def _env() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined)
    env.filters.update({
        "dirname": os.path.dirname, "basename": os.path.basename,
        "difference": lambda a, b: [x for x in a if x not in b],
        "union": lambda a, b: list(dict.fromkeys([*a, *b])),
        "intersect": lambda a, b: [x for x in a if x in b],
        "dict2items": lambda d: [{"key": k, "value": v} for k, v in d.items()],
        "to_json": json.dumps, "to_nice_json": lambda v: json.dumps(v, indent=4),
        "to_yaml": yaml.safe_dump, "bool": lambda v: str(v).lower() in ("1", "true", "yes"),
        "regex_replace": lambda v, pat, rep="": re.sub(pat, rep.replace("\\g", "\\"), str(v)),
        "regex_escape": re.escape, "quote": lambda v: json.dumps(str(v)),
        "b64decode": lambda v: base64.b64decode(v).decode(),
        "ternary": lambda c, a, b: a if c else b, "mandatory": lambda v: v,
        "type_debug": lambda v: type(v).__name__,
    })
    env.tests.update({
        "match": lambda v, pat: re.match(pat, str(v)) is not None,
        "search": lambda v, pat: re.search(pat, str(v)) is not None,
        "regex": lambda v, pat: re.search(pat, str(v)) is not None,
        "string": lambda v: isinstance(v, str),
    })
    return env


class Vars:
    """Variables the roles see before the run: group_vars, role defaults, extra vars."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.env = _env()
        self.data = dict(data)
        for _ in range(4):  # defaults refer to other defaults
            self.data = {k: self.value(v, self.data) for k, v in self.data.items()}

    def value(self, v: Any, scope: dict[str, Any] | None = None) -> Any:
        """Render templates in v; an unknowable part is left exactly as written."""
        scope = self.data if scope is None else scope
        if isinstance(v, str) and ("{{" in v or "{%" in v):
            out = self._render(v, scope)
            return v if out is _UNRESOLVED else out
        if isinstance(v, list):
            return [self.value(x, scope) for x in v]
        if isinstance(v, dict):
            return {k: self.value(x, scope) for k, x in v.items()}
        return v

    def _render(self, text: str, scope: dict[str, Any]) -> Any:
        import warnings

        from jinja2 import Undefined

        warnings.filterwarnings("ignore", category=DeprecationWarning, module="jinja2")
        try:
            whole = re.fullmatch(r"\s*\{\{(.*)\}\}\s*", text, re.S)
            if whole and "{{" not in whole.group(1):  # one expression: keep its type
                out = self.env.compile_expression(whole.group(1).strip(),
                                                  undefined_to_none=False)(**scope)
                return _UNRESOLVED if isinstance(out, Undefined) else out
            return self.env.from_string(text).render(**scope)
        except Exception:  # any unknown (a fact, a lookup): shown as written
            return _UNRESOLVED

    def condition(self, when: Any) -> bool | None:
        """A task's `when`, if it can be decided before the run (None: only at run time)."""
        parts = when if isinstance(when, list) else [when]
        verdict: bool | None = True
        for part in parts:
            if isinstance(part, bool):
                value: Any = part
            else:
                value = self._render("{{ " + str(part) + " }}", self.data)
            if value is _UNRESOLVED:
                verdict = None
            elif not value:
                return False
        return verdict

    def child(self, extra: dict[str, Any]) -> Vars:
        merged = Vars.__new__(Vars)
        merged.env = self.env
        merged.data = {**self.data, **{k: self.value(v) for k, v in (extra or {}).items()}}
        return merged


def _load_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None


def role_vars(playbook: Path, roles: list[str], extra: dict[str, Any]) -> Vars:
    base = playbook.parent
    data: dict[str, Any] = {"playbook_dir": str(base), "inventory_hostname": "lab"}
    gv = base / "group_vars"
    for path in sorted([*gv.glob("all.yml"), *gv.glob("all/*.yml"), *gv.glob("lab/*.yml")]):
        doc = _load_yaml(path)
        if isinstance(doc, dict):
            data.update(doc)
    for role_dir in sorted((base / "roles").glob("*")):
        doc = _load_yaml(role_dir / "defaults" / "main.yml")
        if isinstance(doc, dict):
            data.update(doc)
    data.update(extra)
    return Vars(data)


def play_roles(playbook: Path, tags: list[str]) -> list[str]:
    """Roles of the playbook's plays that these tags select, in play order."""
    out = []
    for play in _load_yaml(playbook) or []:
        for entry in (play or {}).get("roles") or []:
            name = entry if isinstance(entry, str) else entry.get("role") or entry.get("name")
            role_tags = [] if isinstance(entry, str) else entry.get("tags") or []
            if not tags or set(tags) & {name, *role_tags}:
                out.append(str(name))
    return out


# --- the static walk over the roles' tasks --------------------------------------------------

def _module(task: dict[str, Any]) -> tuple[str, Any]:
    for key, value in task.items():
        if key not in KEYWORDS:
            return key.rsplit(".", 1)[-1], value
    return "", None


def _args(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):  # free form: `command: swapoff -a`
        return {"_raw_params": value}
    return {}


def _text(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    return str(v)


def _describe(module: str, args: dict[str, Any], task: dict[str, Any], vs: Vars
              ) -> tuple[str, str, list[str]] | None:
    """(kind, target, detail) for a task that may change the target; None when it only
    reads."""
    if module in READ_ONLY or not module:
        return None
    if module in ("command", "shell", "raw", "script"):
        cw = task.get("changed_when")
        if cw is False or str(cw).strip().lower() == "false":
            return None  # a probe: the role says it never changes anything
    kind, keys = KINDS.get(module, ("other", ("name", "path", "dest")))
    raw = next((args[k] for k in keys if k in args), "")
    detail: list[str] = []
    loop = task.get("loop", task.get("with_items"))
    items = vs.value(loop) if loop is not None else None
    if isinstance(items, str) and "{{" in items:
        items = None  # known only at run time
    elif items is not None and not isinstance(items, list):
        items = [items]
    var = (task.get("loop_control") or {}).get("loop_var", "item")
    if items is not None and isinstance(raw, str) and var in raw:
        target = ", ".join(_text(vs.child({var: i}).value(raw)) for i in items)
    else:
        target = _text(vs.value(raw))
    if "{{" in target:
        target = "(known at run time)" + ("" if kind == "package" else
                                          " " + run_time_names(" ".join(target.split()))[:120])
    if kind == "command":
        argv = vs.value(raw)
        target = " ".join(str(a) for a in argv) if isinstance(argv, list) else str(argv)
        if re.search(r"\bswapoff\b", target):
            kind = "swap"
    if kind == "package":
        if "update_cache" in args:
            detail.append("refreshes the package index first")
        if isinstance(vs.value(raw), str) and "{{" in str(vs.value(raw)):
            expr = f"{raw} {vs.value(raw)}"
            names = sorted({n for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)
                            if isinstance(vs.data.get(n), list)})
            for n in names:
                detail.append(f"candidates from {n}: {_text(vs.data[n])} (only those missing "
                              "are installed)")
    if module in ("copy",) and "content" in args:
        content = vs.value(args["content"])
        if task.get("no_log") not in (None, False, "false"):
            detail.append("content not shown (the role marks it no_log)")
        elif isinstance(content, str) and "{{" in content:
            detail.append("content computed at run time")
        else:
            detail += [ln for ln in str(content).splitlines() if ln.strip()][:12]
    if module == "template":
        detail.append(f"from the role's template {args.get('src', '')}")
    if module == "file":
        state = vs.value(args.get("state", "file"))
        detail.append(f"state {state}" + (f" -> {vs.value(args['src'])}" if "src" in args
                                           else ""))
    if module in ("replace", "lineinfile"):
        detail.append("edits lines matching " + str(args.get("regexp", args.get("line", ""))))
    if kind == "service":
        bits = [f"{k} {vs.value(args[k])}" for k in ("state", "enabled", "daemon_reload")
                if k in args]
        detail.append(", ".join(bits))
    if module == "get_url":
        detail.append(f"checksum {vs.value(args.get('checksum', 'none'))}")
    if loop is not None and not (isinstance(raw, str) and var in raw and items is not None):
        label = (task.get("loop_control") or {}).get("label")
        shown = items if items is not None else [loop]
        detail.append("for each: " + ", ".join(
            _text(vs.child({var: i}).value(label) if label and items is not None else i)
            for i in shown))
    if "when" in task and vs.condition(task["when"]) is None:
        detail.append(f"only when: {_text(task['when'])}")
    if task.get("check_mode") is False:
        detail.append("runs even in check mode (check_mode: false)")
    return kind, target, detail


def _tasks_file(path: Path) -> list[dict[str, Any]]:
    doc = _load_yaml(path)
    return [t for t in doc if isinstance(t, dict)] if isinstance(doc, list) else []


def walk(roles_dir: Path, role: str, vs: Vars, tasks_from: str = "main.yml",
         depth: int = 0, seen_handlers: set[str] | None = None) -> Iterator[Change]:
    """The changes a role's tasks (and the handlers they notify) may make, in order."""
    if depth > 8:
        return
    tasks_dir = roles_dir / role / "tasks"
    handlers = {str(h.get("name")): h for h in _tasks_file(roles_dir / role / "handlers" /
                                                         "main.yml")}
    notified = seen_handlers if seen_handlers is not None else set()
    yield from _walk_tasks(roles_dir, role, tasks_dir, _tasks_file(tasks_dir / tasks_from), vs,
                           depth, notified)
    if depth == 0:
        for name in [n for n in handlers if n in notified]:
            h = handlers[name]
            module, value = _module(h)
            found = _describe(module, _args(value), h, vs)
            if found:
                yield Change(role, name, *found, handler=True)


def _walk_tasks(roles_dir: Path, role: str, tasks_dir: Path, tasks: list[dict[str, Any]],
                vs: Vars, depth: int, notified: set[str]) -> Iterator[Change]:
    for task in tasks:
        scope = vs.child(task.get("vars") or {})
        for part in ("block", "rescue", "always"):
            if isinstance(task.get(part), list):
                yield from _walk_tasks(roles_dir, role, tasks_dir, task[part], scope, depth,
                                       notified)
        module, value = _module(task)
        if module in INCLUDES:
            args = _args(value)
            if module.endswith("_tasks"):
                name = str(scope.value(args.get("file") or args.get("_raw_params") or ""))
                yield from _walk_tasks(roles_dir, role, tasks_dir,
                                       _tasks_file(tasks_dir / name), scope, depth + 1,
                                       notified)
            else:
                other = str(scope.value(args.get("name", "")))
                tasks_from = str(args.get("tasks_from", "main"))
                tasks_from += "" if tasks_from.endswith((".yml", ".yaml")) else ".yml"
                for ch in walk(roles_dir, other, scope, tasks_from, depth + 1, notified):
                    ch.role = role
                    yield ch
            continue
        if module == "include_vars":
            args = _args(value)
            doc = _load_yaml(Path(str(scope.value(args.get("file", "")))))
            if isinstance(doc, dict):
                name = args.get("name")
                vs.data.update({name: doc} if name else doc)
            continue
        if module == "set_fact":
            for k, v in _args(value).items():
                rendered = scope.value(v)
                if not (isinstance(rendered, str) and "{{" in rendered):
                    vs.data[k] = rendered
            continue
        if "when" in task and scope.condition(task["when"]) is False:
            continue  # decided before the run: this task will not run on this lab
        found = _describe(module, _args(value), task, scope)
        if found is None:
            continue
        notify = task.get("notify") or []
        notify = [notify] if isinstance(notify, str) else [str(n) for n in notify]
        notified.update(notify)
        name = str(scope.value(task.get("name") or module))
        yield Change(role, name, *found, notify=notify)


def static_changes(playbook: Path, tags: list[str], extra_vars: dict[str, Any]) -> list[Change]:
    """Every task of the selected roles that may change the target, from the role files."""
    roles = play_roles(playbook, tags)
    vs = role_vars(playbook, roles, extra_vars)
    out: list[Change] = []
    for role in roles:
        out += list(walk(playbook.parent / "roles", role, vs))
    return out


# --- check mode -------------------------------------------------------------------------

def _key(name: str) -> str:
    return re.split(r"\{\{|:", name, maxsplit=1)[0].strip().lower()


def merge(changes: list[Change], events: list[dict[str, Any]]) -> str:
    """Attach check-mode results to the static list; returns where the check stopped."""
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    stopped = ""
    for ev in events:
        if ev.get("event") != "result":
            continue
        results.setdefault((str(ev.get("role")), _key(str(ev.get("task")))), []).append(ev)
        if ev.get("status") == "failed" and "check mode" in str(ev.get("msg") or ""):
            continue  # check mode cannot judge this task; the check went on after it
        if ev.get("status") in ("failed", "unreachable") and not stopped:
            msg = " ".join(str(ev.get("msg") or "").split())
            stopped = f"check mode stopped at '{ev.get('role')} : {ev.get('task')}': " \
                      f"{msg[:160]}{'...' if len(msg) > 160 else ''}"
    for c in changes:
        found = results.get((c.role, _key(c.task)))
        if not found:
            continue
        if any(r.get("status") in ("failed", "unreachable") for r in found):
            msg = str(next((r.get("msg") for r in found if r.get("msg")), "") or "")
            c.status = "unknown" if "check mode" in msg else "failed"
            c.note = " ".join(msg.split())[:300]
        elif any(r.get("changed") for r in found):
            c.status = "change"
        elif all(r.get("status") == "skipped" for r in found):
            msgs = " ".join(str(r.get("msg") or "") for r in found)
            c.status = "run" if "check mode" in msgs else "skip"
        else:
            c.status = "ok"
        diff_lines: list[str] = []
        for r in found:
            for d in r.get("diff") or []:
                diff_lines += _diff_lines(d)
        if diff_lines:
            c.detail = diff_lines
        if c.kind == "package" and not c.handler:
            names = apt_new_packages(diff_lines)
            if names:
                c.target = " ".join(names)
            elif c.status == "ok":
                c.target = "all present"
    for h in (c for c in changes if c.handler and c.status == "planned"):
        notifiers = [c for c in changes if h.task in c.notify and c.role == h.role]
        if notifiers and all(c.status in ("ok", "skip") for c in notifiers):
            h.status = "skip"  # nothing that notifies it would change
    return stopped


def apt_new_packages(lines: list[str]) -> list[str]:
    """Package names from apt's simulated run ("The following NEW packages will be
    installed:" followed by indented names)."""
    names: list[str] = []
    inside = False
    for line in lines:
        if "NEW packages will be installed" in line:
            inside = True
        elif inside and line.startswith((" ", "\t")):
            names += line.split()
        else:
            inside = False
    return names


def _diff_lines(d: dict[str, str]) -> list[str]:
    import difflib

    if d.get("prepared"):
        return [ln for ln in d["prepared"].splitlines() if ln.strip()][:20]
    before, after = d.get("before", ""), d.get("after", "")
    if before == after:
        return []
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                      d.get("before_header", "before"),
                                      d.get("after_header", "after"), lineterm="", n=1))
    return lines[2:] if len(lines) > 2 else lines


def check(plan: Any, shown: Preview, resumes: int = 5) -> Preview:
    """Run the plan in check mode (--check --diff) and attach what it saw to `shown`.

    A task that check mode itself cannot judge (apt without python3-apt on the node says
    so) is marked unknown and the check resumes at the next task; any other failure (a task
    that needs an earlier change, which check mode does not make) ends the check there."""
    import glob
    from dataclasses import replace

    from lab.provision import runner

    tasks = runner.list_tasks(plan)
    events: list[dict[str, Any]] = []
    start, outcome = "", None
    for _ in range(resumes + 1):
        batch: list[dict[str, Any]] = []
        outcome = runner.run(replace(plan, check=True, start_at=start), batch.append)
        events += batch
        bad = next((e for e in batch if e.get("event") == "result"
                    and e.get("status") == "failed"), None)
        if bad is None or "check mode" not in str(bad.get("msg") or ""):
            break
        here = (str(bad.get("role") or ""), str(bad.get("task") or ""))
        if here not in tasks or tasks.index(here) + 1 >= len(tasks):
            break
        role, task = tasks[tasks.index(here) + 1]
        start = glob.escape(f"{role} : {task}" if role else task)
    shown.log = str(outcome.log) if outcome else ""
    stopped = merge(shown.changes, events)
    ran = any(e.get("event") == "result" and e.get("status") != "unreachable" for e in events)
    shown.checked = ran
    if not ran:
        msg = str(((outcome.failed if outcome else None) or {}).get("msg") or "").strip()
        first = msg.splitlines()[0][:300] if msg else "see the log"
        shown.check_note = ("check mode could not run: " + first
                            + (" (sudo asks a password: add --ask-become-pass)"
                               if "password" in msg.lower() else ""))
    elif stopped:
        shown.check_note = stopped + " — later tasks are listed from the roles"
    return shown
