"""The TFJob contract as pure functions, compared with the Training Operator v1.9's rules:
TF_CONFIG exactly as genTFConfigJSONStr writes it (with local addresses), only for
distributed jobs, the sparse form for enableDynamicWorker; the webhook's defaults and
refusals; UpdateJobStatus's success and failure rules and messages."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from lab.backends.local.training.env import localize, operator_env, replica_env, service_names
from lab.backends.local.training.kinds import apply_defaults, parse
from lab.backends.local.training.spec import Replica
from lab.errors import InputError


def rspec(n: int = 1, **extra) -> dict:
    c = {"name": "tensorflow", "image": "tensorflow/tensorflow", "command": ["python", "t.py"],
         **extra}
    return {"replicas": n, "template": {"spec": {"containers": [c]}}}


def manifest(specs: dict, **spec) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": {"name": "mnist", "namespace": "ns"},
            "spec": {"tfReplicaSpecs": specs, **spec}}


def ports_for(job) -> dict[str, int]:
    return {rep.name(i): 5000 + n for n, (rep, i) in enumerate(job.ordered())}


def tf_config(obj: dict, rtype: str, index: int) -> str:
    job = parse(obj)
    env = dict(operator_env(job, job.replicas[rtype], index, ports=ports_for(job)))
    return env["TF_CONFIG"]


def test_tf_config_is_the_operators_json_with_local_addresses() -> None:
    obj = manifest({"chief": rspec(), "Worker": rspec(2), "ps": rspec(), "Evaluator": rspec()})
    text = tf_config(obj, "Worker", 1)
    # Go's encoding/json: struct fields in order, map keys sorted, no spaces; every type of
    # the spec lower-cased (the evaluator too); ours in Chief, Worker, PS, Evaluator order.
    assert text == (
        '{"cluster":{"chief":["127.0.0.1:5000"],"evaluator":["127.0.0.1:5004"],'
        '"ps":["127.0.0.1:5003"],"worker":["127.0.0.1:5001","127.0.0.1:5002"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}')
    assert json.loads(tf_config(obj, "PS", 0))["task"] == {"type": "ps", "index": 0}
    assert json.loads(tf_config(obj, "Chief", 0))["task"] == {"type": "chief", "index": 0}


def test_only_distributed_jobs_get_tf_config() -> None:
    """isDistributed: exactly one replica in all means no TF_CONFIG at all."""
    single = parse(manifest({"Worker": rspec(1)}))
    assert operator_env(single, single.replicas["Worker"], 0, ports={"worker-0": 1}) == []
    two = parse(manifest({"Worker": rspec(2)}))
    assert [k for k, _ in operator_env(two, two.replicas["Worker"], 0,
                                       ports=ports_for(two))] == ["TF_CONFIG"]


def test_only_distributed_jobs_get_the_private_network() -> None:
    """Without TF_CONFIG no replica is told to start a gRPC server: a one-replica TFJob
    keeps the network, as its pod would; PyTorchJob replicas always listen (the store)."""
    single = parse(manifest({"Worker": rspec(1)}))
    two = parse(manifest({"Worker": rspec(1), "PS": rspec(1)}))
    assert (single.flavor.listens(single), two.flavor.listens(two)) == (False, True)
    torch = parse({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                   "metadata": {"name": "p"}, "spec": {"pytorchReplicaSpecs": {"Master": {
                       "template": {"spec": {"containers": [{
                           "name": "pytorch", "command": ["python", "t.py"]}]}}}}}})
    assert torch.flavor.listens(torch)


def test_dynamic_workers_get_the_sparse_cluster() -> None:
    obj = manifest({"Worker": rspec(3), "PS": rspec(2)}, enableDynamicWorker=True)
    assert tf_config(obj, "Worker", 2) == (
        '{"cluster":{"worker":{"2":"127.0.0.1:5002"},"ps":["127.0.0.1:5003","127.0.0.1:5004"]},'
        '"task":{"type":"worker","index":2}}')
    assert json.loads(tf_config(obj, "PS", 1))["cluster"] == {"worker": {},
                                                               "ps": ["127.0.0.1:5004"]}


def test_replica_env_scrubs_an_inherited_tf_config_and_keeps_the_users_variables() -> None:
    job = parse(manifest({"Chief": rspec(env=[{"name": "PEER",
                                               "value": "mnist-worker-0.ns.svc:2222"}]),
                          "Worker": rspec(1)}))
    env = replica_env(job, job.replicas["Chief"], 0, ports=ports_for(job), gpus=None,
                      host_has_gpus=False, base={"TF_CONFIG": "{}", "PATH": "/bin"})
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "chief", "index": 0}
    assert env["PEER"] == "127.0.0.1:2222"  # the operator's service name, made local
    assert "PYTHONUNBUFFERED" not in env  # the TF operator adds only TF_CONFIG


def test_service_names_with_their_namespace_suffix_become_loopback() -> None:
    names = service_names(parse(manifest({"Chief": rspec(), "Worker": rspec(2)})))
    assert names == ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1"]
    assert localize("mnist-worker-1.ns.svc.cluster.local:2222", names, "ns") == \
        "127.0.0.1:2222"
    assert localize("mnist-worker-1.ns.svc:2222 mnist-worker-10", names, "ns") == \
        "127.0.0.1:2222 mnist-worker-10"


def test_webhook_defaults_and_case_insensitive_types() -> None:
    obj = manifest({"worker": {"template": rspec()["template"]}, "ps": rspec()})
    job = parse(obj)
    assert sorted(job.replicas) == ["PS", "Worker"]
    assert job.replicas["Worker"].restart_policy == "Never"  # TFJob's default, not OnFailure
    assert job.replicas["Worker"].port == 2222
    apply_defaults(obj, job)
    spec = obj["spec"]
    assert sorted(spec["tfReplicaSpecs"]) == ["PS", "Worker"]
    assert spec["tfReplicaSpecs"]["Worker"]["replicas"] == 1
    assert spec["runPolicy"]["cleanPodPolicy"] == "None" and spec["successPolicy"] == ""


@pytest.mark.parametrize(("specs", "extra", "match"), [
    ({"Chief": rspec(), "Master": rspec()}, {}, "more than 1 Chief or Master"),
    ({"Worker": rspec()}, {"successPolicy": "Some"}, r"successPolicy.*unknown"),
    ({"Launcher": rspec()}, {}, r"tfReplicaSpecs\.Launcher.*unknown replica type"),
    ({"Worker": {"template": {"spec": {"containers": [{"name": "pytorch", "command": ["x"]}]}}}},
     {}, "no container named 'tensorflow'"),
    ({"Worker": rspec()}, {"enableDynamicWorker": "yes"}, "enableDynamicWorker"),
    ({}, {}, r"tfReplicaSpecs.*missing"),
])
def test_refusals_name_the_field(specs: dict, extra: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        parse(manifest(specs, **extra))


@dataclass
class Fake:
    rep: Replica
    index: int
    state: str
    exit_code: int | None = None


def instances(job, states: dict[str, str]) -> list[Fake]:
    return [Fake(rep, i, states.get(rep.name(i), "running"),
                 0 if states.get(rep.name(i)) == "succeeded" else None)
            for rep, i in job.ordered()]


def test_success_rules() -> None:
    flavor_job = parse(manifest({"Chief": rspec(), "Worker": rspec(2)}))
    fl = flavor_job.flavor
    # with a Chief: the chief decides, whatever the workers do
    assert fl.succeeded(flavor_job, instances(flavor_job, {"worker-0": "succeeded",
                                                           "worker-1": "succeeded"})) is None
    assert fl.succeeded(flavor_job, instances(flavor_job, {"chief-0": "succeeded"})) == \
        "TFJob ns/mnist successfully completed."
    # without: worker 0 (default policy), or every worker (AllWorkers)
    workers = parse(manifest({"Worker": rspec(3)}))
    assert fl.succeeded(workers, instances(workers, {"worker-0": "succeeded"}))
    assert fl.succeeded(workers, instances(workers, {"worker-1": "succeeded"})) is None
    every = parse(manifest({"Worker": rspec(2)}, successPolicy="AllWorkers"))
    assert fl.succeeded(every, instances(every, {"worker-0": "succeeded"})) is None
    assert fl.succeeded(every, instances(every, {"worker-0": "succeeded",
                                                 "worker-1": "succeeded"}))
    # PS alone never succeeds (its servers wait for workers)
    ps = parse(manifest({"PS": rspec(2)}))
    assert fl.succeeded(ps, instances(ps, {"ps-0": "succeeded", "ps-1": "succeeded"})) is None


def test_failure_and_restart_messages() -> None:
    job = parse(manifest({"Worker": rspec(2), "PS": rspec()}))
    fl = job.flavor
    assert fl.failed_message(job, "PS", 1, "Never") == \
        "TFJob ns/mnist has failed because 1 PS replica(s) failed."
    assert fl.restarting_message(job, "Worker") == \
        "job mnist is restarting because Worker replica(s) failed."
    dynamic = parse(manifest({"Worker": rspec(2)}, enableDynamicWorker=True))
    assert fl.failed_message(dynamic, "Worker", 1, "Never") is None  # the job goes on
    assert fl.leaders(job) == ("Worker",)
    assert fl.leaders(parse(manifest({"Master": rspec(), "Worker": rspec()}))) == ("Master",)
