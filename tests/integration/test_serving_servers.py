"""Real KServe model servers on the local backend: readiness, predictions, robustness.

Each server is a real `python -m lab.backends.local.serving.model_server` process; nothing is
mocked.
Servers are shared per module where a test only reads, to keep CI time down.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from crds import crd_schema, schema_errors

from lab.backends.local import LocalBackend
from lab.backends.local.serving.handler import proc_id
from lab.errors import InputError, LabError
from lab.kube.conditions import get_condition

REPO = Path(__file__).resolve().parents[2]
ROWS = [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6], [7.7, 3.0, 6.1, 2.3]]


def isvc(name: str, fmt: str, uri: str, protocol: str = "v1") -> dict:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name},
            "spec": {"predictor": {"model": {"modelFormat": {"name": fmt},
                                             "protocolVersion": protocol,
                                             "storageUri": uri}}}}


def ready(obj: dict) -> dict:
    return get_condition(obj["status"], "Ready") or {}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import joblib
    import xgboost as xgb
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    root = tmp_path_factory.mktemp("models")
    X, y = load_iris(return_X_y=True)
    (root / "sk").mkdir()
    joblib.dump(LogisticRegression(max_iter=500).fit(X, y), root / "sk" / "model.joblib")
    (root / "xgb").mkdir()
    xgb.train({"objective": "multi:softmax", "num_class": 3, "nthread": 1, "seed": 0},
              xgb.DMatrix(X, label=y), num_boost_round=10).save_model(root / "xgb" / "model.json")
    (root / "corrupt").mkdir()
    (root / "corrupt" / "model.joblib").write_bytes(b"\x80\x04this is not a pickle")
    return root


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> LocalBackend:
    b = LocalBackend(str(tmp_path_factory.mktemp("state")))
    yield b
    b.down()


@pytest.fixture(scope="module")
def iris(backend: LocalBackend, models: Path) -> dict:
    """An sklearn service that also asked for gRPC (protocolVersion grpc-v2), deployed while
    127.0.0.1:8080 -- KServe's default port -- is busy."""
    busy = socket.socket()
    with contextlib.suppress(OSError):
        busy.bind(("127.0.0.1", 8080))
        busy.listen()
    try:
        obj = backend.apply(isvc("iris", "sklearn", f"file://{models / 'sk'}", "grpc-v2"),
                            base_dir=models)
        assert ready(obj).get("status") == "True", obj["status"]
        obj["busy_port"] = busy.getsockname()[1] if busy.getsockname()[1] else None
        yield obj
    finally:
        busy.close()


def listening_sockets(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state, and every UDP socket, owned by
    PID's process group, read from /proc/net/{tcp,tcp6,udp,udp6} and the fd tables."""
    pids = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[2]) == pid:  # field 5: process group
                    pids.append(int(entry.name))
    inodes = set()
    for p in set(pids):
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{p}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
    found = []
    tables = (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32), ("/proc/net/udp", 8),
              ("/proc/net/udp6", 32))
    for table, width in tables:
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            # TCP: only LISTEN (0A) sockets accept; UDP: any bound socket receives
            if cols[9] not in inodes or ("tcp" in table and cols[3] != "0A"):
                continue
            addr_hex, port_hex = cols[1].split(":")
            raw = bytes.fromhex(addr_hex)
            # the kernel prints each 32-bit word in host (little-endian) order
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            fam = socket.AF_INET if width == 8 else socket.AF_INET6
            found.append((socket.inet_ntop(fam, words), int(port_hex, 16)))
    return found


LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def test_ready_status_url_and_predictions_v1_v2(backend: LocalBackend, iris: dict) -> None:
    status = iris["status"]
    assert status["url"].startswith("http://127.0.0.1:")
    assert status["address"]["url"] == status["url"]
    assert get_condition(status, "PredictorReady")["status"] == "True"
    assert status["modelStatus"]["states"]["activeModelState"] == "Loaded"
    assert backend.predict("iris", {"instances": ROWS}, protocol="v1") == \
        {"predictions": [1, 1, 2]}
    v2 = backend.predict("iris", {"instances": ROWS}, protocol="v2")
    assert v2["outputs"][0]["shape"] == [3] and v2["outputs"][0]["data"] == [1, 1, 2]
    assert [o["metadata"]["name"] for o in backend.list("InferenceService")] == ["iris"]


