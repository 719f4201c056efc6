"""The container runner's rules, without running a container: image names and which run as
processes, Kubernetes' command/args/env rules against an image's ENTRYPOINT/CMD, resource
quantities, the engine argv (labels, loopback-only ports, GPUs as CDI devices or --gpus),
how leftovers are recognised, the choice per manifest, and doctor's engine row (probing the
engines that are really installed here)."""

from __future__ import annotations

import itertools
import os
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from lab.backends.local import workloads
from lab.backends.local.containers import choice, cleanup, engine, images
from lab.backends.local.containers import spec as cspec
from lab.backends.local.runners import ContainerRun, Mount, gpu_args
from lab.doctor.rows import Host, container_engine_row
from lab.errors import InputError, LabError

PODMAN = engine.Engine("podman", "/usr/bin/podman", "4.3.1", arch="amd64")
DOCKER = engine.Engine("docker", "/usr/bin/docker", "28.2.2", arch="amd64")


@pytest.mark.parametrize(("ref", "want"), [
    ("python:3.11-slim", "docker.io/library/python:3.11-slim"),
    ("pytorch/pytorch", "docker.io/pytorch/pytorch:latest"),
    ("localhost/kflab-python:bookworm", "localhost/kflab-python:bookworm"),
    ("127.0.0.1:5000/team/app:1.2", "127.0.0.1:5000/team/app:1.2"),
    ("ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0",
     "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0"),
    ("busybox@sha256:" + "a" * 64, "docker.io/library/busybox@sha256:" + "a" * 64),
])
def test_references_are_fully_qualified(ref: str, want: str) -> None:
    assert str(images.parse(ref)) == want


@pytest.mark.parametrize("ref", ["UPPER/case", "a b", "x:", "-x", "x" * 600])
def test_what_is_not_a_reference(ref: str) -> None:
    assert images.parse(ref) is None
    assert not images.runs_locally(ref)


@pytest.mark.parametrize(("image", "local"), [
    ("python:3.11-slim", True), ("docker.io/library/python:3.12", True),
    ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", True),
    ("docker.io/tensorflow/tensorflow:2.21.0", True),
    ("ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch:v1.10.0", True),
    ("kubeflownotebookswg/jupyter-scipy:v1.9.0", True), (None, True),
    ("docker.io/kubeflowkatib/pytorch-mnist-cpu:latest", False),
    ("tensorflow:2", False),  # docker.io/library/tensorflow: not TensorFlow's image
    ("ghcr.io/kubeflow/trainer/torchtune-trainer:latest", False),
    ("kserve/sklearnserver:v0.16.0", False),
])
def test_which_images_run_as_processes(image: object, local: bool) -> None:
    assert images.runs_locally(image) is local


@pytest.mark.parametrize(("image", "policy"), [
    ("app", "Always"), ("app:latest", "Always"), ("app:1", "IfNotPresent"),
    ("app@sha256:" + "0" * 64, "IfNotPresent"),
    ("app:latest@sha256:" + "0" * 64, "IfNotPresent"),
])
def test_default_pull_policy_is_the_api_servers(image: str, policy: str) -> None:
    assert images.default_policy(image) == policy


def container(**fields: object) -> cspec.ContainerSpec:
    return cspec.read({"name": "c", "image": "example/app:1", **fields}, "spec.c")


@pytest.mark.parametrize(("fields", "entrypoint", "args"), [
    ({}, None, []),  # the image's ENTRYPOINT + CMD
    ({"args": ["--a", "1"]}, None, ["--a", "1"]),  # ENTRYPOINT kept, CMD replaced
    ({"command": ["python3", "t.py"]}, "python3", ["t.py"]),  # CMD dropped
    ({"command": ["/bin/run"], "args": ["x"]}, "/bin/run", ["x"]),
    ({"command": [], "args": []}, None, []),  # empty lists are unset
])
def test_command_and_args_follow_kubernetes(fields: dict, entrypoint: str | None,
                                            args: list[str]) -> None:
    assert cspec.entry(container(**fields), {}) == (entrypoint, args)


