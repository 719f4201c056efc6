"""Objects on the API server: server-side apply, get, list, delete. Plain dicts in and out.

Server-side apply (SSA) with one field manager per purpose, so the API server records who
owns which field: `kflab-install-<component>` for what `kflab up` installs, `kflab-scenario`
for a scenario's solve actions, `kflab-apply` for `kflab apply -f`. Applying the same object
twice changes nothing (same resourceVersion). A field that another manager owns (a controller,
kubectl, another kflab purpose) is a Conflict naming that manager and the field, unless the
caller asks to force. Unknown fields are rejected, as `kubectl apply` does (fieldValidation).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lab.errors import LabError
from lab.kube.apierrors import NotFound, translated
from lab.kube.names import check_kind_name, check_manager, check_namespace

MANAGER_APPLY = "kflab-apply"  # `kflab apply -f FILE`
MANAGER_SCENARIO = "kflab-scenario"  # a scenario's solve actions
PROPAGATION = ("Background", "Foreground", "Orphan")
VALIDATION = ("Strict", "Warn", "Ignore")


def install_manager(component: str) -> str:
    """The field manager for installing `component` (`kflab-install-katib`, ...)."""
    return check_manager(f"kflab-install-{component}")


@dataclass(frozen=True)
class Ref:
    """Which object: apiVersion, kind, name and (for namespaced kinds) namespace."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    def __post_init__(self) -> None:
        if not self.api_version or not self.kind or "/" in self.kind:
            raise LabError(f"invalid apiVersion/kind {self.api_version!r}/{self.kind!r}")
        check_kind_name(self.kind, self.name)  # per kind: Katib, KServe, Training limits
        if self.namespace is not None:
            check_namespace(self.namespace)

    @classmethod
    def of(cls, obj: dict[str, Any], namespace: str | None = None) -> Ref:
        """The Ref of a manifest; `namespace` applies when the manifest names none."""
        if not isinstance(obj, dict):
            raise LabError("a Kubernetes object must be a mapping")
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        return cls(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""),
                   meta.get("name"), meta.get("namespace") or namespace)

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


def _resolve(kube: Any, ref: Ref) -> tuple[Any, str | None]:
    """The dynamic Resource and the namespace to use (None for cluster-scoped kinds)."""
    res = kube.resource(ref.api_version, ref.kind)
    if not res.namespaced:
        return res, None
    return res, ref.namespace or default_namespace(kube)


def default_namespace(kube: Any) -> str:
    """The kubeconfig context's namespace, else `default` (as kubectl)."""
    return check_namespace(getattr(kube, "namespace", None) or "default")


def _plain(result: Any) -> dict[str, Any]:
    return result.to_dict() if hasattr(result, "to_dict") else dict(result)


def apply(kube: Any, obj: dict[str, Any], *, manager: str, force: bool = False,
          namespace: str | None = None, dry_run: bool = False,
          validation: str = "Strict") -> dict[str, Any]:
    """Server-side apply `obj` as `manager`; returns the object the server holds after.

    `namespace` is used when the manifest names none; a manifest naming another one is an
    error (as kubectl). `force` takes over fields other managers own (only when asked).
    Raises Conflict (who owns which field), Invalid (schema/CEL), NotServed, Forbidden..."""
    check_manager(manager)
    if validation not in VALIDATION:
        raise LabError(f"invalid field validation {validation!r}",
                       hint=f"use one of {', '.join(VALIDATION)}")
    ref = Ref.of(obj, namespace)
    if namespace and ref.namespace != namespace:
        raise LabError(f"{ref} names namespace {ref.namespace!r}, not {namespace!r}",
                       hint="remove metadata.namespace from the manifest, or use its namespace")
    res, ns = _resolve(kube, ref)
    body = {k: v for k, v in obj.items()}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields", "uid", "creationTimestamp",
                         "generation")}
    if ns is not None:
        meta["namespace"] = ns
    else:  # cluster-scoped: a namespace in the manifest means nothing (kubectl drops it too)
        meta.pop("namespace", None)
    body["metadata"] = meta
    params: dict[str, Any] = {"field_manager": manager,
                              "query_params": [("fieldValidation", validation)]}
    if force:
        params["force_conflicts"] = True
    if dry_run:
        params["dry_run"] = "All"
    with translated("apply", str(Ref(ref.api_version, ref.kind, ref.name, ns))):
        out = kube.dynamic.server_side_apply(res, body=body, namespace=ns, **params)
    return _plain(out)