def test_live_status_validates_against_the_crd(backend: LocalBackend, iris: dict,
                                               shared: Path) -> None:
    live = backend.get("InferenceService", "iris")
    assert schema_errors(crd_schema(shared, "InferenceService"), live) == []


def test_nothing_listens_beyond_loopback_rest_and_grpc(backend: LocalBackend, iris: dict) -> None:
    rec = backend.procs.get(proc_id("default", "iris"))
    socks = listening_sockets(rec.pid)
    rest = int(iris["status"]["url"].rsplit(":", 1)[1])
    grpc_port = int(iris["status"]["components"]["predictor"]["grpcUrl"].rsplit(":", 1)[1])
    assert {port for _, port in socks} == {rest, grpc_port}, socks
    assert all(addr in LOOPBACK for addr, _ in socks), socks


def test_grpc_v2_answers_on_loopback(iris: dict) -> None:
    """A real gRPC ModelInfer call with KServe's generated stubs."""
    import grpc
    from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
    from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc as pb_grpc

    target = iris["status"]["components"]["predictor"]["grpcUrl"].removeprefix("grpc://")
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        tensor = pb.ModelInferRequest.InferInputTensor(
            name="input-0", datatype="FP32", shape=[3, 4],
            contents=pb.InferTensorContents(fp32_contents=[x for r in ROWS for x in r]))
        reply = stub.ModelInfer(pb.ModelInferRequest(model_name="iris", inputs=[tensor]),
                                timeout=30)
    assert list(reply.outputs[0].contents.int64_contents) == [1, 1, 2]


def test_busy_port_is_avoided(iris: dict) -> None:
    port = int(iris["status"]["url"].rsplit(":", 1)[1])
    if iris["busy_port"] is None:
        pytest.skip("127.0.0.1:8080 was taken by someone else; the port test needs it")
    assert port != iris["busy_port"]


def test_hundred_concurrent_requests_lose_none(backend: LocalBackend, iris: dict) -> None:
    def one(i: int) -> list:
        row = ROWS[i % 3]
        return backend.predict("iris", {"instances": [row]}, protocol="v1")["predictions"]

    with ThreadPoolExecutor(max_workers=100) as pool:
        answers = list(pool.map(one, range(100)))
    assert len(answers) == 100
    assert answers == [[[1, 1, 2][i % 3]] for i in range(100)]


def test_cli_get_predict_logs(backend: LocalBackend, iris: dict, tmp_path: Path) -> None:
    body = tmp_path / "in.json"
    body.write_text(json.dumps({"instances": ROWS}))
    env = {**os.environ, "KFLAB_STATE": str(backend.root), "PYTHONPATH": str(REPO)}

    def kflab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lab.cli", *args], env=env,
                              capture_output=True, text=True, timeout=60)

    out = kflab("predict", "iris", "-f", str(body), "--protocol", "v2")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outputs"][0]["data"] == [1, 1, 2]
    table = kflab("get", "isvc")
    assert "iris" in table.stdout and "True" in table.stdout
    logs = kflab("logs", "isvc", "iris")
    assert "/v2/models/iris/infer" in logs.stdout
    missing = kflab("predict", "nope", "-f", str(body))
    assert missing.returncode == 1 and "not found" in missing.stderr  # NotFound, as kubectl


def test_bad_manifest_leaves_the_running_version_alone(backend: LocalBackend, iris: dict,
                                                       models: Path) -> None:
    with pytest.raises(InputError, match="storageUri"):
        backend.apply(isvc("iris", "sklearn", "s3://bucket/model"), base_dir=models)
    assert ready(backend.get("InferenceService", "iris")).get("status") == "True"
    assert backend.predict("iris", {"instances": ROWS[:1]})["predictions"] == [1]


XGB_EXAMPLE = """\
apiVersion: "serving.kserve.io/v1beta1"
kind: "InferenceService"
metadata:
  name: "xgboost-iris"
spec:
  predictor:
    model:
      modelFormat:
        name: xgboost
      protocolVersion: v2
      runtime: kserve-xgbserver
      storageUri: "gs://kfserving-examples/models/xgboost/iris"
"""


