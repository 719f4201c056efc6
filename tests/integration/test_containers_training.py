"""Training jobs whose image kflab does not run as a process run in real containers (podman),
read back as on a cluster: a PyTorchJob (1 master + 2 workers, gloo) whose replicas find
each other by the names the Training Operator's Services give them, a TFJob whose TF_CONFIG
hosts resolve inside the job's network, and their statuses validated against the upstream
CRD schemas. Nothing is left running afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from containers_helpers import PYTHON, TORCH, leftovers, use_podman
from crds import crd_schema, schema_errors

from lab.backends.local import LocalBackend

pytestmark = pytest.mark.slow

TRAIN = """\
import os, socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank={dist.get_rank()} world={dist.get_world_size()} host={socket.gethostname()} "
      f"master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} sum={t.item():.0f} "
      f"cwd={os.getcwd()}", flush=True)
dist.destroy_process_group()
open(f"done-{os.environ['RANK']}.txt", "w").write("ok")
"""


def pytorchjob(name: str, image: str, workers: int = 2) -> dict:
    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": image,
                            "command": ["python3", "train.py"]}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(workers)}}}


def test_pytorchjob_master_and_two_workers_in_containers(state: Path, tmp_path: Path,
                                                         shared: Path, monkeypatch) -> None:
    use_podman(monkeypatch, TORCH)
    (tmp_path / "train.py").write_text(TRAIN)
    backend = LocalBackend(str(state))
    events: list[dict] = []
    backend.sink = events.append
    obj = backend.apply(pytorchjob("gloo3", TORCH), base_dir=tmp_path)
    status = obj["status"]
    assert status["conditions"][-1]["type"] == "Succeeded", \
        "\n".join(backend.logs("PyTorchJob", "gloo3"))
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1
    assert status["replicaStatuses"]["Worker"]["succeeded"] == 2
    lines = {ln.split("] ")[0][1:]: ln for ln in backend.logs("PyTorchJob", "gloo3")
             if "rank=" in ln}
    assert sorted(lines) == ["master-0", "worker-0", "worker-1"]
    for replica, line in lines.items():
        # the operator's contract, as on a cluster: the master's Service name and port,
        # each replica's hostname its pod's, the sum over 3 ranks 1+2+3
        assert "world=3" in line and "sum=6" in line, line
        assert "master=gloo3-master-0:23456" in line, line
        assert f"host=gloo3-{replica}" in line, line
        assert "cwd=/kflab/work" in line, line
    # what the replicas wrote in their working folder is in the manifest's folder
    assert sorted(p.name for p in tmp_path.glob("done-*.txt")) == [
        "done-0.txt", "done-1.txt", "done-2.txt"]
    assert "container network" in obj["metadata"]["annotations"]["kflab.dev/network"]
    assert schema_errors(crd_schema(shared, "PyTorchJob"), obj) == []
    assert leftovers(state) == {"containers": [], "networks": []}


TF_REPLICA = """\
import json, os, socket, time
cfg = json.loads(os.environ["TF_CONFIG"])
task = cfg["task"]
me = cfg["cluster"][task["type"]][task["index"]]
port = int(me.rsplit(":", 1)[1])
srv = socket.create_server(("0.0.0.0", port))
srv.settimeout(60)
peers = [a for t, addrs in cfg["cluster"].items() for a in addrs if a != me]
reached = []
for peer in peers:  # every other replica, by its TF_CONFIG name (retried while it starts)
    host, p = peer.rsplit(":", 1)
    for _ in range(300):
        try:
            socket.create_connection((host, int(p)), timeout=1).close()
            reached.append(host)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit(f"cannot reach {peer}")
for _ in peers:  # and every other replica reaches this one
    srv.accept()[0].close()
print(f"task={task['type']}-{task['index']} me={me} reached={','.join(sorted(reached))}",
      flush=True)
