#!/usr/bin/env python3
"""Wait until Deployments are Available, with a budget that grows while images still pull.

A fixed timeout is wrong both ways: on a fast link a broken pod waits the whole budget, on a
slow one a 1.5 GB image is still pulling when the budget ends. Here the wait ends when every
Deployment is Available; otherwise at the deadline, which starts at --base seconds and, while
any of their pods has a container still being created (its image pulling: ContainerCreating,
PodInitializing), is pushed to at least --per-pull seconds per such container from now,
never past --max seconds in all. A container that cannot pull (ErrImagePull,
ImagePullBackOff) or crashes does not extend it; it is named in the message.

Usage: kflab_wait_ready.py KUBECTL_JSON BASE PER_PULL MAX NS/NAME [NS/NAME...]
(KUBECTL_JSON: the kubectl argv prefix as JSON, e.g. '["k3s", "kubectl"]').
Standard library only: it runs with the node's python3. Exit 0 when all are Available.
"""

import json
import subprocess
import sys
import time

PULLING = ("ContainerCreating", "PodInitializing")
POLL_S = 5.0


def available(deployment):
    for c in (deployment.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Available":
            return c.get("status") == "True"
    return False


def matches(pod, selector):
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def waiting(pods):
    """(containers still pulling, [pod/container: reason] of the others that wait)."""
    pulling, stuck = 0, []
    for pod in pods:
        status = pod.get("status") or {}
        name = (pod.get("metadata") or {}).get("name", "?")
        for cs in (status.get("initContainerStatuses") or []) + \
                (status.get("containerStatuses") or []):
            reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
            if reason in PULLING:
                pulling += 1
            elif reason:
                stuck.append(f"{name}/{cs.get('name')}: {reason}")
        unscheduled = next((c for c in status.get("conditions") or []
                            if c.get("type") == "PodScheduled" and c.get("status") == "False"),
                           None)
        if unscheduled is not None:
            stuck.append(f"{name}: {unscheduled.get('reason') or 'Unschedulable'}")
        elif not status.get("containerStatuses") and status.get("phase") == "Pending":
            pulling += 1  # scheduled, not started yet: volumes, or the first pull
    return pulling, stuck


def deadline_after(deadline, now, start, pulling, per_pull, most):
    """The new deadline: at least per_pull s per container still pulling, never past max."""
    if pulling:
        deadline = max(deadline, now + per_pull * pulling)
    return min(deadline, start + most)


def _get(kubectl, *args):
    out = subprocess.run(kubectl + list(args) + ["-o", "json"], capture_output=True, text=True,
                         timeout=60, check=False)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    kubectl = json.loads(argv[0])
    base, per_pull, most = float(argv[1]), float(argv[2]), float(argv[3])
    refs = [r.split("/", 1) for r in argv[4:]]
    start = time.monotonic()
    deadline = start + base
    while True:
        pending, pods = [], []
        for ns, name in refs:
            dep = _get(kubectl, "-n", ns, "get", "deployment", name)
            if dep is None or not available(dep):
                pending.append(f"{ns}/{name}")
                selector = ((dep or {}).get("spec") or {}).get("selector", {}).get(
                    "matchLabels") or {}
                listed = _get(kubectl, "-n", ns, "get", "pods") or {}
                pods += [p for p in listed.get("items") or [] if selector and matches(p, selector)]
        now = time.monotonic()
        if not pending:
            print(f"available after {now - start:.0f}s: {', '.join('/'.join(r) for r in refs)}")
            return 0
        pulling, stuck = waiting(pods)
        deadline = deadline_after(deadline, now, start, pulling, per_pull, most)
        if now >= deadline:
            print(f"not Available after {now - start:.0f}s: {', '.join(pending)}"
                  + (f"; waiting: {'; '.join(stuck)}" if stuck else "")
                  + (f"; {pulling} container(s) still pulling their image" if pulling else "")
                  + " (kubectl -n NAMESPACE describe pod, kflab debug bundle)", file=sys.stderr)
            return 1
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