def test_variables_expand_as_the_kubelet_expands_them() -> None:
    env = cspec.final_env([("A", "x"), ("B", "$(A)-y"), ("C", "$(NOPE)"), ("D", "$$(A)")])
    assert env == {"A": "x", "B": "x-y", "C": "$(NOPE)", "D": "$(A)"}
    c = container(command=["sh", "-c", "echo $(B) $$(B) $(MISSING)"])
    assert cspec.entry(c, env) == ("sh", ["-c", "echo x-y $(B) $(MISSING)"])


@pytest.mark.parametrize(("raw", "value"), [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), (2, Decimal(2)), ("1.5", Decimal("1.5")),
    ("512Mi", Decimal(512 * 2**20)), ("1G", Decimal(10**9)), ("1e3", Decimal(1000)),
])
def test_quantities(raw: object, value: Decimal) -> None:
    assert cspec.quantity(raw, "x") == value


def test_a_bad_quantity_names_the_field() -> None:
    with pytest.raises(InputError) as err:
        container(resources={"limits": {"memory": "lots"}})
    assert err.value.field == "spec.c.resources.limits.memory"


def run(engine_: engine.Engine, **extra: object) -> list[str]:
    c = container(command=["python3", "train.py"], args=["--lr=$(LR)"],
                  resources={"limits": {"cpu": "500m", "memory": "1Gi"}})
    return ContainerRun(engine_, c, "kflab-x-master-0-abc", [("LR", "0.1")],
                        cleanup.labels(Path("/state"), "tok", "PyTorchJob/ns/x"),
                        network="net1", aliases=("x-master-0", "x-master-0.ns.svc"),
                        hostname="x-master-0", mounts=(Mount(Path("/w"), "/kflab/work"),),
                        publish=((40001, 8080),), gpus=("0", "GPU-abc"),
                        workdir="/kflab/work", **extra).argv()  # type: ignore[arg-type]


def test_the_podman_argv() -> None:
    argv = run(PODMAN)
    assert argv[:6] == ["/usr/bin/podman", "run", "--rm", "--name", "kflab-x-master-0-abc",
                        "--pull"]
    pairs = list(itertools.pairwise(argv))
    assert ("--label", "dev.kflab.run=tok") in pairs
    assert ("--label", "dev.kflab.owner=PyTorchJob/ns/x") in pairs
    assert ("--network-alias", "x-master-0.ns.svc") in pairs
    assert ("-p", "127.0.0.1:40001:8080") in pairs  # never beyond loopback
    assert ("--device", "nvidia.com/gpu=0") in pairs
    assert ("--device", "nvidia.com/gpu=GPU-abc") in pairs
    assert ("--cpus", "0.5") in pairs and ("--memory", str(2**30)) in pairs
    assert ("-v", "/w:/kflab/work:rw") in pairs and ("-e", "LR=0.1") in pairs
    # the image, then the arguments after the entrypoint, $(LR) expanded
    assert argv[-4:] == ["python3", "docker.io/example/app:1", "train.py", "--lr=0.1"]
    assert argv[-5] == "--entrypoint"


def test_the_docker_argv_takes_gpus_in_one_csv_field() -> None:
    argv = run(DOCKER)
    assert argv[0] == "/usr/bin/docker"
    assert ("--gpus", '"device=0,GPU-abc"') in list(itertools.pairwise(argv))
    assert "--device" not in argv
    assert gpu_args(DOCKER, []) == [] and gpu_args(PODMAN, []) == []


def test_selinux_relabels_mounts() -> None:
    selinux = engine.Engine("podman", "/usr/bin/podman", selinux=True)
    assert "/w:/kflab/work:rw,z" in run(selinux)


