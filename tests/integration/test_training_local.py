"""PyTorchJob on the local backend with real processes: the env contract, restart and
failure semantics, deadlines, cleanPodPolicy, logs, and no orphans after Ctrl-C or delete.

Replicas here are tiny Python programs (no torch) so the semantics are tested quickly;
tests/integration/test_training_ddp.py runs real DDP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from netaudit import listeners

from lab.backends.local import LocalBackend
from lab.backends.local.procs import is_running
from lab.backends.local.training.kinds import parse
from lab.errors import InputError, LabError
from lab.state import read_json

REPO = Path(__file__).resolve().parents[2]
ENV_PRINTER = ("import json, os; print('ENV ' + json.dumps({k: v for k, v in os.environ.items()"
               " if k in ('MASTER_ADDR','MASTER_PORT','WORLD_SIZE','RANK','PYTHONUNBUFFERED')"
               " or k.startswith('PET_') or k == 'GREETING'}))")


def replica(n: int, argv: list[str], policy: str = "Never", env: list | None = None) -> dict:
    container: dict = {"name": "pytorch", "image": "python:3.11-slim", "command": argv}
    if env:
        container["env"] = env
    return {"replicas": n, "restartPolicy": policy,
            "template": {"spec": {"containers": [container]}}}


def job(name: str, specs: dict, **spec: object) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name}, "spec": {"pytorchReplicaSpecs": specs, **spec}}


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def conds(obj: dict) -> list[str]:
    return [f"{c['type']}={c['status']}" for c in obj["status"]["conditions"]]


def env_lines(backend: LocalBackend, name: str, replica: str) -> dict:
    lines = [ln for ln in backend.logs("PyTorchJob", name, replica=replica) if "ENV " in ln]
    return json.loads(lines[-1].split("ENV ", 1)[1])


@pytest.fixture
def backend(state: Path) -> Iterator[LocalBackend]:
    """A backend whose background jobs are stopped even when a test fails half-way."""
    b = LocalBackend(str(state))
    yield b
    b.down()


def test_env_contract_master_and_workers(backend: LocalBackend, tmp_path: Path) -> None:
    """The operator's rules: RANK = index (+1 for workers), WORLD_SIZE = replicas x
    nprocPerNode, PET_NODE_RANK = RANK, PET_NNODES = replicas, PET_NPROC_PER_NODE as given,
    MASTER_* on every replica, user env kept, service names made local."""
    greet = [{"name": "GREETING", "value": "hello from envjob-master-0:23456"}]
    obj = backend.apply(job("envjob", {"Master": replica(1, py(ENV_PRINTER), env=greet),
                                       "Worker": replica(2, py(ENV_PRINTER), env=greet)},
                            nprocPerNode="2"), base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded"
    envs = {r: env_lines(backend, "envjob", r) for r in ("master-0", "worker-0", "worker-1")}
    port = envs["master-0"]["MASTER_PORT"]
    for rank, (_name, env) in enumerate(envs.items()):
        assert env == {
            "PYTHONUNBUFFERED": "1", "MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, "PET_MASTER_PORT": port, "WORLD_SIZE": "6",
            "RANK": str(rank), "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "2",
            "PET_NNODES": "3", "GREETING": "hello from 127.0.0.1:23456"}
    assert 1024 < int(port) < 65536


def test_env_contract_defaults_and_elastic(backend: LocalBackend, tmp_path: Path) -> None:
    """Without Master: no MASTER_*/RANK/WORLD_SIZE; elastic adds the PET_RDZV_* family and
    PET_NNODES=min:max; nprocPerNode defaults to auto."""
    obj = backend.apply(job("elastic", {"Worker": replica(2, py(ENV_PRINTER), "OnFailure")},
                            elasticPolicy={"minReplicas": 1, "maxReplicas": 3,
                                           "maxRestarts": 5, "rdzvId": "abc",
                                           "rdzvConf": [{"key": "timeout", "value": "60"}]}),
                        base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded"
    assert obj["spec"]["nprocPerNode"] == "auto"
    env = env_lines(backend, "elastic", "worker-1")
    host, _, port = env.pop("PET_RDZV_ENDPOINT").partition(":")
    assert host == "127.0.0.1" and port.isdigit()
    assert env == {"PYTHONUNBUFFERED": "1", "PET_NPROC_PER_NODE": "auto",
                   "PET_RDZV_BACKEND": "c10d", "PET_NNODES": "1:3", "PET_MAX_RESTARTS": "5",
                   "PET_RDZV_ID": "abc", "PET_RDZV_CONF": "timeout=60"}


def test_status_and_defaults_in_operator_shape(backend: LocalBackend, tmp_path: Path) -> None:
    obj = backend.apply(job("ok", {"master": replica(1, py("print('hi')"))}), base_dir=tmp_path)
    st = obj["status"]
    assert conds(obj) == ["Created=True", "Running=False", "Succeeded=True"]
    assert [c["reason"] for c in st["conditions"]] == [
        "PyTorchJobCreated", "PyTorchJobRunning", "PyTorchJobSucceeded"]
    assert st["replicaStatuses"]["Master"]["succeeded"] == 1
    assert "active" not in st["replicaStatuses"]["Master"]
    assert st["startTime"] <= st["completionTime"]
    assert obj["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    assert "Master" in obj["spec"]["pytorchReplicaSpecs"]  # camel-cased like the webhook
    assert list(backend.logs("PyTorchJob", "ok", replica="master-0")) == ["hi"]
    assert list(backend.logs("PyTorchJob", "ok")) == ["[master-0] hi"]
    with pytest.raises(LabError, match="no replica 'worker-1'"):
        backend.logs("PyTorchJob", "ok", replica="worker-1")


def test_never_fails_the_job(backend: LocalBackend, tmp_path: Path) -> None:
    obj = backend.apply(job("never", {"Master": replica(1, py("import time; time.sleep(30)")),
                                      "Worker": replica(1, py("raise SystemExit(3)"))},
                            runPolicy={"cleanPodPolicy": "All"}), base_dir=tmp_path)
    failed = obj["status"]["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "PyTorchJobFailed")
    assert "1 Worker replica(s) failed" in failed["message"]
    assert obj["status"]["replicaStatuses"]["Worker"]["failed"] == 1


def test_on_failure_restarts_until_success(backend: LocalBackend, tmp_path: Path) -> None:
    flaky = py("import pathlib, sys; p = pathlib.Path('tries'); n = int(p.read_text()) + 1 "
               "if p.exists() else 1; p.write_text(str(n)); print('try', n); "
               "sys.exit(0 if n >= 3 else 1)")
    obj = backend.apply(job("flaky", {"Master": replica(1, flaky, "OnFailure")}),
                        base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded"
    log = list(backend.logs("PyTorchJob", "flaky", replica="master-0"))
    assert [ln for ln in log if ln.startswith("try")] == ["try 1", "try 2", "try 3"]
    assert sum("restart" in ln for ln in log) == 2
    # In-place container restarts (the kubelet's) leave no Restarting condition.
    assert conds(obj) == ["Created=True", "Running=False", "Succeeded=True"]


def test_backoff_limit_fails_the_job(backend: LocalBackend, tmp_path: Path) -> None:
    obj = backend.apply(job("backoff", {"Master": replica(1, py("print('x'); exit(1)"),
                                                          "OnFailure")},
                            runPolicy={"backoffLimit": 2}), base_dir=tmp_path)
    failed = obj["status"]["conditions"][-1]
    assert failed["type"] == "Failed" and "backoff limit" in failed["message"]
    # The operator fails the job once the restart count reaches backoffLimit: 2 runs.
    assert list(backend.logs("PyTorchJob", "backoff", replica="master-0")).count("x") == 2


def test_exit_code_policy(backend: LocalBackend, tmp_path: Path) -> None:
    """ExitCode: 1-127 are permanent (job fails at once), 128+ are retried."""
    obj = backend.apply(job("perm", {"Master": replica(1, py("print('x'); exit(2)"),
                                                       "ExitCode")},
                            runPolicy={"backoffLimit": 5}), base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Failed"
    assert list(backend.logs("PyTorchJob", "perm", replica="master-0")).count("x") == 1
    retry = py("import pathlib, os, signal; p = pathlib.Path('t'); first = not p.exists(); "
               "p.touch(); print('x'); os.kill(os.getpid(), signal.SIGKILL) if first else None")
    obj = backend.apply(job("retry", {"Master": replica(1, retry, "ExitCode")}),
                        base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded"
    assert list(backend.logs("PyTorchJob", "retry", replica="master-0")).count("x") == 2


def test_active_deadline_stops_everything(backend: LocalBackend, tmp_path: Path) -> None:
    t0 = time.monotonic()
    obj = backend.apply(job("slow", {"Master": replica(1, py("import time; time.sleep(60)")),
                                     "Worker": replica(1, py("import time; time.sleep(60)"))},
                            runPolicy={"activeDeadlineSeconds": 2}), base_dir=tmp_path)
    assert time.monotonic() - t0 < 15
    failed = obj["status"]["conditions"][-1]
    assert failed["type"] == "Failed" and "deadline" in failed["message"]


def test_clean_pod_policy_running_stops_stragglers(backend: LocalBackend,
                                                   tmp_path: Path) -> None:
    t0 = time.monotonic()
    obj = backend.apply(job("clean", {"Master": replica(1, py("print('done')")),
                                      "Worker": replica(1, py("import time; time.sleep(60)"))},
                            runPolicy={"cleanPodPolicy": "Running"}), base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded"
    assert time.monotonic() - t0 < 15
    # As the operator: replicas still active when the job succeeds count as succeeded.
    assert obj["status"]["replicaStatuses"]["Worker"] == {
        "succeeded": 1, "selector": obj["status"]["replicaStatuses"]["Worker"]["selector"]}


def test_killed_replica_is_recreated_like_a_pod(backend: LocalBackend, tmp_path: Path) -> None:
    """A background job (apply wait=False): SIGKILL a worker (exit 137, retryable under
    ExitCode): the job shows Restarting, the replica comes back, the job succeeds."""
    marker = tmp_path / "go"
    body = py(f"import pathlib, time\nwhile not pathlib.Path({str(marker)!r}).exists(): "
              "time.sleep(0.1)\nprint('finished')")
    backend.apply(job("victim", {"Master": replica(1, body, "ExitCode"),
                                 "Worker": replica(1, body, "ExitCode")}),
                  base_dir=tmp_path, wait=False)
    pids = wait_for(lambda: replicas(backend.root, "victim").get("worker-0"))
    os.kill(pids["pid"], signal.SIGKILL)
    wait_for(lambda: "Restarting=True" in conds(backend.get("PyTorchJob", "victim")),
             interval=0.02)
    wait_for(lambda: replicas(backend.root, "victim").get("worker-0", pids) != pids)
    marker.touch()
    obj = wait_for(lambda: (o := backend.get("PyTorchJob", "victim"))["status"].get(
        "completionTime") and o, timeout=30)
    assert obj["status"]["conditions"][-1]["type"] == "Succeeded"
    assert "Running=False" in conds(obj)
    assert "--- kflab: restart 1 of worker-0 ---" in backend.logs("PyTorchJob", "victim",
                                                                  replica="worker-0")


def replicas(state: Path, name: str) -> dict:
    """The replica processes recorded in the job's owner record ({label: {pid, started}})."""
    rec = read_json(state / "owners" / "pytorchjobs" / "default" / f"{name}.json") or {}
    return {k: v for k, v in (rec.get("procs") or {}).items() if k != "netns"}


