"""TFJob on the local backend with real processes: TF_CONFIG in every replica, the success
and failure rules, cleanPodPolicy, status validated against the upstream TFJob CRD; and a
real TensorFlow MultiWorkerMirroredStrategy all-reduce whose gRPC servers (which bind the
wildcard address) are seen listening only inside the job's loopback-only namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from crds import crd_schema, schema_errors
from netaudit import listeners, reachable_beyond_loopback, tree
from test_training_crd_schema import pruned

from lab.backends.local import LocalBackend

REPO = Path(__file__).resolve().parents[2]
PRINT_TF_CONFIG = "import os; print('TF_CONFIG ' + os.environ.get('TF_CONFIG', '-'))"


def rspec(n: int, code: str, policy: str = "Never") -> dict:
    return {"replicas": n, "restartPolicy": policy, "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "tensorflow/tensorflow",
         "command": [sys.executable, "-c", code]}]}}}


def tfjob(name: str, specs: dict, **spec) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"tfReplicaSpecs": specs, **spec}}


def tf_configs(backend: LocalBackend, name: str) -> dict[str, dict]:
    out = {}
    for line in backend.logs("TFJob", name):
        replica, _, rest = line.partition("] ")
        if rest.startswith("TF_CONFIG "):
            out[replica.lstrip("[")] = json.loads(rest.split(" ", 1)[1])
    return out


def test_every_replica_gets_its_tf_config_and_the_chief_decides(state: Path,
                                                                tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    obj = backend.apply(tfjob("mnist", {"Chief": rspec(1, PRINT_TF_CONFIG),
                                        "Worker": rspec(2, PRINT_TF_CONFIG),
                                        "PS": rspec(1, PRINT_TF_CONFIG)}),
                        base_dir=tmp_path)
    assert [c["reason"] for c in obj["status"]["conditions"]] == [
        "TFJobCreated", "TFJobRunning", "TFJobSucceeded"]
    configs = tf_configs(backend, "mnist")
    assert sorted(configs) == ["chief-0", "ps-0", "worker-0", "worker-1"]
    cluster = configs["chief-0"]["cluster"]
    assert all(c["cluster"] == cluster for c in configs.values())  # one cluster, seen alike
    assert sorted(cluster) == ["chief", "ps", "worker"] and len(cluster["worker"]) == 2
    addresses = [a for group in cluster.values() for a in group]
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert len(set(addresses)) == 4  # one port per replica on the shared loopback
    assert configs["worker-1"]["task"] == {"type": "worker", "index": 1}
    assert configs["chief-0"]["environment"] == "cloud"


def test_worker_zero_ends_the_job_and_running_stragglers_are_stopped(state: Path,
                                                                     tmp_path: Path) -> None:
    """No chief: worker 0's success is the job's (default successPolicy); cleanPodPolicy
    Running stops worker 1, which the operator then counts as succeeded."""
    backend = LocalBackend(str(state))
    code = ("import json, os, time; t = json.loads(os.environ['TF_CONFIG'])['task'];"
            "time.sleep(0 if t['index'] == 0 else 60)")
    start = time.monotonic()
    obj = backend.apply(tfjob("w0", {"Worker": rspec(2, code)},
                              runPolicy={"cleanPodPolicy": "Running"}), base_dir=tmp_path)
    assert time.monotonic() - start < 30
    assert obj["status"]["conditions"][-1]["message"] == "TFJob default/w0 successfully completed."
    assert obj["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2


def test_a_failed_ps_fails_the_job_with_the_operators_message(state: Path,
                                                              tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    obj = backend.apply(tfjob("bad", {"Worker": rspec(1, "import time; time.sleep(30)"),
                                      "PS": rspec(1, "raise SystemExit(3)")},
                              runPolicy={"cleanPodPolicy": "All"}), base_dir=tmp_path)
    failed = obj["status"]["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "TFJobFailed")
    assert failed["message"] == "TFJob default/bad has failed because 1 PS replica(s) failed."


def test_one_replica_keeps_the_network_and_a_failed_download_is_explained(
        state: Path, tmp_path: Path) -> None:
    """A one-replica TFJob gets no TF_CONFIG, so nothing of the operator's starts a server:
    it runs with the network a pod has (Keras' mnist.npz download works). Replicas of a
    distributed job run in the loopback-only namespace; when one fails on a network error
    kflab says why, and the two ways out (the operator's condition text is unchanged)."""
    backend = LocalBackend(str(state))
    events: list[dict] = []
    backend.sink = events.append
    single = backend.apply(tfjob("one", {"Worker": rspec(1, "pass")}), base_dir=tmp_path)
    assert single["metadata"]["annotations"]["kflab.dev/network"].startswith("host (one replica")
    assert not any("network error" in str(e) for e in events)
    fail = ("import sys; print('Exception: URL fetch failure on https://example.invalid/m.npz:"
            " None -- [Errno -3] Temporary failure in name resolution'); sys.exit(1)")
    obj = backend.apply(tfjob("two", {"Worker": rspec(2, fail)}), base_dir=tmp_path)
    if not obj["metadata"]["annotations"]["kflab.dev/network"].startswith("private"):
        pytest.skip("no private network namespace on this machine")
    message = obj["status"]["conditions"][-1]["message"]
    assert message.startswith("TFJob default/two has failed because ")  # 1 or 2 by then
    assert message.endswith(" Worker replica(s) failed.")
    notes = [e["text"] for e in events if e.get("event") == "message"
             and "failed on a network error" in e.get("text", "")]
    assert len(notes) == 1 and "kflab.dev/network: host" in notes[0]


def test_statuses_validate_against_the_tfjob_crd(shared: Path, state: Path,
                                                 tmp_path: Path) -> None:
    schema = crd_schema(shared, "TFJob")
    backend = LocalBackend(str(state))
    objs = [
        backend.apply(tfjob("ok", {"Chief": rspec(1, "pass"), "Worker": rspec(2, "pass")}),
                      base_dir=tmp_path),
        backend.apply(tfjob("retry", {"Worker": rspec(1, "raise SystemExit(1)", "OnFailure")},
                            runPolicy={"backoffLimit": 1}, successPolicy="AllWorkers"),
                      base_dir=tmp_path),
        backend.apply(tfjob("dyn", {"Worker": rspec(2, "pass")}, enableDynamicWorker=True),
                      base_dir=tmp_path),
    ]
    assert [o["status"]["conditions"][-1]["type"] for o in objs] == [
        "Succeeded", "Failed", "Succeeded"]
    for obj in objs:
        assert schema_errors(schema, obj) == []
        assert pruned(obj, schema) == []
    bad = {**objs[0], "status": {**objs[0]["status"], "replicaStatuses": {"Chief": {
        "active": "one"}}}}
    assert schema_errors(schema, bad)  # the check above can fail


REPLICA = """
import json, os, pathlib, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
s = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ["TF_CONFIG"])["task"]
total = s.reduce("SUM", s.run(lambda: tf.constant(float(task["index"] + 1))), axis=None)
print("SUM", float(total), "REPLICAS", s.num_replicas_in_sync, flush=True)
pathlib.Path(f"up-{task['index']}").touch()
while not pathlib.Path("go").exists():
    time.sleep(0.05)
"""


@pytest.mark.slow
def test_multi_worker_strategy_all_reduces_and_listens_only_on_loopback(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow", reason="needs the tf extra: pip install 'kflab[tf]'")
    (tmp_path / "replica.py").write_text(REPLICA)
    spec = {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "tensorflow/tensorflow",
         "command": ["python", "replica.py"]}]}}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(tfjob("mwms", {"Worker": spec})))
    env = {**os.environ, "KFLAB_STATE": str(tmp_path / "state"), "PYTHONPATH": str(REPO)}
    cli = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", "job.yaml"],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 120
        while not all((tmp_path / f"up-{i}").exists() for i in (0, 1)):
            assert cli.poll() is None and time.monotonic() < end, cli.communicate()[0]
            time.sleep(0.1)
        found = [entry for pid in tree(cli.pid) for entry in listeners(pid)]
    finally:
        (tmp_path / "go").touch()
    out, _ = cli.communicate(timeout=60)
    assert cli.returncode == 0, out
    assert out.count("SUM 3.0 REPLICAS 2") == 2, out  # 1 + 2, on both workers
    assert found, "the workers' gRPC servers were not seen"
    exposed = [f for f in found if reachable_beyond_loopback(f)]
    assert exposed == [], f"listening beyond loopback: {exposed}"
    assert all(f.interfaces == ("lo",) for f in found), found