def get(kube: Any, ref: Ref, *, missing_ok: bool = False) -> dict[str, Any] | None:
    """The object, or None when it does not exist and `missing_ok` (else NotFound)."""
    res, ns = _resolve(kube, ref)
    try:
        with translated("get", str(Ref(ref.api_version, ref.kind, ref.name, ns))):
            return _plain(kube.dynamic.get(res, name=ref.name, namespace=ns))
    except NotFound:
        if missing_ok:
            return None
        raise


def list_objects(kube: Any, api_version: str, kind: str, namespace: str | None = None, *,
                 label_selector: str | None = None, field_selector: str | None = None,
                 page: int = 500) -> list[dict[str, Any]]:
    """Every object of a kind: in `namespace`, or in all namespaces when None (pages of
    `page`, following the server's continue token). Cluster-scoped kinds ignore namespace."""
    if namespace is not None:
        check_namespace(namespace)
    res = kube.resource(api_version, kind)
    ns = namespace if res.namespaced else None
    where = f" in namespace {ns}" if ns else ""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        with translated("list", f"{res.kind} ({api_version}){where}"):
            out = kube.dynamic.get(res, namespace=ns, label_selector=label_selector,
                                   field_selector=field_selector, limit=page, _continue=token)
        data = _plain(out)
        for item in data.get("items") or []:
            # List items carry no apiVersion/kind; give them theirs so they round-trip.
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", res.kind)
            items.append(item)
        token = (data.get("metadata") or {}).get("continue")
        if not token:
            return items


def delete(kube: Any, ref: Ref, *, propagation: str = "Background",
           missing_ok: bool = True) -> bool:
    """Ask the server to delete; True when it accepted, False when it was already gone.

    `propagation`: Background (dependents go after), Foreground (the object stays, with a
    deletionTimestamp, until its dependents are gone) or Orphan. The object may still
    exist on return (finalizers, Foreground): use watch.wait_deleted to wait for it."""
    if propagation not in PROPAGATION:
        raise LabError(f"invalid propagation policy {propagation!r}",
                       hint=f"use one of {', '.join(PROPAGATION)}")
    res, ns = _resolve(kube, ref)
    try:
        with translated("delete", str(Ref(ref.api_version, ref.kind, ref.name, ns))):
            kube.dynamic.delete(res, name=ref.name, namespace=ns,
                                body={"apiVersion": "v1", "kind": "DeleteOptions",
                                      "propagationPolicy": propagation})
    except NotFound:
        if missing_ok:
            return False
        raise
    return True


def owners(obj: dict[str, Any]) -> dict[str, list[str]]:
    """Field manager -> the top-level field paths it owns (from metadata.managedFields),
    e.g. {'kflab-apply': ['spec'], 'katib-controller': ['status']}: for messages and tests."""
    out: dict[str, list[str]] = {}
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        fields = entry.get("fieldsV1") or {}
        tops = sorted(k[2:] for k in fields if k.startswith("f:"))
        sub = entry.get("subresource")
        out.setdefault(str(entry.get("manager")), []).extend(
            f"{sub}:{t}" if sub else t for t in tops)
    return out


def apply_all(kube: Any, objs: Iterable[dict[str, Any]], *, manager: str,
              force: bool = False, namespace: str | None = None) -> list[dict[str, Any]]:
    """Apply several objects in order (each validated by the server as it goes)."""
    return [apply(kube, o, manager=manager, force=force, namespace=namespace) for o in objs]