def wait_for(fn, timeout: float = 20.0, interval: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = fn()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


LISTENER = ("import os, socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, "
            "socket.SO_REUSEADDR, 1); rank = int(os.environ['RANK']); "
            "s.bind(('127.0.0.1', int(os.environ['MASTER_PORT']))) if rank == 0 else None; "
            "s.listen() if rank == 0 else None; print('up', flush=True); time.sleep(120)")


def start_cli_job(tmp_path: Path, state: Path, name: str) -> tuple[subprocess.Popen, dict]:
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(yaml.safe_dump(job(name, {"Master": replica(1, py(LISTENER)),
                                                  "Worker": replica(2, py(LISTENER))})))
    env = {**os.environ, "KFLAB_STATE": str(state), "PYTHONPATH": str(REPO)}
    cli = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", str(manifest)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run_dir = state / "runs" / "pytorchjobs" / "default" / name
    pids = wait_for(lambda: len(replicas(state, name)) == 3 and replicas(state, name),
                    timeout=30)
    wait_for(lambda: all("up" in (run_dir / f"{r}.log").read_text() for r in pids))
    return cli, pids


def test_ctrl_c_leaves_no_orphan_process_or_port(state: Path, tmp_path: Path) -> None:
    cli, pids = start_cli_job(tmp_path, state, "sigint")
    backend = LocalBackend(str(state))
    master = pids["master-0"]["pid"]
    environ = Path(f"/proc/{master}/environ").read_bytes().split(b"\0")
    port = int(next(e for e in environ if e.startswith(b"MASTER_PORT=")).split(b"=")[1])
    assert port in {found.port for found in listeners(master)}, "rank 0 listens on MASTER_PORT"
    cli.send_signal(signal.SIGINT)
    out, _ = cli.communicate(timeout=30)
    assert cli.returncode == 130, out
    for rec in pids.values():
        assert not is_running(rec["pid"], rec["started"]), "orphan replica after Ctrl-C"
    obj = backend.get("PyTorchJob", "sigint")
    assert obj["status"]["conditions"][-1]["type"] == "Failed"
    assert "interrupted" in obj["status"]["conditions"][-1]["message"]
    assert listeners(master) == [] and port_free(port), "MASTER_PORT still bound after Ctrl-C"


def test_delete_stops_a_running_job(state: Path, tmp_path: Path, kflab) -> None:
    cli, pids = start_cli_job(tmp_path, state, "deleteme")
    res = kflab("delete", "pytorchjob", "deleteme")
    assert res.returncode == 0, res.stdout + res.stderr
    cli.communicate(timeout=30)
    for rec in pids.values():
        assert not is_running(rec["pid"], rec["started"]), "orphan replica after delete"
    assert LocalBackend(str(state)).get("PyTorchJob", "deleteme") is None


def test_cli_apply_streams_prefixed_logs_and_logs_command(state: Path, tmp_path: Path,
                                                          kflab) -> None:
    manifest = tmp_path / "hello.yaml"
    manifest.write_text(yaml.safe_dump(job("hello", {
        "Master": replica(1, py("import os; print('hello from rank', os.environ['RANK'])")),
        "Worker": replica(2, py("import os; print('hello from rank', os.environ['RANK'])"))})))
    res = kflab("apply", "-f", str(manifest))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "worker-1 | hello from rank 2" in res.stdout
    assert "pytorchjob/hello Succeeded" in res.stdout
    res = kflab("logs", "pytorchjob", "hello", "--replica", "worker-1")
    assert res.stdout.strip() == "hello from rank 2"
    res = kflab("get", "pytorchjobs")
    assert "hello" in res.stdout and "Succeeded" in res.stdout


def test_bad_manifests_name_the_field() -> None:
    base = job("bad", {"Master": replica(1, ["python", "x.py"])})
    cases = [
        (["spec", "pytorchReplicaSpecs", "Master", "restartPolicy"], "Sometimes",
         "restartPolicy"),
        (["spec", "pytorchReplicaSpecs", "Master", "replicas"], 2, "Master.replicas"),
        (["spec", "runPolicy"], {"cleanPodPolicy": "Some"}, "cleanPodPolicy"),
        (["spec", "nprocPerNode"], "many", "nprocPerNode"),
    ]
    for path, value, field in cases:
        obj = json.loads(json.dumps(base))
        target = obj
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(InputError, match=field):
            parse(obj)
    obj = json.loads(json.dumps(base))
    del obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "command"]
    parsed = parse(obj)  # a container would run the image's entrypoint; a process cannot
    with pytest.raises(InputError, match="entrypoint"):
        for rep in parsed.replicas.values():
            parsed.flavor.check_command(rep)


