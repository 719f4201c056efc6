"""`kflab up` and `kflab down`: provider first, then the playbook; a record of each run.

The record (<state>/labs/<name>/lab.json) lets `status`, `ssh`, `kubeconfig`, `open` and
`down` find the lab without the profile, and tells a re-run where the last one stopped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from lab.config import Profile, profile_to_data
from lab.errors import LabError
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


def current(state: Path, name: str | None = None) -> tuple[Profile, dict[str, Any]]:
    """The lab a command acts on: the named one, else the only one (or the newest)."""
    from lab.config import validate

    labs = sorted((state / "labs").glob("*/lab.json"), key=lambda p: p.stat().st_mtime)
    if name:
        labs = [p for p in labs if p.parent.name == name]
    if not labs:
        raise LabError("no lab here yet" + (f" named {name}" if name else ""),
                       hint="create one with `kflab up`")
    data = read_json(labs[-1]) or {}
    return validate(data.get("profile"), str(labs[-1])), data


def preflight(profile: Profile) -> None:
    """Refuse to start when `kflab doctor` has a failing row for this profile."""
    from lab import doctor

    bad = [r for r in doctor.diagnose(doctor.Needs.from_profile(profile)) if r.status == "fail"]
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


def up(profile: Profile, state: Path, say: Say, *, only: list[str] | None = None,
       playbook: Path | None = None, ask_become_pass: bool = False,
       force: bool = False) -> dict[str, Any]:
    """Create the node, then converge it with the playbook. Safe to re-run after a failure."""
    from lab.components.catalog import github_url, versions_file
    from lab.provision import runner

    if not force:
        preflight(profile)

    provider = get_provider(profile, state)
    pins = {"versions_file": versions_file(), "github_url": github_url()}  # checked up front
    if playbook is None:  # our own roles: their downloads must be pinned
        require_pinned(runner.tags_for(provider.capabilities.provisions_node,
                                       profile.gpu_wanted, profile.components, only))
    workdir = lab_dir(state, profile)
    t0 = time.monotonic()
    record(state, profile, phase="create", ok=False)
    provider.create(profile, say)
    record(state, profile, phase="playbook", ok=False, created=True)
    gpu = profile.gpu_wanted and bool(provider.gpus())
    tags = runner.tags_for(provider.capabilities.provisions_node, gpu, profile.components, only)
    inventory = provider.inventory()
    if not tags or inventory is None:
        say("nothing to provision")
        record(state, profile, phase="ready", ok=True)
        return {"seconds": time.monotonic() - t0, "tags": []}
    plan = runner.Plan(inventory=inventory,
                       extra_vars=runner.extra_vars(profile, provider.kubeconfig(), gpu, **pins),
                       tags=tags, workdir=workdir, playbook=playbook or runner.PLAYBOOK,
                       host_name=profile.name, become_password=ask_become_pass)
    if not plan.playbook.exists():
        raise LabError(f"playbook {plan.playbook} is missing",
                       hint="reinstall kflab, or pass --playbook")
    tasks = runner.list_tasks(plan)
    say(f"ansible: roles {', '.join(tags)} (~{len(tasks)} tasks); log: {plan.log}")
    outcome = runner.run(plan, runner.ProgressView(tasks, tags, say))
    record(state, profile, phase="ready" if outcome.ok else "playbook", ok=outcome.ok,
           tags=tags, log=str(outcome.log), failed=outcome.failed)
    if not outcome.ok:
        raise runner.failure_error(outcome)
    kc = provider.kubeconfig()
    if kc.exists():
        os.chmod(kc, 0o600)
        if "verify" in tags:  # the lab answered its checks: workloads default to it
            record(state, profile, backend={"name": "cluster", "kubeconfig": str(kc),
                                            "context": None, "verified_at": now()})
    return {"seconds": time.monotonic() - t0, "tags": tags, "log": str(outcome.log)}


def provider_for(state: Path, name: str | None = None) -> tuple[Profile, Provider]:
    profile, _ = current(state, name)
    return profile, get_provider(profile, state)


def down(state: Path, say: Say, *, destroy: bool, name: str | None = None) -> bool:
    """Stop (or destroy) the lab if there is one; False when there was none."""
    try:
        profile, provider = provider_for(state, name)
    except LabError:
        return False
    if destroy:
        provider.delete(say)
        state_remove(state, record_path(state, profile.name))
    else:
        provider.stop(say)
        record(state, profile, phase="stopped")
    return True
