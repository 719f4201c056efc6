"""A Katib trial in a container of its image, with Katib's metrics collectors reading it.

As Katib's pod webhook prepares a trial pod (pkg/webhook/v1beta1/pod/inject_webhook.go):
- the primary container gets KATIB_TRIAL_NAME;
- the File collector's folder (`filepath.Dir(path)`) and the TensorFlowEvent collector's
  folder are an empty volume mounted in the pod; here that volume is the trial's own host
  folder (`<trial>/metrics`), bind-mounted at the same path inside the container, so the
  trial writes /katib/mnist.log without any root-owned /katib on the host, trials running
  side by side never share a file, and kflab reads the file from the host folder;
- the StdOut collector reads the container's output (the trial's log).

Which engine the trials need (none: they run as local processes) and every image they run,
pulled once for the whole experiment, are here too.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.local.containers import engine as engines
from lab.backends.local.containers import images, workload
from lab.backends.local.containers import spec as cspec
from lab.backends.local.containers.engine import Engine
from lab.backends.local.procs import ChildGroup
from lab.backends.local.runners import Mount
from lab.backends.local.tuning.spec import Spec
from lab.errors import LabError


def collector_mount(engine: Engine, spec: Spec, container: cspec.ContainerSpec,
                    private: Path) -> tuple[list[Mount], Path | None]:
    """(the mounts for the collector's folder, the host path kflab reads metrics from;
    None for the StdOut collector, which reads the trial's log)."""
    coll = spec.collector
    if coll.kind not in ("File", "TensorFlowEvent"):
        return [], None
    path = str(coll.path)
    if not posixpath.isabs(path):  # relative to the container's working folder
        base = workload.workdir(container) or images.ensure(
            engine, container.image, container.pull_policy, where=container.where).workdir
        path = posixpath.join(base or "/", path)
    path = posixpath.normpath(path)
    private.mkdir(parents=True, exist_ok=True)
    if coll.kind == "File":
        return [Mount(private, posixpath.dirname(path) or "/")], private / posixpath.basename(path)
    return [Mount(private, path)], private


def trial_env(container: dict[str, Any], name: str) -> list[tuple[str, str]]:
    """The primary container's own variables, then Katib's KATIB_TRIAL_NAME."""
    env = [(str(e["name"]), str(e.get("value", ""))) for e in container.get("env") or []
           if isinstance(e, dict) and "name" in e and "valueFrom" not in e]
    return [*env, ("KATIB_TRIAL_NAME", name)]


def launch(group: ChildGroup, engine: Engine, spec: Spec, runspec: dict[str, Any], name: str,
           log: Path, base_dir: Path, private: Path, root: Path,
           gpus: list[str] | None) -> tuple[Any, Path, str | None]:
    """Start the trial's primary container; (its run client, the metrics source, a problem
    that kept it from starting)."""
    container: Any = runspec
    for key in spec.container_path:
        container = container[key]
    where = "spec.trialTemplate.trialSpec." + ".".join(
        f"[{k}]" if isinstance(k, int) else k for k in spec.container_path).replace(".[", "[")
    env = trial_env(container, name)
    try:
        cs = cspec.read(container, where, env=env)
        mounts, found = collector_mount(engine, spec, cs, private)
    except LabError as exc:  # a bad quantity, a missing image: the trial fails naming it
        return None, log, str(exc).splitlines()[0]
    source = found if found is not None else log
    run = workload.container(engine, cs, root=root, token=str(group.tag),
                             owner=f"Trial/{spec.namespace}/{name}", part="trial", env=env,
                             base_dir=base_dir, gpus=gpus or (), mounts=mounts)
    with open(log, "ab") as fh:
        try:
            return run.start(group, name, fh), source, None
        except LabError as exc:  # a path the engine cannot mount
            return None, source, str(exc).splitlines()[0]
        except OSError as exc:
            return None, source, f"cannot start {engine.path}: {exc.strerror}"


def trial_engine(spec: Spec) -> Engine | None:
    """The engine for the trials' containers (None: they are local processes); refuses,
    naming Podman or Docker, when the image needs one that is missing or stopped."""
    if spec.container_image is None:
        return None
    where, image = spec.container_image
    return engines.require(f"experiment '{spec.name}': the trials' image {image} ({where})")


def policies(spec: Spec) -> Iterator[tuple[str, str, str]]:
    """(field, image, imagePullPolicy) of every image the trials run."""
    for where, image in spec.images:
        if not isinstance(image, str) or not image:
            continue
        node: Any = spec.trial_spec
        path = where.removeprefix("spec.trialTemplate.trialSpec").removesuffix(".image")
        for part in filter(None, path.replace("[", ".").replace("]", "").split(".")):
            node = node[int(part)] if part.isdigit() else node[part]
        yield where, image, str(node.get("imagePullPolicy") or images.default_policy(image))


def pull_images(engine: Engine, spec: Spec, emit: Any) -> None:
    """Every image the trials run, present as its imagePullPolicy asks: pulled once for the
    whole experiment (images.ensure remembers), never once per trial."""
    with contextlib.suppress(LabError):  # a bad quantity fails the trial, naming it
        if note := workload.limits_note(engine, [cspec.read(spec.container, "the trials'")]):
            emit({"event": "message", "text": note})
    for where, image, policy in policies(spec):
        images.ensure(engine, image, policy, where=where, emit=emit)