def test_published_xgboost_example_then_crash_shows_in_status(
        backend: LocalBackend, models: Path, tmp_path: Path, kflab) -> None:
    """KServe's xgboost iris example, unmodified, with its model file in the local mirror."""
    mirror = tmp_path / "mirror"
    target = mirror / "gs" / "kfserving-examples" / "models" / "xgboost" / "iris"
    target.mkdir(parents=True)
    (target / "model.json").write_bytes((models / "xgb" / "model.json").read_bytes())
    manifest = tmp_path / "xgboost.yaml"
    manifest.write_text(XGB_EXAMPLE)
    env = {"KFLAB_STATE": str(backend.root), "KFLAB_MODEL_MIRROR": str(mirror)}
    out = kflab("apply", "-f", str(manifest), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "inferenceservice/xgboost-iris Ready" in out.stdout
    # runtime: kserve-xgbserver is honoured (it serves v2 too), so no MLServer note
    assert "kserve-mlserver" not in out.stdout
    assert "kserve-xgbserver" in json.dumps(backend.get("InferenceService", "xgboost-iris"))
    answer = backend.predict("xgboost-iris", {"instances": ROWS}, protocol="v2")
    assert answer["outputs"][0]["data"] == [1.0, 1.0, 2.0]
    rec = backend.procs.get(proc_id("default", "xgboost-iris"))
    # protocol v2 did not ask for gRPC: exactly one (REST) listener, on loopback
    socks = listening_sockets(rec.pid)
    assert len(socks) == 1 and socks[0][0] in LOOPBACK, socks
    os.kill(rec.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while rec.running and time.monotonic() < deadline:
        time.sleep(0.05)
    got = backend.get("InferenceService", "xgboost-iris")
    cond = ready(got)
    assert cond["status"] == "False" and cond["reason"] == "ServerExited"
    assert str(rec.pid) in cond["message"]
    assert got["status"]["modelStatus"]["lastFailureInfo"]["reason"] == "RuntimeUnhealthy"
    table = kflab("get", "isvc", "xgboost-iris", env=env)
    assert "False" in table.stdout
    with pytest.raises(LabError, match="not ready"):
        backend.predict("xgboost-iris", {"instances": ROWS})


def test_corrupt_model_gives_failed_condition_with_server_error(
        backend: LocalBackend, models: Path, tmp_path: Path, kflab) -> None:
    manifest = tmp_path / "broken.yaml"
    manifest.write_text(json.dumps(isvc("broken", "sklearn", str(models / "corrupt"))))
    out = kflab("apply", "-f", str(manifest), env={"KFLAB_STATE": str(backend.root)})
    assert out.returncode == 1 and "inferenceservice/broken Failed" in out.stdout
    assert "ModelLoadFailed" in out.stderr
    obj = backend.get("InferenceService", "broken")
    cond = ready(obj)
    assert cond["status"] == "False" and cond["reason"] == "ModelLoadFailed"
    # the server's own exception, as its traceback ends in the log, not a generic message
    last = [line for line in backend.logs("InferenceService", "broken") if line.strip()][-1]
    assert last in cond["message"] and str(models / "corrupt") in cond["message"]
    info = obj["status"]["modelStatus"]
    assert info["states"]["activeModelState"] == "FailedToLoad"
    assert info["transitionStatus"] == "BlockedByFailedLoad"
    assert info["lastFailureInfo"]["message"] == cond["message"]
    assert backend.procs.get(proc_id("default", "broken")) is None  # stopped and forgotten
    gone = kflab("delete", "isvc", "broken", env={"KFLAB_STATE": str(backend.root)})
    assert gone.returncode == 0 and backend.get("InferenceService", "broken") is None


def test_down_stops_every_server(backend: LocalBackend, iris: dict) -> None:
    pids = [r.pid for r in backend.procs.all()]
    assert pids
    backend.down()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() and "Z" not in
              Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
              for p in pids if Path(f"/proc/{p}").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert backend.procs.all() == []
    assert ready(backend.get("InferenceService", "iris"))["status"] == "False"
