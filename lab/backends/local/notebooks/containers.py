"""A Notebook whose image kflab does not run as JupyterLab here: a container of that image.

As the Notebook controller runs it (v1.10 notebook_controller.go generateStatefulSet): the
first container, with NB_PREFIX=/notebook/NAMESPACE/NAME in its env, serving on its first
containerPort (8888, DefaultContainerPort, when it names none) behind a Service on port 80.
Locally that port is published on 127.0.0.1 only, the manifest's folder is mounted at
`<workingDir or /home/jovyan>/lab-files` (where the cluster backend's ConfigMap puts it;
writable here, so the learner's edits stay in the folder), and the server is Ready once its
readinessProbe answers, or it answers HTTP at NB_PREFIX. Kubeflow's images serve without a
token behind Kubeflow's login; on 127.0.0.1 only this machine's users can reach it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab import state
from lab.backends.local.containers import choice, images, probe, workload
from lab.backends.local.containers import spec as cspec
from lab.backends.local.containers.engine import Engine
from lab.backends.local.notebooks.spec import NotebookSpec
from lab.backends.local.procs import LOOPBACK, free_port
from lab.backends.local.runners import Mount

WHERE = "spec.template.spec.containers[0]"
DEFAULT_PORT = 8888  # the controller's DefaultContainerPort
HOME = "/home/jovyan"  # its default workingDir (the cluster backend mounts lab-files there)
# container fields its container honours (listed as cluster-only for a JupyterLab process)
HONOURED = ("image", "imagePullPolicy", "command", "args", "workingDir", "ports",
            "readinessProbe", "memory")


def engine_for(obj: dict[str, Any]) -> Engine | None:
    """The engine for the Notebook's image, or None when JupyterLab runs here."""
    first = ((((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers") or [{}])[0]
    image = first.get("image") if isinstance(first, dict) else None
    return choice.engine_for([(f"{WHERE}.image", image)], obj,
                             f"Notebook {obj['metadata'].get('name')}")


def first_container(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]["containers"][0]


def preflight(engine: Engine, obj: dict[str, Any], parsed: NotebookSpec) -> cspec.ContainerSpec:
    env = [*parsed.env, ("NB_PREFIX", parsed.prefix)]
    cs = cspec.read(first_container(obj), WHERE, env=env)
    images.preflight(engine, cs.image, cs.pull_policy, where=f"{WHERE}.image")
    return cs


def start(backend: Any, engine: Engine, obj: dict[str, Any], parsed: NotebookSpec,
          base_dir: Path, gpus: list[str], pid_id: str, info_file: Path, log: Path) -> Any:
    """Pull as the policy asks, then start the container as a tracked background process."""
    cs = preflight(engine, obj, parsed)
    if note := workload.limits_note(engine, [cs]):
        backend.emit({"event": "message", "text": note})
    images.ensure(engine, cs.image, cs.pull_policy, where=f"{WHERE}.image", emit=backend.emit)
    port = cs.ports[0] if cs.ports else cspec.Port(DEFAULT_PORT)
    host = port.host or free_port()
    home = (cs.working_dir or HOME).rstrip("/")
    tag = backend.procs.new_tag(pid_id)
    run = workload.container(
        engine, cs, root=backend.root, token=tag,
        owner=f"Notebook/{parsed.namespace}/{parsed.name}", part="notebook", env=cs.env,
        base_dir=None, gpus=gpus, publish=[(host, port.container)],
        mounts=[Mount(base_dir.resolve(), f"{home}/lab-files")])
    readiness = first_container(obj).get("readinessProbe")
    state.write_json(info_file, {"host": LOOPBACK, "port": host, "token": "",
                                 "prefix": parsed.prefix, "root": str(base_dir.resolve()),
                                 "cpus": None, "gpus": gpus, "container": {
                                     "image": cs.image, "probe": readiness
                                     if isinstance(readiness, dict) else {}}})
    return backend.procs.spawn(pid_id, run.argv(), owner=f"Notebook/{parsed.namespace}/"
                               f"{parsed.name}", log=log, tag=tag)


def answers(info: dict[str, Any]) -> bool:
    port = info.get("port")
    return isinstance(port, int) and probe.answers(
        port, (info.get("container") or {}).get("probe") or {}, str(info.get("prefix", "")))