def test_a_run_client_is_recognised_by_its_label() -> None:
    argv = run(PODMAN)
    assert cleanup.client_of(argv) == ("/usr/bin/podman", "tok")
    assert cleanup.client_of(["/usr/bin/podman", "ps"]) is None
    assert cleanup.client_of(["python3", "run", "--label", "dev.kflab.run=t"]) is None


def pytorchjob(image: str, **annotations: str) -> dict:
    return {"kind": "PyTorchJob", "metadata": {"name": "j", "annotations": annotations},
            "spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": {
                "containers": [{"name": "pytorch", "image": image}]}}}}}}


def test_decide_without_an_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine.ENV, "none")
    engine.forget()
    assert workloads.decide(pytorchjob("python:3.11")).runtime == "process"
    refused = workloads.decide(pytorchjob("kubeflowkatib/pytorch-mnist-cpu:latest"))
    assert refused.runtime == "refused" and "Podman or Docker" in refused.reason
    assert refused.images == ("kubeflowkatib/pytorch-mnist-cpu:latest",)
    forced = workloads.decide(pytorchjob("kubeflowkatib/x:1", **{choice.ANNOTATION: "process"}))
    assert forced.runtime == "process"
    bad = workloads.decide(pytorchjob("python:3", **{choice.ANNOTATION: "vm"}))
    assert bad.runtime == "refused" and choice.ANNOTATION in bad.reason
    monkeypatch.setenv(choice.ENV, "process")
    assert workloads.decide(pytorchjob("kubeflowkatib/x:1")).runtime == "process"


def test_decide_with_the_engine_here(monkeypatch: pytest.MonkeyPatch) -> None:
    found = engine.current()
    if found is None or not found.running:
        pytest.skip("no running container engine here")
    got = workloads.decide(pytorchjob("kubeflowkatib/pytorch-mnist-cpu:latest"))
    assert (got.runtime, got.engine) == ("container", found.name)
    isvc = {"kind": "InferenceService", "metadata": {"name": "m"}, "spec": {"predictor": {
        "containers": [{"name": "kserve-container", "image": "python:3.11"}]}}}
    # a custom predictor is always its image's container, even of a Python base
    assert workloads.decide(isvc).runtime == "container"


@pytest.mark.parametrize(("obj", "fields"), [
    ({"kind": "TFJob", "spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {
        "containers": [{"name": "tensorflow", "image": "a:1"},
                       {"name": "sidecar", "image": "b:1"}]}}}}}},
     ["spec.tfReplicaSpecs.Worker.template.spec.containers[0].image"]),
    ({"kind": "TrainJob", "spec": {"runtimeRef": {"name": "torch-distributed"}}},
     ["ClusterTrainingRuntime torch-distributed (its node container)"]),
    ({"kind": "TrainJob", "spec": {"trainer": {"image": "me/train:1"}}},
     ["spec.trainer.image"]),
    ({"kind": "Experiment", "spec": {"trialTemplate": {"trialSpec": {"spec": {"template": {
        "spec": {"containers": [{"name": "t", "image": "a:1"}]}}}}}}},
     ["spec.trialTemplate.trialSpec.spec.template.spec.containers[0].image"]),
    ({"kind": "Notebook", "spec": {"template": {"spec": {"containers": [
        {"name": "nb", "image": "a:1"}, {"name": "side", "image": "b:1"}]}}}},
     ["spec.template.spec.containers[0].image"]),
])
def test_the_workload_containers_of_each_kind(obj: dict, fields: list[str]) -> None:
    assert [f for f, _ in workloads.containers_of(obj)] == fields


def host(**env: str) -> Host:
    full = {**os.environ, **env}
    return Host(which=lambda name: shutil.which(name, path=full.get("PATH")), env=full)


