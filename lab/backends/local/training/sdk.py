"""The Kubeflow SDK's TrainerClient on kflab's local backend: the SDK's own code, our store.

The SDK (`pip install kubeflow`, 0.5.0) drives a cluster through two Kubernetes API objects,
`custom_api` (TrainJobs and runtimes) and `core_api` (the nodes' pods and their logs). Here
its KubernetesBackend runs unchanged -- it builds the TrainJob from `CustomTrainer(func=...)`
exactly as it would for a cluster -- with those two objects answered by the local backend:
a created TrainJob is `kflab apply`-ed (numNodes node processes, PET_* env, the same status
as upstream), and reads come from the local store. What a cluster adds and the local backend
has no object for is derived, and said here:
- the runtime: the shipped ClusterTrainingRuntime from runtimes.py (name, framework label,
  ML policy, the `node` container and its image);
- the pods: one per node, named as the Job controller names them (`<job>-node-0-<i>`),
  labelled as JobSet labels them, with a phase read from the TrainJob's status (Complete:
  Succeeded, Failed: Failed, an active Job: Running, else Pending);
- events: none (the local backend records none);
- logs: `read_namespaced_pod_log` answers the node's log; with `follow=True` and
  `_preload_content=False` (kubernetes.watch.Watch().stream, which the SDK's
  `get_job_logs(follow=True)` uses) a response whose `stream()` yields lines while the node
  runs and ends when the job does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lab.backends.local.training.runtimes import CLUSTER_RUNTIME, GROUP, SHIPPED
from lab.deps import install_extras
from lab.errors import LabError

VERSION = "v1alpha1"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"


class _Done:
    """What `async_req=True` returns: a result with .get(timeout)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        try:
            self.value, self.error = fn(), None
        except Exception as exc:  # re-raised by get(), as the thread pool would
            self.value, self.error = None, exc

    def get(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class _Answer:
    """A response object with to_dict(), as the kubernetes client's models have."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return self.data


def _not_found(what: str) -> Exception:
    from kubernetes.client.exceptions import ApiException

    return ApiException(status=404, reason=f"{what} not found")


def runtime_object(name: str) -> dict[str, Any]:
    """The ClusterTrainingRuntime the manifests install, in the fields the SDK reads."""
    rt = SHIPPED.get(name)
    if rt is None or rt.image is None:
        raise _not_found(f"clustertrainingruntimes.{GROUP} {name!r}")
    policy: dict[str, Any] = {"numNodes": rt.num_nodes}
    if rt.nproc_per_node is not None:
        policy["torch"] = {"numProcPerNode": rt.nproc_per_node}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": CLUSTER_RUNTIME,
            "metadata": {"name": name, "labels": {f"{GROUP}/framework": rt.framework}},
            "spec": {"mlPolicy": policy, "template": {"spec": {"replicatedJobs": [
                {"name": "node", "replicas": 1, "template": {
                    "metadata": {"labels": {f"{GROUP}/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [
                        {"name": "node", "image": rt.image}]}}}}}]}}}}


class CustomObjects:
    """The calls of kubernetes.client.CustomObjectsApi the SDK makes, on the local store."""

    def __init__(self, backend: Any, base_dir: Path | None) -> None:
        self.backend, self.base_dir = backend, base_dir

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str,
                                  async_req: bool = False) -> Any:
        return self._maybe(lambda: runtime_object(name), async_req)

    def list_cluster_custom_object(self, group: str, version: str, plural: str,
                                   async_req: bool = False, **_: Any) -> Any:
        items = [runtime_object(n) for n, r in SHIPPED.items() if r.image and not r.refused]
        return self._maybe(lambda: {"items": items}, async_req)

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                     plural: str, name: str, async_req: bool = False) -> Any:
        def get() -> dict[str, Any]:
            obj = self.backend.get("TrainJob", name, namespace) \
                if plural == "trainjobs" else None
            if obj is None:
                raise _not_found(f"{plural}.{group} {namespace}/{name}")
            return obj
        return self._maybe(get, async_req)

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                      plural: str, async_req: bool = False, **_: Any) -> Any:
        def items() -> dict[str, Any]:
            if plural != "trainjobs":
                raise _not_found(f"{plural}.{group}")  # no namespaced TrainingRuntimes here
            return {"items": self.backend.list("TrainJob", namespace)}
        return self._maybe(items, async_req)

    def create_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                        plural: str, body: dict[str, Any], **_: Any) -> Any:
        obj = _drop_none(body)
        obj.setdefault("metadata", {})["namespace"] = namespace
        base_dir = self.base_dir
        if base_dir is None:  # each job's own folder: a pod's filesystem is its own
            self.backend.validate(obj, base_dir=Path.cwd())  # the name, before a folder
            base_dir = self.backend.store.run_file("TrainJob", obj["metadata"]["name"],
                                                   namespace, "work")
            base_dir.mkdir(exist_ok=True)
        return self.backend.apply(obj, base_dir=base_dir, wait=False)

    def delete_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                        plural: str, name: str, **_: Any) -> Any:
        if not self.backend.delete("TrainJob", name, namespace):
            raise _not_found(f"{plural}.{group} {namespace}/{name}")
        return {}

    @staticmethod
    def _maybe(fn: Callable[[], Any], async_req: bool) -> Any:
        return _Done(fn) if async_req else fn()


def node_phase(obj: dict[str, Any]) -> str:
    """A node pod's phase, read from the TrainJob's status (the local backend keeps no pod
    objects; the module docstring gives the rule)."""
    conditions = {c.get("type"): c.get("status") for c in
                  (obj.get("status") or {}).get("conditions") or []}
    if conditions.get("Complete") == "True":
        return "Succeeded"
    if conditions.get("Failed") == "True":
        return "Failed"
    node = next((j for j in (obj.get("status") or {}).get("jobsStatus") or []
                 if j.get("name") == "node"), {})
    return "Running" if node.get("active") else "Pending"


def nodes(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The TrainJob's node pods as `list_namespaced_pod` answers them: name, rank, phase."""
    from lab.backends.local.training.trainjob import FLAVOR

    name = obj["metadata"]["name"]
    phase = node_phase(obj)
    return [{"pod": f"{name}-node-0-{i}", "index": i, "phase": phase}
            for i in range(len(FLAVOR.replica_names(obj)))]


class Core:
    """The calls of kubernetes.client.CoreV1Api the SDK makes: the nodes as pods."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def list_namespaced_pod(self, namespace: str, label_selector: str = "",
                            async_req: bool = False, **_: Any) -> Any:
        def pods() -> _Answer:
            name = label_selector.split(f"{JOBSET_NAME}=", 1)[-1].split(",", 1)[0]
            obj = self.backend.get("TrainJob", name, namespace)
            if obj is None:
                return _Answer({"items": []})
            trainer = obj["spec"].get("trainer") or {}
            created = obj["metadata"].get("creationTimestamp")
            return _Answer({"items": [{
                "metadata": {"name": n["pod"], "namespace": namespace,
                             "creationTimestamp": created,
                             "labels": {JOBSET_NAME: name, RJOB_NAME: "node",
                                        JOB_INDEX: str(n["index"])}},
                "spec": {"containers": [{"name": "node", "resources": _quantities(
                    trainer.get("resourcesPerNode") or {})}]},
                "status": {"phase": n["phase"]}} for n in nodes(obj)]})
        return _Done(pods) if async_req else pods().to_dict()

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str = "node",
                                follow: bool = False, _preload_content: bool = True,
                                **_: Any) -> Any:
        """CoreV1Api.read_namespaced_pod_log: the node's log as text; with `follow` and
        `_preload_content=False` (what kubernetes.watch.Watch.stream passes, as the SDK's
        `get_job_logs(follow=True)` calls it) a response whose `stream()` yields the lines
        while the node runs.

        :param bool follow: Follow the log stream of the pod.
        :return: str
        """
        job, _sep, index = name.rpartition("-node-0-")
        if not job or not index.isdigit():
            raise _not_found(f"pod {namespace}/{name}")
        lines = self.backend.logs("TrainJob", job, namespace, f"node-{index}", follow=follow)
        if _preload_content:
            return "\n".join(lines)
        return LogStream(lines)

    def list_namespaced_event(self, namespace: str, async_req: bool = False, **_: Any) -> Any:
        from kubernetes.client import CoreV1EventList

        empty = CoreV1EventList(items=[])
        return _Done(lambda: empty) if async_req else empty


def _quantities(resources: dict[str, Any]) -> dict[str, Any]:
    """Resource quantities as the API server writes them back (canonical strings: a JSON
    number 3 is "3", 0.5 is "500m"; apimachinery resource.Quantity.String), as a pod on a
    cluster carries them: the SDK reports a step's device_count from them."""
    def one(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        if float(value).is_integer():
            return str(int(value))
        return f"{round(value * 1000)}m"
    return {section: {k: one(v) for k, v in values.items()} if isinstance(values, dict)
            else values for section, values in resources.items()}


class LogStream:
    """What the kubernetes client returns for `_preload_content=False`: a urllib3 response,
    of which kubernetes.watch.watch.iter_resp_lines uses `stream(amt, decode_content)`
    (chunks of bytes, split at newlines there), then `close()` and `release_conn()`."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines = lines

    def stream(self, amt: int | None = None, decode_content: bool | None = None
               ) -> Iterator[bytes]:
        for line in self.lines:
            yield line.encode() + b"\n"

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        return b"".join(self.stream())

    def close(self) -> None:
        closer = getattr(self.lines, "close", None)
        if closer is not None:
            closer()  # a follow stops polling when the reader stops reading

    def release_conn(self) -> None:
        return None


def _drop_none(value: Any) -> Any:
    """The body as JSON would carry it: the SDK's to_dict() keeps unset fields as None."""
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def trainer_client(namespace: str = "default", *, state: str | None = None,
                   base_dir: str | Path | None = None) -> Any:
    """A kubeflow.trainer.TrainerClient whose TrainJobs run on kflab's local backend.

    The nodes run in `base_dir`, by default a folder of the job's own in the state folder:
    the SDK's command writes the training function into a file named like the learner's
    script (`train.py` in a pod), which in the learner's folder would replace the script.
    A function that writes results should take their path as an argument (`func_args`).
    `state` is the kflab state folder (default as for `kflab`: $KFLAB_STATE or ~/.kflab)."""
    try:
        from kubeflow.trainer import TrainerClient
        from kubeflow.trainer.backends.kubernetes.backend import KubernetesBackend
    except ImportError:
        raise LabError("the Kubeflow SDK is not installed",
                       hint=install_extras("sdk")) from None
    from lab.backends.local import LocalBackend

    local = LocalBackend(state)
    backend = KubernetesBackend.__new__(KubernetesBackend)  # no kubeconfig: nothing to load
    backend.namespace = namespace
    backend.custom_api = CustomObjects(local, Path(base_dir).resolve() if base_dir else None)
    backend.core_api = Core(local)
    client = TrainerClient.__new__(TrainerClient)
    client.backend = backend
    return client