def test_more_gpus_than_the_machine_has_is_refused(backend: LocalBackend, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.standins import nvml

    nvml.install(monkeypatch, nvml.gpus(1))  # a MOCK of NVML: one GPU (none exists here)
    spec = replica(2, py("pass"))
    spec["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    with pytest.raises(LabError, match=r"asks for 3 GPU\(s\).*has 1"):
        backend.apply(job("greedy", {"Master": replica(1, py("pass")) | {
            "template": spec["template"]}, "Worker": spec}), base_dir=tmp_path)
    assert backend.get("PyTorchJob", "greedy") is None


def test_down_stops_a_background_job_and_says_so(backend: LocalBackend, tmp_path: Path) -> None:
    backend.apply(job("bg", {"Master": replica(1, py("import time; time.sleep(120)")),
                             "Worker": replica(1, py("import time; time.sleep(120)"))}),
                  base_dir=tmp_path, wait=False)
    pids = wait_for(lambda: len(replicas(backend.root, "bg")) == 2
                    and replicas(backend.root, "bg"))
    assert backend.down() == ["pytorchjob/default/bg"]
    for rec in pids.values():
        assert not is_running(rec["pid"], rec["started"]), "orphan replica after kflab down"
    last = backend.get("PyTorchJob", "bg")["status"]["conditions"][-1]
    assert last["type"] == "Failed" and "stopped" in last["message"]
