"""`kflab up` and `kflab down`: provider first, then the playbook; a record of each run.

The record (<state>/labs/<name>/lab.json) lets `status`, `ssh`, `kubeconfig`, `open` and
`down` find the lab without the profile, and tells a re-run where the last one stopped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.config import Profile, profile_to_data
from lab.errors import LabError, ToolMissing
from lab.kube.conditions import now
from lab.providers import get_provider, lab_dir
from lab.providers.base import Provider, Say
from lab.state import path as state_path
from lab.state import read_json, write_json
from lab.state import remove as state_remove


def record_path(state: Path, name: str) -> Path:
    return state_path(state, "labs", name, "lab.json")


def record(state: Path, profile: Profile, **fields: Any) -> None:
    path = record_path(state, profile.name)
    data = read_json(path) or {}
    data.update({"profile": profile_to_data(profile), **fields,
                 "updated": now()})
    write_json(path, data)


def _records(state: Path, name: str | None) -> list[Path]:
    labs = sorted((state / "labs").glob("*/lab.json"), key=lambda p: p.stat().st_mtime)
    return [p for p in labs if p.parent.name == name] if name else labs


def has_lab(state: Path, name: str | None = None) -> bool:
    """Whether a cluster lab (the named one, or any) has been created here."""
    return bool(_records(state, name))


def current(state: Path, name: str | None = None) -> tuple[Profile, dict[str, Any]]:
    """The lab a command acts on: the named one, else the only one (or the newest)."""
    from lab.config import validate

    labs = _records(state, name)
    if not labs:
        raise LabError("no lab here yet" + (f" named {name}" if name else ""),
                       hint="create one with `kflab up`")
    data = read_json(labs[-1]) or {}
    return validate(data.get("profile"), str(labs[-1])), data


def preflight(profile: Profile, host: Any = None) -> None:
    """Refuse to start when `kflab doctor` has a failing row for this profile."""
    from lab import doctor
    from lab.doctor.rows import Needs

    bad = [r for r in doctor.diagnose(Needs.from_profile(profile), host)
           if r.status == "fail"]
    if bad:
        raise LabError("this host is not ready for the lab: " + "; ".join(
            f"{r.name}: {r.observed}" for r in bad),
            hint=f"{bad[0].advice or 'see `kflab doctor`'} (or `kflab up --force`)")


def require_pinned(roles: list[str]) -> None:
    """Refuse before anything is created when a role would meet an incomplete pin: the roles
    never install an unverified file, and failing after the VM exists helps nobody."""
    from lab.components.catalog import load, versions_file

    cat = load()
    missing = cat.unpinned(roles)
    if missing:
        fields = "; ".join(f"{a}: {', '.join(cat.artifacts[a].missing())}" for a in missing)
        raise LabError(
            f"{versions_file()} has no pin for {', '.join(missing)} ({fields}), which the "
            f"{'/'.join(r for r in roles if r in ('k3s', 'gpu', 'kubeflow'))} role(s) "
            "download: kflab never installs an unverified file",
            hint=f"on a machine with network, `kflab components pin {' '.join(missing)}` "
                 "computes and cross-checks the values; or run only roles that download "
                 "nothing, e.g. `kflab up --only node`")


VerifyView = Callable[[Any], None]  # draws the verify table (lab.provision.verify.Result)
Confirm = Callable[[Any], bool]  # shows a lab.provision.preview.Preview, asks the user


def up(profile: Profile, state: Path, say: Say, *, only: list[str] | None = None,
       playbook: Path | None = None, ask_become_pass: bool = False,
       force: bool = False, show_verify: VerifyView | None = None,
       confirm: Confirm | None = None, yes: bool = False,
       role_vars: dict[str, Any] | None = None) -> dict[str, Any]:
    """Create the node, then converge it with the playbook. Safe to re-run after a failure.
    When the verify role ran, its table is drawn (also when it failed) through show_verify.

    On the user's own machine (host, wsl2) the changes are previewed first and applied only
    when `confirm` says yes (or `yes`); without a way to ask (confirm None) it refuses.
    `role_vars` are extra variables for the roles (e.g. k3s_start: false for a box)."""
    from lab.provision import runner

    if not force:
        preflight(profile)

    provider = get_provider(profile, state)
    _pins()  # checked up front: a bad versions file or mirror setting stops here
    if not force:
        provider.preflight()
    provider.require_tool()
    if playbook is None:  # our own roles: their downloads must be pinned
        # `gpu: auto` may find no GPU: the gpu role's pins are checked once detection says
        # there is one (below), not on a CPU-only machine.
        require_pinned(runner.tags_for(provider.capabilities.provisions_node,
                                       profile.gpu != "auto" and profile.gpu_wanted,
                                       profile.components, only))
    if provider.capabilities.own_machine and not yes:
        if confirm is None:
            raise LabError(
                f"kflab up on provider {profile.provider} changes this machine itself "
                "(packages, /etc, services, swap), and there is no terminal to ask",
                hint="review `kflab up --dry-run`, then re-run with --yes")
        shown = preview(profile, state, say, only=only, playbook=playbook,
                        ask_become_pass=ask_become_pass, checks=not force)
        if not confirm(shown):
            raise LabError("nothing was changed: the changes were not accepted",
                           hint="`kflab up --dry-run` shows them again; --yes accepts them")
    t0 = time.monotonic()
    record(state, profile, phase="create", ok=False)
    provider.create(profile, say)
    phases = {"create": round(time.monotonic() - t0, 1)}
    record(state, profile, phase="playbook", ok=False, created=True, phases=phases)
    gpu = profile.gpu_wanted and bool(provider.gpus())
    tags = runner.tags_for(provider.capabilities.provisions_node, gpu, profile.components, only)
    if playbook is None and gpu:
        require_pinned(tags)
    plan = _plan(profile, provider, state, tags, gpu, playbook, ask_become_pass)
    if plan is not None and role_vars:
        plan.extra_vars.update(role_vars)
    if plan is None:
        say("nothing to provision")
        record(state, profile, phase="ready", ok=True)
        return {"seconds": time.monotonic() - t0, "tags": [], "phases": phases}
    outcome, verified = _converge(plan, say, show_verify)
    phases |= outcome.roles
    record(state, profile, phase="ready" if outcome.ok else "playbook", ok=outcome.ok,
           tags=tags, log=str(outcome.log), failed=outcome.failed, phases=phases,
           playbook=str(playbook) if playbook else None)
    if not outcome.ok and verified is not None and verified.failed \
            and (outcome.failed or {}).get("role") == "verify":
        raise LabError(f"lab {profile.name} is installed, but verify failed: "
                       + ", ".join(r.name for r in verified.failed),
                       hint="the table above says where to look; after a fix, `kflab status "
                       "--verify` runs only the checks again; `kflab debug bundle` collects "
                       "the logs and the cluster's state in one file to report it")
    if not outcome.ok:
        raise runner.failure_error(outcome)
    kc = provider.kubeconfig()
    if kc.exists():
        os.chmod(kc, 0o600)
    if "verify" in tags and verified is not None and not verified.failed:
        # the lab answered its checks: workloads default to it
        record(state, profile, backend={"name": "cluster", "kubeconfig": str(kc),
                                        "context": None, "verified_at": now()})
    return {"seconds": time.monotonic() - t0, "tags": tags, "log": str(outcome.log),
            "phases": phases, "verify": verified, "kubeconfig": str(kc)}


def _pins() -> dict[str, Any]:
    """Where the roles read the pins and fetch GitHub sources (env overrides, validated)."""
    from lab.components.catalog import github_url, versions_file

    return {"versions_file": versions_file(), "github_url": github_url()}


def _plan(profile: Profile, provider: Provider, state: Path, tags: list[str], gpu: bool,
          playbook: Path | None, ask_become_pass: bool) -> Any:
    """The ansible-playbook run for these roles on this provider's node (None: nothing to
    provision, e.g. an existing cluster with no components)."""
    from lab.provision import runner

    inventory = provider.inventory() if tags else None
    if not tags or inventory is None:
        return None
    plan = runner.Plan(inventory=inventory,
                       extra_vars=runner.extra_vars(profile, provider.kubeconfig(), gpu,
                                                    **_pins()),
                       tags=tags, workdir=lab_dir(state, profile),
                       playbook=playbook or runner.PLAYBOOK, host_name=profile.name,
                       become_password=ask_become_pass)
    if not plan.playbook.exists():
        raise LabError(f"playbook {plan.playbook} is missing",
                       hint="reinstall kflab, or pass --playbook")
    return plan


def _converge(plan: Any, say: Say, show_verify: VerifyView | None) -> tuple[Any, Any]:
    """Run the playbook with live progress; then the verify table, when verify ran."""
    from lab.provision import runner, verify

    tasks = runner.list_tasks(plan)
    say(f"ansible: roles {', '.join(plan.tags)} (~{len(tasks)} tasks); log: {plan.log}")
    started = time.time()
    outcome = runner.run(plan, runner.ProgressView(tasks, plan.tags, say))
    result = None
    if "verify" in plan.tags:
        result = verify.fresh(verify.path_for(plan.workdir), started)
        if result is None:
            say("verify: no results from this run (the role stopped before its workloads; "
                f"see {plan.log})")
        elif show_verify is not None:
            show_verify(result)
    return outcome, result


def blocker_line(row: Any) -> str:
    """A failed doctor row as the plan shows it (no empty parentheses)."""
    return f"doctor: {row.name}: {row.observed}" + (f" ({row.advice})" if row.advice else "")


def preview(profile: Profile, state: Path, say: Say, *, only: list[str] | None = None,
            playbook: Path | None = None, ask_become_pass: bool = False,
            checks: bool = True) -> Any:
    """`kflab up --dry-run`: what `kflab up` would change, before anything changes.

    The provider describes what it would create; the roles' changes come from Ansible's
    check mode on the node where it exists (or from the role files where it cannot look),
    see lab.provision.preview. Nothing is recorded and nothing on the target changes."""
    from lab import doctor
    from lab.doctor.rows import Needs
    from lab.provision import preview as pv
    from lab.provision import runner

    provider = get_provider(profile, state)
    shown = pv.Preview(profile.name, profile.provider,
                       "this machine (with sudo)" if provider.capabilities.own_machine
                       else "the existing cluster" if profile.provider == "existing"
                       else f"VM {profile.name}")
    if checks:
        shown.blockers += [blocker_line(r) for r in
                           doctor.diagnose(Needs.from_profile(profile))
                           if r.status == "fail"]
    try:
        provider.require_tool()
    except LabError as exc:
        shown.blockers.append(str(exc))
    shown.provider_lines = provider.describe(profile)
    reachable = provider.reachable()
    gpu = profile.gpu_wanted and bool(provider.gpus())
    tags = runner.tags_for(provider.capabilities.provisions_node, gpu, profile.components, only)
    if playbook is None:  # `gpu: auto` needs the gpu role's pins only where a GPU is found
        try:
            require_pinned(runner.tags_for(provider.capabilities.provisions_node,
                                           gpu or (profile.gpu != "auto" and profile.gpu_wanted),
                                           profile.components, only))
        except LabError as exc:
            shown.blockers.append(str(exc).splitlines()[0])
    book = playbook or runner.PLAYBOOK
    extra = runner.extra_vars(profile, provider.kubeconfig(), gpu, **_pins())
    shown.roles = tags
    shown.changes = pv.static_changes(book, tags, extra)
    if not tags:
        return shown
    if not reachable:
        if profile.provider == "existing":
            source = os.path.expanduser(profile.kubeconfig)
            why = (f"no kubeconfig at {source}" if not os.path.exists(source) else
                   f"kflab copies the kubeconfig from {source} when `kflab up` runs")
            shown.check_note = (f"{why}, so check mode cannot reach the cluster; "
                                "everything below is listed from the roles' tasks")
        else:
            shown.check_note = ("the node does not exist yet, so check mode cannot look at "
                                "it; everything below is listed from the roles' tasks")
        return shown
    plan = _plan(profile, provider, state, tags, gpu, playbook, ask_become_pass)
    if plan is None:
        return shown
    plan.workdir = lab_dir(state, profile) / "dry-run"
    say(f"ansible --check --diff on {shown.target}: roles {', '.join(tags)} "
        f"(log: {plan.log})")
    pv.check(plan, shown)
    return shown


def verify_again(state: Path, say: Say, *, name: str | None = None,
                 ask_become_pass: bool = False, show_verify: VerifyView | None = None) -> Any:
    """`kflab status --verify`: run the verify role only, against the lab as it is now."""
    from lab.provision import runner

    profile, data = current(state, name)
    provider = get_provider(profile, state)
    provider.require_tool()
    if provider.status().state != "running":
        raise LabError(f"lab {profile.name} is not running", hint="start it with `kflab up`")
    gpu = profile.gpu_wanted and bool(provider.gpus())
    playbook = Path(data["playbook"]) if data.get("playbook") else None  # the one `up` used
    plan = _plan(profile, provider, state, ["verify"], gpu, playbook, ask_become_pass)
    if plan is None:
        raise LabError(f"lab {profile.name} has nothing to verify (no node, no components)")
    outcome, result = _converge(plan, say, show_verify)
    record(state, profile, verified=result.as_dict()["when"] if result else None)
    if not outcome.ok and result is None:
        raise runner.failure_error(outcome)
    return result


def last_phases(state: Path, name: str) -> dict[str, float]:
    """Seconds each phase of the lab's last `kflab up` took (create, then each role)."""
    return dict(current(state, name)[1].get("phases") or {})


