"""The kubeflow role applies a component in two steps: everything but its own custom
resources, then -- once the Deployments serving its admission webhooks are Available -- the
custom resources those webhooks check (instead of a fixed 30 x 10 s retry of the whole
render). The split runs on the real renders of the lab profile (kustomize over ../shared);
the wait's budget grows while images pull (files/kflab_wait_ready.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

ROLE = REPO / "playbooks" / "roles" / "kubeflow"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # a 5 MB render: seconds, not a minute
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


split = _load(ROLE / "filter_plugins" / "kflab_render.py", "kflab_render").split_render
wait = _load(ROLE / "files" / "kflab_wait_ready.py", "kflab_wait_ready")


def _render_text(name: str) -> str:
    from lab.components.catalog import load
    from lab.components.render import render
    from tests.conftest import need_upstream

    upstream = need_upstream("kubeflow-manifests-26.03")
    return yaml.dump_all(render(load().get(name).overlay, upstream), Dumper=DUMPER,
                         sort_keys=False)


@pytest.mark.parametrize(("component", "webhook", "custom_kind"), [
    ("kserve", "kubeflow/kserve-controller-manager", "ClusterServingRuntime"),
])
def test_a_components_own_custom_resources_wait_for_its_webhook(
        component: str, webhook: str, custom_kind: str) -> None:
    text = _render_text(component)  # kustomize over KServe: several seconds, once
    out = split(text)
    base = list(yaml.load_all(out["base"], Loader=LOADER))
    custom = list(yaml.load_all(out["custom"], Loader=LOADER))
    assert webhook in out["webhooks"], out["webhooks"]
    assert custom_kind in {d["kind"] for d in custom}
    assert all(d["apiVersion"].startswith("serving.kserve.io/") for d in custom)
    kinds = {d["kind"] for d in base}
    # what the webhook needs to start is in the first apply: its Deployment, its Service,
    # its certificate (cert-manager's group: cert-manager's webhook already serves)
    assert {"CustomResourceDefinition", "Deployment", "Service", "Certificate"} <= kinds
    assert len(base) + len(custom) == len(list(yaml.load_all(text, Loader=LOADER)))


def _pod(name: str, reason: str | None, phase: str = "Pending") -> dict:
    state = {"waiting": {"reason": reason}} if reason else {"running": {}}
    return {"metadata": {"name": name}, "status": {"phase": phase, "containerStatuses": [
        {"name": "main", "state": state}]}}


def test_the_budget_grows_while_images_pull_and_never_past_the_maximum() -> None:
    pods = [_pod("a", "ContainerCreating"), _pod("b", "ImagePullBackOff"),
            _pod("c", None, "Running")]
    pulling, stuck = wait.waiting(pods)
    assert pulling == 1 and stuck == ["b/main: ImagePullBackOff"]
    unschedulable = {"metadata": {"name": "d"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    assert wait.waiting([unschedulable]) == (0, ["d: Unschedulable"])  # no extension
    start = 1000.0
    # two images still pulling at t=+550 with a 600 s base: pushed to +550 + 2 x 300
    assert wait.deadline_after(start + 600, start + 550, start, 2, 300, 3600) == start + 1150
    # nothing pulling: the deadline stays; a back-off does not extend it
    assert wait.deadline_after(start + 600, start + 550, start, 0, 300, 3600) == start + 600
    # never past the maximum
    assert wait.deadline_after(start + 600, start + 3500, start, 4, 300, 3600) == start + 3600


def test_the_role_no_longer_retries_a_whole_render_for_five_minutes() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["kubeflow_apply_retries"] * defaults["kubeflow_apply_delay_s"] <= 60
    tasks = yaml.safe_load((ROLE / "tasks" / "component.yml").read_text())
    names = [t["name"].split(":")[0] for t in tasks]
    first = names.index("Apply server-side, all but its custom resources")
    hooks = names.index("Wait for its webhook Deployments")
    custom = names.index("Apply server-side, its custom resources")
    assert first < hooks < custom