def test_doctor_names_the_engine_here() -> None:
    found = engine.current()
    if found is None:
        pytest.skip("no container engine installed here")
    row = container_engine_row(host())
    assert found.title in row.observed and ("running" in row.observed)
    assert ("rootless" in row.observed) or ("rootful" in row.observed)
    assert row.status == ("pass" if found.running else "warn")


def test_doctor_says_a_docker_daemon_is_not_running(tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI here")
    row = container_engine_row(host(KFLAB_CONTAINER_ENGINE="docker",
                                    DOCKER_HOST=f"unix://{tmp_path}/none.sock"))
    assert row.status == "warn"
    assert "Docker" in row.observed and "not running" in row.observed
    assert "KFLAB_CONTAINER_ENGINE=podman" in row.advice


def test_doctor_with_no_engine_and_with_a_bad_setting(tmp_path: Path) -> None:
    row = container_engine_row(host(PATH=str(tmp_path)))
    assert (row.status, row.observed.split(":")[0]) == ("warn", "none")
    assert "Podman" in row.advice
    bad = container_engine_row(host(KFLAB_CONTAINER_ENGINE="lxc"))
    assert bad.status == "fail" and "lxc" in bad.observed


def test_require_names_the_engine_that_would_run_it(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(engine.ENV, raising=False)
    engine.forget()
    with pytest.raises(LabError) as err:
        engine.require("image x (spec.y)")
    assert "no container engine is installed here" in str(err.value)
    assert "Podman or Docker" in str(err.value)
    engine.forget()


RUNTIMES_FILE = ("upstream/kubeflow-manifests-26.03/applications/kserve/kserve/"
                 "kserve-cluster-resources.yaml")


def test_runtime_images_are_the_ones_the_manifests_ship(shared: Path) -> None:
    import yaml

    from lab.backends.local.serving import runtime_images

    shipped = {}
    for doc in yaml.safe_load_all((shared / RUNTIMES_FILE).read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "ClusterServingRuntime":
            c = doc["spec"]["containers"][0]
            shipped[doc["metadata"]["name"]] = {k: c[k] for k in ("image", "command", "args")
                                                if c.get(k)}
    ours = {k: v for k, v in runtime_images.IMAGES.items()}
    assert ours == {k: v for k, v in shipped.items() if k in ours}
    assert set(shipped) - set(ours) == {"kserve-huggingfaceserver-multinode"}  # Ray: refused


def test_a_format_only_an_image_serves_is_refused_naming_it_without_an_engine(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from lab.backends.local import LocalBackend

    monkeypatch.setenv(engine.ENV, "none")
    engine.forget()
    (tmp_path / "m").mkdir()
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "flowers", "namespace": "default"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "tensorflow"},
                                             "storageUri": "file://./m"}}}}
    with pytest.raises(LabError) as err:
        LocalBackend(str(tmp_path / "state")).validate(isvc, base_dir=tmp_path)
    text = str(err.value)
    assert "tensorflow/serving:2.6.2" in text and "kserve-tensorflow-serving" in text
    assert "Podman or Docker" in text
    got = workloads.decide(isvc)
    assert got.runtime == "refused" and got.images == ("tensorflow/serving:2.6.2",)
    engine.forget()


def test_hostile_names_and_paths_are_refused() -> None:
    with pytest.raises(InputError) as err:
        cspec.read({"name": "c", "image": "a:1", "env": [{"name": "A=B", "value": "x"}]},
                   "spec.c")
    assert err.value.field == "spec.c.env[0].name"
    c = container(command=["python3"])
    bad = ContainerRun(PODMAN, c, "n", [], {}, mounts=(Mount(Path("/w"), "/katib:rw,z"),))
    with pytest.raises(LabError) as mount:
        bad.argv()
    assert "cannot mount '/katib:rw,z'" in str(mount.value)
    with pytest.raises(LabError):
        ContainerRun(PODMAN, c, "n", [], {}, mounts=(Mount(Path("/a:b"), "/w"),)).argv()
