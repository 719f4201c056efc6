"""The PyTorchJob env contract, GPU plan, defaults and status rules, as pure functions,
compared with the Training Operator's rules (kubeflow.org/v1); the manifest reader fuzzed."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from lab.backends.local.training import status as st
from lab.backends.local.training.env import (
    localize,
    operator_env,
    plan_gpus,
    replica_env,
    visible_gpus,
)
from lab.backends.local.training.kinds import apply_defaults, parse
from lab.errors import InputError, LabError


def rspec(n: int = 1, gpus: int = 0, **extra) -> dict:
    c = {"name": "pytorch", "command": ["python", "t.py"], **extra}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return {"replicas": n, "template": {"spec": {"containers": [c]}}}


def manifest(specs: dict, **spec) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"pytorchReplicaSpecs": specs, **spec}}


def env_of(obj: dict, rtype: str, index: int) -> dict:
    job = parse(obj)
    return dict(operator_env(job, job.replicas[rtype], index, master_port=111, rdzv_port=222))


def test_master_and_workers_rank_and_world_size() -> None:
    obj = manifest({"Master": rspec(), "Worker": rspec(3)}, nprocPerNode="4")
    w2 = env_of(obj, "Worker", 2)
    assert w2["RANK"] == w2["PET_NODE_RANK"] == "3"  # workers are shifted by the master
    assert w2["WORLD_SIZE"] == "16"  # 4 replicas x nprocPerNode 4
    assert w2["PET_NNODES"] == "4" and w2["PET_NPROC_PER_NODE"] == "4"
    assert (w2["MASTER_ADDR"], w2["MASTER_PORT"]) == ("127.0.0.1", "111")
    assert (w2["PET_MASTER_ADDR"], w2["PET_MASTER_PORT"]) == ("127.0.0.1", "111")
    assert env_of(obj, "Master", 0)["RANK"] == "0"


def test_auto_nproc_counts_as_one_and_is_passed_through() -> None:
    env = env_of(manifest({"Master": rspec(), "Worker": rspec(2)}), "Worker", 0)
    assert env["WORLD_SIZE"] == "3" and env["PET_NPROC_PER_NODE"] == "auto"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_workers_only_get_no_master_variables() -> None:
    env = env_of(manifest({"Worker": rspec(2)}), "Worker", 1)
    assert env == {"PYTHONUNBUFFERED": "1", "PET_NPROC_PER_NODE": "auto", "PET_NNODES": "2"}


def test_elastic_family() -> None:
    obj = manifest({"Worker": rspec(3)}, elasticPolicy={
        "minReplicas": 2, "nProcPerNode": 2, "standalone": True, "rdzvBackend": "c10d"})
    env = env_of(obj, "Worker", 0)
    assert env["PET_NNODES"] == "2:2"  # maxReplicas defaults to minReplicas
    assert env["PET_NPROC_PER_NODE"] == "2"  # from the elastic policy, spec.nprocPerNode unset
    assert env["PET_RDZV_ENDPOINT"] == "127.0.0.1:222" and env["PET_STANDALONE"] == ""
    assert "MASTER_ADDR" not in env and "PET_MAX_RESTARTS" not in env
    no_bounds = env_of(manifest({"Worker": rspec(3)}, elasticPolicy={}), "Worker", 0)
    assert no_bounds["PET_NNODES"] == "3:3"


def test_replica_env_scrubs_inherited_and_hides_gpus() -> None:
    obj = manifest({"Master": rspec(env=[{"name": "RANK", "value": "9"},
                                         {"name": "PEER", "value": "j-master-0:1"}])})
    job = parse(obj)
    env = replica_env(job, job.replicas["Master"], 0, master_port=1, rdzv_port=2, gpus=[],
                      host_has_gpus=True, base={"PATH": "/bin", "LOCAL_RANK": "3",
                                                "PET_NNODES": "7", "HOME": "/h"})
    assert "LOCAL_RANK" not in env and env["PET_NNODES"] == "1" and env["HOME"] == "/h"
    assert env["RANK"] == "0"  # the operator's value wins over the container's
    assert env["PEER"] == "127.0.0.1:1"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # no nvidia.com/gpu limit: no GPU
    assert env["KFLAB_GIVEN_GPUS"] == ""  # kflab's value, not the user's (gpu_devices.py)
    assert env["PATH"].endswith(":/bin")
    cpu = replica_env(job, job.replicas["Master"], 0, master_port=1, rdzv_port=2, gpus=[],
                      host_has_gpus=False, base={})
    assert "CUDA_VISIBLE_DEVICES" not in cpu


def test_localize_only_whole_service_names() -> None:
    names = ["j-master-0", "j-worker-1"]
    assert localize("j-master-0:29500", names) == "127.0.0.1:29500"
    assert localize("xj-master-0 j-master-01 j-worker-1", names) == \
        "xj-master-0 j-master-01 127.0.0.1"


def test_gpu_plan_is_disjoint_and_refuses_too_many() -> None:
    job = parse(manifest({"Master": rspec(gpus=1), "Worker": rspec(2, gpus=2)}))
    plan = plan_gpus(job, ["0", "1", "2", "3", "4", "5"])
    assert plan == {"master-0": ["0"], "worker-0": ["1", "2"], "worker-1": ["3", "4"]}
    with pytest.raises(LabError, match=r"asks for 5 GPU\(s\) .*worker-1: 2.* has 4"):
        plan_gpus(job, ["0", "1", "2", "3"])


def test_visible_gpus_honours_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: NVML is a MOCK (tests/standins/nvml) of a 4-GPU machine; the variable
    narrows it, by UUID (tests/unit/test_gpu_identity.py has the whole reading)."""
    from tests.standins import nvml

    nvml.install(monkeypatch, nvml.gpus(4))
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == [nvml.uuid(2), nvml.uuid(3)]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert visible_gpus({}) == [nvml.uuid(i) for i in range(4)]


