"""The Training Operator kinds the local backend runs, each by its module's rules (its
Flavor), and a manifest of any of them read and defaulted as the operator's webhook does.

This module sits above the kinds' modules (it imports them; they never import it), so the
table below is the one place that lists them: a new kind is a module with a FLAVOR and a
line here.
"""

from __future__ import annotations

from typing import Any

from lab import limits
from lab.backends.local.training import pytorch, tensorflow, trainjob
from lab.backends.local.training.flavor import Flavor
from lab.backends.local.training.spec import (
    CLEAN_POD_POLICIES,
    RESTART_POLICIES,
    JobSpec,
    Replica,
    _command,
    _container,
    _env,
    _err,
    _gpus,
    _int,
    _mapping,
    _port,
    _short,
)

FLAVORS: dict[str, Flavor] = {f.kind: f for f in (pytorch.FLAVOR, tensorflow.FLAVOR,
                                                  trainjob.FLAVOR)}
KINDS = tuple(FLAVORS)


def flavor_for(kind: str) -> Flavor:
    """The kind's rules (replica types, env contract, status messages); PyTorchJob's for a
    kind it does not know (the handler is only given the kinds above)."""
    return FLAVORS.get(kind, pytorch.FLAVOR)


def _replica(flavor: Flavor, rtype: str, raw: Any, where: str) -> Replica:
    raw = _mapping(raw, where)
    count = _int(raw, "replicas", where, 0,
                 (limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES"))
    policy = raw.get("restartPolicy") or flavor.default_restart
    if policy not in RESTART_POLICIES:
        raise _err(f"{where}.restartPolicy", f"unknown restart policy {_short(policy)}",
                   f"use one of {', '.join(RESTART_POLICIES)}")
    c, cwhere = _container(_mapping(raw.get("template"), f"{where}.template"), where,
                           flavor.container)
    wd = c.get("workingDir")
    image = c.get("image")
    return Replica(rtype, 1 if count is None else count, policy, _command(c, cwhere),
                   _env(c, cwhere), str(wd) if wd else None, _gpus(c, cwhere),
                   _port(c, cwhere, flavor.port_name, flavor.default_port),
                   str(image) if image is not None else None, cwhere, c)


def _check_service_names(name: str, replicas: dict[str, Replica]) -> None:
    """The operator makes a headless Service `<job>-<type>-<index>` per replica; a Service
    name is a DNS-1035 label of at most 63 characters, so long job names cannot run."""
    for rep in replicas.values():
        longest = f"{name}-{rep.type.lower()}-{max(rep.replicas - 1, 0)}"
        if len(longest) > 63:
            keep = 63 - (len(longest) - len(name))
            raise _err("metadata.name", f"the replica Service '{longest}' would be "
                       f"{len(longest)} characters long; a Service name is at most 63",
                       f"shorten the job's name to at most {max(keep, 1)} characters")


def replica_type(flavor: Flavor, key: Any) -> str | None:
    """The canonical replica type for a key in any case, as the operator camel-cases them
    (setTypeNameToCamelCase: 'worker' -> Worker, 'ps' -> PS); None when unknown."""
    return next((t for t in flavor.replica_types if t.lower() == str(key).lower()), None)


def parse(obj: dict[str, Any]) -> JobSpec:
    """Validate and default a PyTorchJob or TFJob; raises InputError naming the field."""
    flavor = flavor_for(str(obj.get("kind")))
    if flavor.own_parser:
        return flavor.parse_object(obj)
    meta = obj["metadata"]
    spec = _mapping(obj.get("spec"), "spec")
    key = flavor.specs_key
    raw_specs = _mapping(spec.get(key), f"spec.{key}")
    if not raw_specs:
        raise _err(f"spec.{key}", "missing", flavor.missing_hint)
    replicas: dict[str, Replica] = {}
    for rkey, raw in raw_specs.items():
        rtype = replica_type(flavor, rkey)
        if rtype is None:
            raise _err(f"spec.{key}.{rkey}", "unknown replica type",
                       f"use {', '.join(flavor.replica_types)}")
        replicas[rtype] = _replica(flavor, rtype, raw, f"spec.{key}.{rkey}")
    run = _mapping(spec.get("runPolicy"), "spec.runPolicy")
    clean = run.get("cleanPodPolicy") or "None"
    if clean not in CLEAN_POD_POLICIES:
        raise _err("spec.runPolicy.cleanPodPolicy", f"unknown policy {_short(clean)}",
                   f"use one of {', '.join(CLEAN_POD_POLICIES)}")
    ignored = tuple(f"runPolicy.{k}" for k in ("schedulingPolicy", "ttlSecondsAfterFinished",
                                                "suspend", "managedBy")
                    if run.get(k) is not None)
    job = JobSpec(meta["name"], meta.get("namespace", "default"), replicas,
                  _int(run, "backoffLimit", "spec.runPolicy"),
                  _int(run, "activeDeadlineSeconds", "spec.runPolicy", 1,
                       (limits.INT64_MAX, "INT64_MAX")), clean, kind=flavor.kind,
                  ignored=ignored, flavor=flavor)
    job = flavor.parse_spec(job, spec)
    _check_service_names(str(meta["name"]), replicas)
    flavor.check_processes(job)
    return job


def apply_defaults(obj: dict[str, Any], job: JobSpec) -> None:
    """Write the webhook's defaults into the stored object, as `kubectl get -o yaml` shows."""
    flavor = job.flavor
    if flavor.own_parser:
        flavor.apply_defaults(obj, job)
        return
    spec = obj.setdefault("spec", {})
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", job.clean_pod_policy)
    specs = spec[flavor.specs_key]
    for key in list(specs):
        rtype = replica_type(flavor, key)
        assert rtype is not None  # parse() refused unknown types
        specs[rtype] = specs.pop(key)
        specs[rtype].setdefault("replicas", job.replicas[rtype].replicas)
        specs[rtype].setdefault("restartPolicy", job.replicas[rtype].restart_policy)
    flavor.apply_defaults(obj, job)