def last_verify(state: Path, profile: Profile) -> Any:
    """The verify role's last results for this lab (None before the first run)."""
    from lab.provision import verify

    return verify.read(verify.path_for(state / "labs" / profile.name))


def provider_for(state: Path, name: str | None = None) -> tuple[Profile, Provider]:
    profile, _ = current(state, name)
    return profile, get_provider(profile, state)


def ssh_argv(state: Path, name: str | None = None) -> list[str]:
    """argv for `kflab ssh`, refused in one line when its program is missing."""
    import shutil

    profile, provider = provider_for(state, name)
    argv = provider.ssh_argv()
    if shutil.which(argv[0]) is None:
        raise ToolMissing(argv[0], profile.name, profile.provider,
                          "install it (Debian/Ubuntu: `sudo apt install openssh-client`)")
    return argv


def forget(state: Path, record: Path, say: Say) -> None:
    """Remove a lab's record (and its kubeconfig copy): kflab no longer knows the lab."""
    state_remove(state, record)
    state_remove(state, record.parent / "kubeconfig")
    say(f"forgot lab {record.parent.name} (record {record} removed)")


def down(state: Path, say: Say, *, destroy: bool, name: str | None = None,
         force: bool = False) -> str:
    """Stop or destroy the lab; returns stopped | destroyed | forgotten | "" (no lab).

    `destroy` + `force` always removes the record, even when the provider's tool is missing,
    the record does not parse or the node cannot be removed ("forgotten"), and says what may
    be left behind.
    """
    labs = _records(state, name)
    if not labs:
        return ""
    try:
        profile, provider = provider_for(state, name)
    except LabError as exc:
        if not (destroy and force):
            raise
        say(f"warning: {str(exc).splitlines()[0]}")
        forget(state, labs[-1], say)
        return "forgotten"
    if not destroy:
        provider.stop(say)
        record(state, profile, phase="stopped")
        return "stopped"
    try:
        provider.delete(say)
    except LabError as exc:
        if not force:
            raise
        say(f"warning: {getattr(exc, 'short', str(exc).splitlines()[0])}")
        say(f"the node was not removed: {leftovers(profile, labs[-1].parent)}")
        forget(state, labs[-1], say)
        return "forgotten"
    forget(state, labs[-1], say)
    return "destroyed"