def test_defaults_written_like_the_webhook() -> None:
    obj = manifest({"worker": {"template": rspec()["template"]}})
    apply_defaults(obj, parse(obj))
    w = obj["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert (w["replicas"], w["restartPolicy"]) == (1, "OnFailure")
    assert obj["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    assert obj["spec"]["nprocPerNode"] == "auto"


def test_condition_rules() -> None:
    status: dict = {}
    st.update(status, "Created", "c")
    st.update(status, "Running", "r")
    st.update(status, "Restarting", "x")
    assert [c["type"] for c in status["conditions"]] == ["Created", "Restarting"]
    st.update(status, "Running", "r")
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running"]
    st.finish(status, "Succeeded", "s")
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("Created", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert status["conditions"][-1]["reason"] == "PyTorchJobSucceeded"
    assert st.finished(status) == "Succeeded" and status["completionTime"]


def test_errors_name_the_field() -> None:
    with pytest.raises(InputError, match=r"pytorchReplicaSpecs.*missing"):
        parse(manifest({}))
    with pytest.raises(InputError, match="no container named 'pytorch'"):
        parse(manifest({"Master": {"template": {"spec": {"containers": [{"name": "x"}]}}}}))
    with pytest.raises(InputError, match=r"Worker\.template.*nvidia.com/gpu"):
        parse(manifest({"Worker": rspec(gpus="lots")}))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="valueFrom"):
        parse(manifest({"Master": rspec(env=[{"name": "A", "valueFrom": {}}])}))
    with pytest.raises(InputError, match="minReplicas 3 is above maxReplicas 2"):
        parse(manifest({"Worker": rspec()}, elasticPolicy={"minReplicas": 3,
                                                           "maxReplicas": 2}))


JSONISH = hs.recursive(
    hs.none() | hs.booleans() | hs.integers(-3, 5) | hs.text(max_size=6)
    | hs.sampled_from(["Master", "Worker", "pytorch", "OnFailure", "auto", "2", "nvidia.com/gpu"]),
    lambda kids: hs.lists(kids, max_size=3) | hs.dictionaries(
        hs.sampled_from(["replicas", "restartPolicy", "template", "spec", "containers",
                         "name", "command", "args", "env", "resources", "limits", "Master",
                         "Worker", "value", "cleanPodPolicy", "x"]), kids, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(specs=JSONISH, run=JSONISH, nproc=JSONISH, elastic=JSONISH)
def test_parse_never_crashes(specs, run, nproc, elastic) -> None:
    """Any input gives a JobSpec or an InputError naming a field -- never a traceback."""
    obj = {"metadata": {"name": "f"}, "spec": {"pytorchReplicaSpecs": specs, "runPolicy": run,
                                               "nprocPerNode": nproc, "elasticPolicy": elastic}}
    try:
        job = parse(copy.deepcopy(obj))
    except InputError as exc:
        assert exc.field
        return
    assert job.total_replicas >= 0
