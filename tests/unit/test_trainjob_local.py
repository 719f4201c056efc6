"""TrainJob on the local backend: the environment Trainer's torch plugin writes, the runtimes
the manifests ship, and the status the TrainJob controller copies from the JobSet.

Expected values for numProcPerNode are the cases of kubeflow/trainer v2.1.0
pkg/runtime/framework/plugins/torch/torch_test.go (TestTorch, "nproc_per_node=auto ...").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from lab.backends.local import LocalBackend
from lab.backends.local.training import containers
from lab.backends.local.training import run as training_run
from lab.backends.local.training.env import operator_env
from lab.backends.local.training.kinds import parse
from lab.backends.local.training.runtimes import SHIPPED
from lab.errors import InputError

RUNTIMES = Path("upstream/kubeflow-manifests-26.03/applications/trainer/upstream/base/runtimes")


def trainjob(name: str = "tj", runtime: str = "torch-distributed", **trainer) -> dict:
    trainer.setdefault("command", ["torchrun", "train.py"])
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": trainer}}


def env_of(obj: dict, index: int) -> dict[str, str]:
    job = parse(obj)
    return dict(operator_env(job, job.replicas["Node"], index, ports={"master": 4242}))


def test_every_node_gets_the_torch_plugin_variables() -> None:
    env = env_of(trainjob(numNodes=3, numProcPerNode=2), 2)
    assert env["PET_NNODES"] == "3" and env["PET_NPROC_PER_NODE"] == "2"
    assert env["PET_NODE_RANK"] == env["JOB_COMPLETION_INDEX"] == "2"
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("127.0.0.1", "4242")
    assert env_of(trainjob(numNodes=3), 0)["PET_NODE_RANK"] == "0"


@pytest.mark.parametrize(("resources", "expected"), [
    ({"limits": {"cpu": "4"}}, "4"),          # auto with CPU limit
    (None, "1"),                              # auto with no CPU resources
    ({"limits": {"cpu": "2"}}, "2"),          # auto with low CPU limit
    ({"requests": {"cpu": "3"}}, "3"),        # auto with CPU request but no limit
    ({"limits": {"cpu": "2.5"}}, "3"),        # auto with millicore CPU limit (rounded up)
    ({"limits": {"cpu": "0.7"}}, "1"),        # auto with fractional CPU limit
    ({"limits": {"nvidia.com/gpu": "0"}, "requests": {"nvidia.com/gpu": "2"}}, "auto"),
])
def test_auto_resolves_as_the_torch_plugin_does(resources: dict | None, expected: str) -> None:
    extra = {"resourcesPerNode": resources} if resources else {}
    obj = trainjob(numProcPerNode="auto", **extra)
    if expected == "auto":  # planning GPUs is the backend's job; parse alone needs none
        obj["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"nvidia.com/gpu": "2"}}
    assert env_of(obj, 0)["PET_NPROC_PER_NODE"] == expected


def test_runtime_policy_gives_the_defaults() -> None:
    job = parse(trainjob())
    assert job.replicas["Node"].replicas == 1 and job.nproc_per_node == "1"


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"env": [{"name": "PET_NNODES", "value": "9"}], "numProcPerNode": 1}, "spec.trainer.env",
     "must not have reserved envs, invalid envs configured: [PET_NNODES]"),
    ({"numProcPerNode": "many"}, "spec.trainer.numProcPerNode", "[auto cpu gpu]"),
    ({"command": None}, "spec.trainer.command", "entrypoint"),
])
def test_bad_trainer_fields_are_refused_naming_the_field(change: dict, field: str,
                                                          words: str) -> None:
    obj = trainjob()
    obj["spec"]["trainer"].update(change)
    if change.get("command", 1) is None:
        del obj["spec"]["trainer"]["command"]
    with pytest.raises(InputError) as err:
        # the runtime's image (pytorch/pytorch) runs as a process, which needs the command
        containers.engine_for(parse(obj), obj)
    assert err.value.field == field and words in str(err.value)


def test_reserved_env_is_refused_only_with_num_proc_per_node() -> None:
    """trainer v2.1.0 torch.go: Validate returns before the reserved-env check when the
    TrainJob leaves numProcPerNode unset (lines 57-59); EnforceMLPolicy then upserts the
    PET_ values after the trainer's env (lines 128, 135), so the node sees Trainer's."""
    from lab.backends.local.training.env import replica_env

    obj = trainjob(numNodes=2, env=[{"name": "PET_NNODES", "value": "9"},
                                    {"name": "PET_MASTER_PORT", "value": "1"}])
    job = parse(obj)  # accepted, as the Trainer's webhook accepts it
    env = replica_env(job, job.replicas["Node"], 1, ports={"master": 4242}, gpus=None,
                      host_has_gpus=False, base={})
    assert (env["PET_NNODES"], env["PET_MASTER_PORT"]) == ("2", "4242")


def test_runtime_patches_of_a_newer_sdk_are_refused_naming_the_version() -> None:
    """kubeflow 0.5.0's RuntimePatch option writes spec.runtimePatches, a Trainer v2.3
    field: the lab's Trainer v2.1.0 would drop it and run the job unpatched."""
    obj = trainjob()
    obj["spec"]["runtimePatches"] = [{"manager": "trainer.kubeflow.org/kubeflow-sdk",
                                      "trainingRuntimeSpec": {}}]
    with pytest.raises(InputError) as err:
        parse(obj)
    assert err.value.field == "spec.runtimePatches"
    assert "Kubeflow Trainer v2.1.0 (the lab's) has no runtimePatches" in str(err.value)