def leftovers(profile: Profile, workdir: Path) -> str:
    """What a forced destroy may leave behind, and how to remove it by hand."""
    if profile.is_vagrant:
        return (f"its Vagrantfile stays in {workdir / 'vagrant'}; once Vagrant works, "
                "`vagrant destroy` there removes the VM (or remove it with virsh / "
                "VirtualBox Manager)")
    if profile.provider in ("host", "wsl2"):
        from lab.providers.local import UNINSTALL

        return f"k3s may still be installed: `sudo {UNINSTALL}` removes it"
    return "nothing: kflab does not own an existing cluster"


def debug_bundle(state: Path, output: Path | None, *, name: str | None = None,
                 kubeconfig: Path | None = None) -> tuple[Path, list[str]]:
    """`kflab debug bundle`: versions, the local backend's state folder (records, owners,
    progress, recent run logs), and when there is a lab its record, profile, Ansible log and
    verify results and what its cluster says (lab.debugbundle), in one redacted tar.gz.
    Works with no lab at all (the local backend), on a lab that never came up (the cluster
    part is then listed in errors.txt), and with only `kubeconfig` (a cluster kflab did not
    make)."""
    from lab import debugbundle
    from lab.components.catalog import load

    lab_folder, data = None, None
    try:
        profile, data = current(state, name)
        lab_folder = state_path(state, "labs", profile.name)
        if kubeconfig is None:
            kc = get_provider(profile, state).kubeconfig()
            kubeconfig = kc if kc.exists() else None
    except LabError:
        if name is not None:
            raise  # a lab named that does not exist: say so
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    target = output or Path.cwd() / f"kflab-debug-{stamp}.tar.gz"
    namespaces = list(dict.fromkeys(["kubeflow", load().lab_namespace]))
    return debugbundle.build(target, lab_dir=lab_folder, record=data, kubeconfig=kubeconfig,
                             namespaces=namespaces, state_root=state)