"""


def test_tfjob_chief_and_workers_reach_each_other_by_tf_config(state: Path, tmp_path: Path,
                                                               shared: Path,
                                                               monkeypatch) -> None:
    """TensorFlow itself is too heavy for an image built here (the tensorflow-cpu wheel alone
    is some 250 MB and unpacks past 1 GB): the replicas run Debian's python3 and do what
    TF's gRPC servers do with TF_CONFIG -- listen on their own address and connect to every
    other one by the host names the Training Operator writes there."""
    use_podman(monkeypatch, PYTHON)
    (tmp_path / "replica.py").write_text(TF_REPLICA)

    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": PYTHON, "command": ["python3", "replica.py"]}]}}}

    obj = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
           "metadata": {"name": "tfc", "namespace": "team-a"},
           "spec": {"tfReplicaSpecs": {"Chief": spec(1), "Worker": spec(2)}}}
    backend = LocalBackend(str(state))
    obj = backend.apply(obj, base_dir=tmp_path)
    logs = list(backend.logs("TFJob", "tfc", "team-a"))
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded", "\n".join(logs)
    done = sorted(ln.split("] ", 1)[1] for ln in logs if "task=" in ln)
    assert done == [
        "task=chief-0 me=tfc-chief-0.team-a.svc:2222 "
        "reached=tfc-worker-0.team-a.svc,tfc-worker-1.team-a.svc",
        "task=worker-0 me=tfc-worker-0.team-a.svc:2222 "
        "reached=tfc-chief-0.team-a.svc,tfc-worker-1.team-a.svc",
        "task=worker-1 me=tfc-worker-1.team-a.svc:2222 "
        "reached=tfc-chief-0.team-a.svc,tfc-worker-0.team-a.svc"]
    assert schema_errors(crd_schema(shared, "TFJob"), obj) == []
    assert leftovers(state) == {"containers": [], "networks": []}


LIMITS = """\
from pathlib import Path
root = Path("/sys/fs/cgroup")
if (root / "cgroup.controllers").exists():  # cgroups v2
    cpu = (root / "cpu.max").read_text().split()
    mem = (root / "memory.max").read_text().strip()
    print("cpu", int(cpu[0]) / int(cpu[1]), "memory", mem, flush=True)
else:
    quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
    period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    mem = (root / "memory" / "memory.limit_in_bytes").read_text().strip()
    print("cpu", quota / period, "memory", mem, flush=True)
"""


def test_cpu_and_memory_limits_reach_the_container(state: Path, tmp_path: Path,
                                                   monkeypatch) -> None:
    """resources.limits as the kubelet applies them: the container's cgroup says 0.5 CPU
    and 256 MiB (requests only schedule a pod, and change nothing here)."""
    found = use_podman(monkeypatch, PYTHON)
    if not found.limits:
        pytest.skip(f"{found.label} cannot apply limits (cgroups {found.cgroups})")
    (tmp_path / "limits.py").write_text(LIMITS)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "lim", "namespace": "default"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"restartPolicy": "Never", "template": {
               "spec": {"containers": [{
                   "name": "pytorch", "image": PYTHON, "command": ["python3", "limits.py"],
                   "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                                 "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}}}
    backend = LocalBackend(str(state))
    obj = backend.apply(job, base_dir=tmp_path)
    logs = list(backend.logs("PyTorchJob", "lim"))
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded", logs
    assert logs == ["[master-0] cpu 0.5 memory 268435456"]


NODE = """\
import os, socket, time
addr, port = os.environ["PET_MASTER_ADDR"], int(os.environ["PET_MASTER_PORT"])
rank = os.environ["PET_NODE_RANK"]
if rank == "0":
    srv = socket.create_server(("0.0.0.0", port))
    conn, _ = srv.accept()
    print("node-0 got", conn.recv(64).decode(), flush=True)
else:
    for _ in range(600):
        try:
            s = socket.create_connection((addr, port), timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    s.sendall(f"node {rank} of {os.environ['PET_NNODES']} via {addr}:{port}".encode())
"""


def test_trainjob_nodes_reach_node_0_by_its_jobset_name(state: Path, tmp_path: Path,
                                                        shared: Path, monkeypatch) -> None:
    """A TrainJob whose trainer image kflab does not run as a process: each node a
    container, node 0 reached at `<job>-node-0-0.<job>` (its JobSet pod's hostname and
    subdomain) on the torch runtime's port 29500, as the Trainer's torch plugin says."""
    use_podman(monkeypatch, PYTHON)
    (tmp_path / "node.py").write_text(NODE)
    obj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "tj", "namespace": "default"},
           "spec": {"runtimeRef": {"name": "torch-distributed"},
                    "trainer": {"image": PYTHON, "numNodes": 2,
                                "command": ["python3", "node.py"]}}}
    backend = LocalBackend(str(state))
    obj = backend.apply(obj, base_dir=tmp_path)
    logs = list(backend.logs("TrainJob", "tj"))
    assert obj["status"]["conditions"][-1]["type"] == "Complete", logs
    assert "[node-0] node-0 got node 1 of 2 via tj-node-0-0.tj:29500" in logs
    assert schema_errors(crd_schema(shared, "TrainJob"), obj) == []
    assert leftovers(state) == {"containers": [], "networks": []}