@pytest.mark.parametrize("name", sorted(n for n, r in SHIPPED.items() if r.refused))
def test_runtimes_that_cannot_run_locally_are_refused_with_the_reason(name: str) -> None:
    with pytest.raises(InputError) as err:
        parse(trainjob(runtime=name))
    assert err.value.field == "spec.runtimeRef.name"
    assert SHIPPED[name].refused in str(err.value)


def test_an_unknown_runtime_lists_the_shipped_ones() -> None:
    with pytest.raises(InputError) as err:
        parse(trainjob(runtime="my-runtime"))
    assert "torch-distributed" in str(err.value.hint)


def _installed(folder: Path) -> list[Path]:
    """The files a kustomization installs (data-cache/ is a separate, optional overlay)."""
    out: list[Path] = []
    for item in yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]:
        path = folder / item
        out += _installed(path) if path.is_dir() else [path]
    return out


def test_the_runtime_table_is_the_shipped_one(shared: Path) -> None:
    found = {}
    for path in _installed(shared / RUNTIMES):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") != "ClusterTrainingRuntime":
            continue
        policy = doc["spec"]["mlPolicy"]
        found[doc["metadata"]["name"]] = (
            doc["metadata"]["labels"]["trainer.kubeflow.org/framework"], policy["numNodes"],
            (policy.get("torch") or {}).get("numProcPerNode") if "torch" in policy else None,
            tuple(r["name"] for r in doc["spec"]["template"]["spec"]["replicatedJobs"]))
    assert found == {n: (r.framework, r.num_nodes, r.nproc_per_node, r.replicated_jobs)
                     for n, r in SHIPPED.items()}


SCRIPT = ("import json, os, sys; keys = ('PET_NNODES', 'PET_NODE_RANK', 'PET_NPROC_PER_NODE');"
          "print(json.dumps({k: os.environ[k] for k in keys}));"
          "sys.exit(int(os.environ.get('FAIL', '0')))")


def test_a_run_completes_with_the_jobset_status(state: Path, tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    out = backend.apply(trainjob("ok", numNodes=2, command=[sys.executable, "-c", SCRIPT]),
                        base_dir=tmp_path)
    status = out["status"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]] \
        == [("Complete", "True", "AllJobsCompleted", "jobset completed successfully")]
    assert status["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0,
                                     "active": 0, "suspended": 0}]
    assert out["spec"]["runtimeRef"] == {"name": "torch-distributed",
                                         "apiGroup": "trainer.kubeflow.org",
                                         "kind": "ClusterTrainingRuntime"}
    lines = list(backend.logs("TrainJob", "ok", "ns", "node-1"))
    assert any('"PET_NODE_RANK": "1"' in line and '"PET_NNODES": "2"' in line for line in lines)


def test_a_failing_node_fails_the_job_after_the_backoff_limit(
        state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Restart delays shortened (kubelet's back-off would make this test take a minute)."""
    monkeypatch.setattr(training_run, "RESTART_DELAY", (0.01, 0.01))
    backend = LocalBackend(str(state))
    obj = trainjob("bad", command=[sys.executable, "-c", SCRIPT],
                   env=[{"name": "FAIL", "value": "1"}])
    status = backend.apply(obj, base_dir=tmp_path)["status"]
    failed = status["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "FailedJobs")
    assert failed["message"] == ("jobset failed due to one or more job failures "
                                 "(first failed job: bad-node-0)")
    assert status["jobsStatus"][0]["failed"] == 1 and status["jobsStatus"][0]["active"] == 0


@pytest.mark.parametrize(("resources", "ignored"), [
    ({"limits": {"nvidia.com/gpu": 1}}, []),  # the GPU step's manifest: what gives it a GPU
    ({"limits": {"cpu": "2", "memory": "4Gi"}}, ["trainer.resourcesPerNode.limits.memory"]),
    ({"requests": {"memory": "1Gi", "nvidia.com/gpu": 1}, "claims": [{"name": "x"}]},
     ["trainer.resourcesPerNode.claims", "trainer.resourcesPerNode.requests.memory"]),
])
def test_resources_per_node_is_named_ignored_only_for_what_is_ignored(
        resources: dict, ignored: list[str]) -> None:
    """GPU counts and cpu in trainer.resourcesPerNode act here (the node's GPUs, numProcPerNode
    auto): the note "ignored here" names only the rest."""
    job = parse(trainjob(resourcesPerNode=resources, image="pytorch/pytorch:2.7"))
    assert sorted(job.ignored) == sorted(["trainer.image", *ignored])


def _hello() -> None:
    print("hello")


def test_the_sdks_runtime_patch_is_refused_on_the_local_backend(tmp_path: Path) -> None:
    """The Kubeflow SDK (kubeflow 0.5.0, kubeflow-trainer-api 2.3: the oldest API it
    accepts) and the lab's Trainer v2.1.0 disagree on RuntimePatch: through kflab's
    TrainerClient it is refused with the version named, not silently dropped."""
    pytest.importorskip("kubeflow.trainer")
    from kubeflow.trainer import CustomTrainer
    from kubeflow.trainer.options import JobSetTemplatePatch, RuntimePatch
    from kubeflow.trainer.options import TrainingRuntimeSpecPatch as Spec

    from lab.sdk import trainer_client

    client = trainer_client(state=str(tmp_path / "state"), base_dir=tmp_path)
    patch = RuntimePatch(training_runtime_spec=Spec(template=JobSetTemplatePatch(
        metadata={"labels": {"team": "a"}})))
    with pytest.raises(RuntimeError) as err:  # the SDK's "Failed to create TrainJob", from:
        client.train(trainer=CustomTrainer(func=_hello), options=[patch])
    cause = err.value.__cause__ or err.value.__context__
    assert isinstance(cause, InputError) and cause.field == "spec.runtimePatches"
    assert "Kubeflow Trainer v2.1.0 (the lab's) has no runtimePatches" in str(cause)
    assert client.list_jobs() == []
