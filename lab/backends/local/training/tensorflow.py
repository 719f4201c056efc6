"""TFJob's rules (kubeflow.org/v1): replica types, the TF_CONFIG contract, success, messages.

Facts from the Training Operator v1.9 (read, not copied):
- defaults (pkg/apis/kubeflow.org/v1/tensorflow_defaults.go SetDefaults_TFJob): replica
  types camel-cased (PS, Worker, Chief, Master, Evaluator), replicas 1, restartPolicy Never,
  cleanPodPolicy None, successPolicy "", container `tensorflow` with port `tfjob-port` 2222;
  the webhook (pkg/webhooks/tensorflow) allows at most one Chief or Master replica type.
- env (pkg/controller.v1/tensorflow tfjob_controller.go SetClusterSpec, tensorflow.go
  genTFConfigJSONStr and genClusterSpec): one variable, TF_CONFIG, appended to the
  `tensorflow` container's env, and only for distributed jobs (more than one replica in all).
  It is the JSON `{"cluster": {TYPE: ["HOST:PORT", ...]}, "task": {"type": TYPE, "index": I},
  "environment": "cloud"}`: every replica type of the spec (the evaluator too), lower-cased,
  its replicas in index order at `<job>-<type>-<i>.<namespace>.svc:<tfjob-port>`; keys in
  Go's map order (sorted). With enableDynamicWorker the cluster is sparse: `ps` in full and
  only the task's own `worker` entry, keyed by its index, with no `environment`.
- status (tfjob_controller.go UpdateJobStatus): with a Chief or Master, the job succeeds
  when all of them have; without, when every Worker has, or Worker 0 has and successPolicy
  is not AllWorkers. Any replica failing for good fails the job, except Workers when
  enableDynamicWorker is set. A re-created replica (restartPolicy ExitCode) sets Restarting
  with the common controller's message (common/pod.go ReconcilePods).

Locally every replica listens on 127.0.0.1 (inside the job's private network namespace), so
each gets its own free port in place of the shared `tfjob-port`; TF_CONFIG names those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lab.backends.local.training.flavor import Flavor, Host, ReplicaState, counts, loopback
from lab.backends.local.training.spec import JobSpec, Replica, _err, _short, with_fields

CHIEF, MASTER, WORKER, PS, EVALUATOR = "Chief", "Master", "Worker", "PS", "Evaluator"
SUCCESS_POLICIES = ("", "AllWorkers")


class TFFlavor(Flavor):
    kind = "TFJob"
    specs_key = "tfReplicaSpecs"
    replica_types = (CHIEF, MASTER, WORKER, PS, EVALUATOR)
    container = "tensorflow"
    port_name, default_port = "tfjob-port", 2222
    default_restart = "Never"
    operator_name = "tfjob-controller"
    fidelity_prefix = "tfjob"  # its rows in fidelity/rules.py
    missing_hint = "add replica specs: a Chief (1 replica) and Workers, or Workers alone"

    def parse_spec(self, job: JobSpec, spec: dict[str, Any]) -> JobSpec:
        chiefs = [t for t in (CHIEF, MASTER) if t in job.replicas]
        if len(chiefs) > 1:
            raise _err("spec.tfReplicaSpecs", "must not have more than 1 Chief or Master role",
                       "keep either Chief or Master")
        policy = spec.get("successPolicy")
        policy = "" if policy is None else policy
        if policy not in SUCCESS_POLICIES:
            raise _err("spec.successPolicy", f"unknown success policy {_short(policy)}",
                       'use "" (the chief, else worker 0, decides) or AllWorkers')
        dynamic = spec.get("enableDynamicWorker", False)
        if not isinstance(dynamic, bool):
            raise _err("spec.enableDynamicWorker", f"expected true or false, got "
                       f"{_short(dynamic)}", "enableDynamicWorker: true")
        return with_fields(job, success_policy=policy, dynamic_worker=dynamic)

    def apply_defaults(self, obj: dict[str, Any], job: JobSpec) -> None:
        obj["spec"].setdefault("successPolicy", job.success_policy)

    def ports(self, job: JobSpec, free_port: Any) -> dict[str, int]:
        return {rep.name(i): free_port() for rep, i in job.ordered()}

    def distributed(self, job: JobSpec) -> bool:
        """isDistributed: anything but exactly one replica in all."""
        return job.total_replicas != 1

    def listens(self, job: JobSpec) -> bool:
        """A one-replica TFJob gets no TF_CONFIG, so nothing of the operator's contract
        starts a gRPC server: it keeps the network a pod has (a dataset download works)."""
        return self.distributed(job)

    def cluster_ports(self, job: JobSpec) -> dict[str, int]:
        """Every replica on its type's tfjob-port (each pod has its own address)."""
        return {rep.name(i): rep.port for rep, i in job.ordered()}

    def cluster(self, job: JobSpec, ports: Mapping[str, int],
                host: Host = loopback) -> dict[str, list[str]]:
        """genClusterSpec: {type: ["<job>-<type>-<i>.<ns>.svc:PORT", ...]}, each host name
        mapped by `host` (loopback for local processes)."""
        ns = job.namespace
        return {rtype.lower(): [
            f"{host(f'{job.name}-{rep.name(i)}.{ns}.svc')}:{ports[rep.name(i)]}"
            for i in range(rep.replicas)]
            for rtype, rep in sorted(job.replicas.items(), key=lambda kv: kv[0].lower())}

    def tf_config(self, job: JobSpec, rep: Replica, index: int,
                  ports: Mapping[str, int], host: Host = loopback) -> str:
        cluster = self.cluster(job, ports, host)
        rtype = rep.type.lower()
        task = {"type": rtype, "index": index}
        if job.dynamic_worker:
            sparse: dict[str, Any] = {"worker": {}, "ps": []}
            if rtype == "ps":
                sparse["ps"] = [cluster["ps"][index]]
            elif rtype == "worker":
                sparse["ps"] = cluster.get("ps") or []
                sparse["worker"] = {str(index): cluster["worker"][index]}
            return json.dumps({"cluster": sparse, "task": task}, separators=(",", ":"))
        return json.dumps({"cluster": cluster, "task": task, "environment": "cloud"},
                          separators=(",", ":"))

    def operator_env(self, job: JobSpec, rep: Replica, index: int,
                     ports: Mapping[str, int], host: Host = loopback) -> list[tuple[str, str]]:
        if not self.distributed(job):
            return []
        return [("TF_CONFIG", self.tf_config(job, rep, index, ports, host))]

    def differences(self, job: JobSpec) -> list[tuple[str, dict[str, str]]]:
        if not self.distributed(job):
            return []
        ports = sorted({str(rep.port) for rep in job.replicas.values()})
        return [("tfjob.ports", {"port": ", ".join(ports)})]

    def leaders(self, job: JobSpec) -> tuple[str, ...]:
        chief = tuple(t for t in (CHIEF, MASTER) if t in job.replicas)
        return chief or (WORKER,)

    def succeeded(self, job: JobSpec, instances: Sequence[ReplicaState]) -> str | None:
        done = f"TFJob {job.namespace}/{job.name} successfully completed."
        c = counts(job, instances)
        chief = [t for t in (CHIEF, MASTER) if t in job.replicas]
        if chief:
            return done if c[chief[0]]["succeeded"] == job.replicas[chief[0]].replicas \
                else None
        if WORKER not in job.replicas:
            return None
        if c[WORKER]["succeeded"] == job.replicas[WORKER].replicas:
            return done
        worker0 = any(i.rep.type == WORKER and i.index == 0 and i.state == "succeeded"
                      and i.exit_code == 0 for i in instances)
        if worker0 and job.success_policy != "AllWorkers":
            return done
        return None

    def running_message(self, job: JobSpec) -> str:
        return f"TFJob {job.namespace}/{job.name} is running."

    def failed_message(self, job: JobSpec, rtype: str, failed: int,
                       policy: str) -> str | None:
        if job.dynamic_worker and rtype == WORKER:
            return None  # "continues regardless ... as enableDynamicWorker is set true"
        return (f"TFJob {job.namespace}/{job.name} has failed because {failed} {rtype} "
                f"replica(s) failed.")

    def restarting_message(self, job: JobSpec, rtype: str) -> str:
        return f"job {job.name} is restarting because {rtype} replica(s) failed."


FLAVOR = TFFlavor()
