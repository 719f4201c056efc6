"""What every Kubernetes-kind handler of the cluster backend does the same way: ship the work
folder, apply server-side (replacing a run-to-completion object whose spec changed, as the
local backend replaces it), wait on the controller's conditions, read pod logs."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lab.backends.cluster import workload
from lab.errors import LabError

Status = dict[str, Any]


def files_name(kind: str, name: str) -> str:
    return f"kflab-files-{kind.lower()}-{name}"[:253].rstrip("-.")


def files_for(kind: str, name: str, base_dir: Path, *, subdir: str = "",
              with_runner: bool = True) -> tuple[str, workload.Files]:
    """The ConfigMap name and the files of the work folder (or `subdir` of it)."""
    return files_name(kind, name), workload.snapshot(base_dir, subdir=subdir,
                                                     with_runner=with_runner)


def ship_files(backend: Any, kind: str, name: str, namespace: str, cm_name: str,
               files: workload.Files) -> None:
    """Put the files in their ConfigMap in `namespace` (server-side apply)."""
    from lab.kube.objects import apply

    backend.ensure_namespace(namespace)
    apply(backend.kube, workload.configmap(cm_name, namespace, files,
                                           {"kflab.dev/for": f"{kind.lower()}.{name}"[:63]}),
          manager=backend.manager, force=True, dry_run=backend.dry_run)


def own(backend: Any, cm_name: str, owner: dict[str, Any]) -> None:
    """Make the ConfigMap a dependent of the object it serves: the garbage collector deletes
    it with the object (kubectl delete included)."""
    from lab.kube.objects import apply

    if backend.dry_run:
        return
    meta = owner["metadata"]
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
           "uid": meta["uid"]}
    patch = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": cm_name, "namespace": meta["namespace"],
                          "ownerReferences": [ref]}}
    apply(backend.kube, patch, manager=f"{backend.manager}-owner", force=True)


def apply_object(backend: Any, obj: dict[str, Any], *, replace_changed: bool) -> dict[str, Any]:
    """Server-side apply as the backend's field manager. With `replace_changed`, an existing
    object whose spec would change is deleted first (Katib and the Training Operator refuse
    most spec changes of a running object; a learner re-applying means "run this instead")."""
    from lab.kube.apierrors import Invalid
    from lab.kube.objects import Ref, apply, delete, get
    from lab.kube.watch import wait_deleted

    kube = backend.kube
    ref = Ref.of(obj)
    backend.ensure_namespace(ref.namespace)
    if backend.dry_run:  # validated by the server (schema, CEL, webhooks), nothing stored
        return apply(kube, obj, manager=backend.manager, force=backend.force, dry_run=True)
    live = get(kube, ref, missing_ok=True) if replace_changed else None
    if live is not None:
        try:
            planned = apply(kube, copy.deepcopy(obj), manager=backend.manager,
                            force=backend.force, dry_run=True)
            changed = planned.get("spec") != live.get("spec")
        except Invalid:  # e.g. a webhook refusing the spec change: replace it
            changed = True
        if changed:
            backend.say(f"{ref}: the spec changed; deleting the old one first")
            delete(kube, ref, propagation="Foreground")
            wait_deleted(kube, ref, timeout=300)
    return apply(kube, obj, manager=backend.manager, force=backend.force)


def conditions_true(obj: dict[str, Any] | None, *types: str) -> str | None:
    """The first of `types` whose condition is True, else None."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") in types and c.get("status") == "True":
            return str(c["type"])
    return None


def wait(backend: Any, obj: dict[str, Any], done: Callable[[dict[str, Any] | None], bool], *,
         timeout: float, describe: str) -> dict[str, Any]:
    """Wait on the object's watch until `done`; the final object (never None)."""
    from lab.kube.objects import Ref
    from lab.kube.watch import wait_for

    if backend.dry_run:
        return obj
    ref = Ref.of(obj)
    backend.say(f"waiting for {ref} to {describe} (up to {timeout:g}s)")
    out = wait_for(backend.kube, ref, done, timeout=timeout, describe=describe,
                   fail=lambda o: "it was deleted" if o is None else None)
    if out is None:
        raise LabError(f"{ref} disappeared while waiting")
    return out


def delete_with_files(backend: Any, kind: str, name: str, namespace: str) -> bool:
    """Delete the object (its dependents go in the background) and its files ConfigMap."""
    from lab.kube.objects import Ref, delete

    existed = delete(backend.kube, backend.ref(kind, name, namespace), propagation="Background")
    delete(backend.kube, Ref("v1", "ConfigMap", files_name(kind, name), namespace))
    return existed


def pod_lines(backend: Any, namespace: str, selector: str, container: str | None = None,
              *, follow: bool = False, tail: int | None = None,
              only: set[str] | None = None) -> Iterator[str]:
    """Lines of every pod matching `selector` (several pods: each line says which); `tail`
    lines of each, `follow` streams them; `only` keeps those pods (by name)."""
    from lab.kube.logs import pod_logs, pods

    found = pods(backend.kube, namespace, selector)
    if only is not None:
        found = [p for p in found if p["metadata"]["name"] in only]
    many = len(found) > 1
    for source, line in pod_logs(backend.kube, namespace, selector, container=container,
                                 follow=follow, tail=tail, only=only):
        yield f"[{source}] {line}" if many else line


def deep(obj: dict[str, Any], *path: str) -> Any:
    """obj[path[0]][path[1]]... or None."""
    cur: Any = obj
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur
