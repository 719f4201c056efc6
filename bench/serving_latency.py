"""Serving latency: kflab's local InferenceService vs a bare kserve.ModelServer, same model.

    python bench/serving_latency.py [-n 2000] [-c 8] [--rounds 3]

Both servers load the same scikit-learn iris model with the same kserve.Model class and
run as separate processes with default KServe settings (logs to a file). The load generator
is bounded and closed-loop: N requests over M keep-alive connections on loopback, V1
`:predict` with the 2-row body of KServe's sklearn-iris example; every answer is checked.
Both are started the same way (procs.Registry: new session, log file, same environment),
so only the server code differs. Rounds alternate between the servers, and which goes
first, so drift on a shared machine hits both alike; the per-round p50 range is printed as
the noise floor.
Printed: p50/p99 latency and requests/s per server, and ours/bare ratios (target <= 1.10x).

The bare baseline is stock `ModelServer.start()`, which binds 0.0.0.0. To keep every
listener private, the whole benchmark re-runs itself in a fresh network namespace
(`unshare --net`) where only a loopback interface exists; where that is not permitted, the
baseline's REST host is set to 127.0.0.1 (nothing else changed) and the output says so.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import itertools
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BODY = json.dumps({"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}).encode()
EXPECTED = {"predictions": [1, 1]}
NO_NETNS = 97  # exit code: the private namespace could not be set up


def lo_up() -> None:
    """Bring up `lo` in a new network namespace (SIOCGIFFLAGS / SIOCSIFFLAGS)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifreq = struct.pack("16sH14s", b"lo", 0, b"")
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifreq))[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 0x1, b""))  # IFF_UP
    s.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bare_server(model_dir: str, port: int, loopback_only: bool) -> None:
    """A stock kserve.ModelServer serving the same model class (run as a child process)."""
    sys.argv = sys.argv[:1]
    import kserve

    from lab.backends.local.serving.models import SKLearnModel

    model = SKLearnModel("iris", Path(model_dir))
    model.load()
    server_cls = kserve.ModelServer
    if loopback_only:
        class LoopbackOnly(kserve.ModelServer):
            def setup_event_loop(self) -> None:  # runs after start() built its servers
                self._rest_server.config.host = "127.0.0.1"
                super().setup_event_loop()

        server_cls = LoopbackOnly
    server_cls(http_port=port, enable_grpc=False, grace_period=3).start([model])


def wait_ready(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/v1/models/iris", timeout=2) as r:
                if json.loads(r.read()).get("ready"):
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server at {url} not ready in {timeout}s")


async def load(host: str, port: int, n: int, conc: int) -> tuple[list[float], float, int]:
    """N requests over `conc` keep-alive connections; (latencies s, wall s, bad answers)."""
    path = "/v1/models/iris:predict"
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n").encode()
    request = head + BODY
    counter = itertools.count()
    lat: list[float] = []
    bad = 0

    async def worker() -> None:
        nonlocal bad
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while next(counter) < n:
                t0 = time.perf_counter()
                writer.write(request)
                await writer.drain()
                header = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in header.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                payload = await reader.readexactly(length)
                lat.append(time.perf_counter() - t0)
                if not header.startswith(b"HTTP/1.1 200") or json.loads(payload) != EXPECTED:
                    bad += 1
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    return lat, time.perf_counter() - t0, bad


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run(args: argparse.Namespace, mode: str) -> int:
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    from lab.backends.local import LocalBackend

    tmp = Path(tempfile.mkdtemp(prefix="kflab-bench-"))
    model_dir = tmp / "model"
    model_dir.mkdir()
    X, y = load_iris(return_X_y=True)
    joblib.dump(LogisticRegression(max_iter=500).fit(X, y), model_dir / "model.joblib")
    backend = LocalBackend(str(tmp / "state"))
    try:
        obj = backend.apply({
            "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "iris"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                             "storageUri": f"file://{model_dir}"}}}},
            base_dir=tmp)
        ours_url = obj["status"].get("url")
        if not ours_url:
            raise SystemExit(f"ours failed: {obj['status']}")
        port = free_port()
        # started exactly as ours is (new session, log file in append mode, same env), so
        # the server code is the only difference
        backend.procs.spawn(
            "bare", [sys.executable, __file__, "--bare-server", str(model_dir), str(port),
                     "1" if mode == "loopback" else "0"],
            owner="bench", log=tmp / "bare.log", env={**os.environ, "PYTHONUNBUFFERED": "1"})
        bare_url = f"http://127.0.0.1:{port}"
        wait_ready(bare_url)
        targets = {"ours": ours_url, "bare": bare_url}
        results: dict[str, list[tuple[list[float], float, int]]] = {k: [] for k in targets}
        for url in targets.values():  # warm-up
            host, p = url.removeprefix("http://").split(":")
            asyncio.run(load(host, int(p), min(300, args.n), args.c))
        for i in range(args.rounds):  # alternate which server goes first
            for name in (("ours", "bare") if i % 2 == 0 else ("bare", "ours")):
                host, p = targets[name].removeprefix("http://").split(":")
                results[name].append(asyncio.run(load(host, int(p), args.n, args.c)))
    finally:
        backend.down()  # stops ours and the bare server (both in its registry)
        shutil.rmtree(tmp, ignore_errors=True)

    baseline = ("stock ModelServer in a private netns" if mode == "netns"
                else "stock ModelServer, REST host set to 127.0.0.1")
    print(f"serving latency: N={args.n} requests x {args.rounds} rounds, {args.c} concurrent, "
          f"V1 sklearn iris, {os.cpu_count()} CPUs, baseline={baseline}")
    summary = {}
    for name, rounds in results.items():
        lat = [x for r in rounds for x in r[0]]
        rps = statistics.median(len(r[0]) / r[1] for r in rounds)
        lost = sum(r[2] for r in rounds) + (args.n * args.rounds - len(lat))
        summary[name] = (pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, rps, lost)
        spread = [pct(r[0], 50) * 1e3 for r in rounds]
        print(f"  {name:5s} p50 {summary[name][0]:7.3f} ms  p99 {summary[name][1]:7.3f} ms  "
              f"{rps:8.1f} req/s  bad/lost {lost}   (per-round p50 {min(spread):.3f}.."
              f"{max(spread):.3f} ms)")
    o, b = summary["ours"], summary["bare"]
    print(f"  ratio ours/bare: p50 {o[0] / b[0]:.3f}x  p99 {o[1] / b[1]:.3f}x  "
          f"throughput {o[2] / b[2]:.3f}x  (target: latency <= 1.10x)")
    return 0 if o[3] == 0 and b[3] == 0 else 1


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--bare-server":
        bare_server(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=2000, help="requests per round and server")
    ap.add_argument("-c", type=int, default=8, help="concurrent connections")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-netns", action="store_true", help="skip the private namespace")
    ap.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.in_netns:
        try:
            lo_up()
        except OSError as exc:
            print(f"cannot bring up lo in the new namespace ({exc})", file=sys.stderr)
            return NO_NETNS
        return run(args, "netns")
    if not args.no_netns and shutil.which("unshare"):
        for flags in (["--net"], ["--net", "--map-root-user"]):
            probe = subprocess.run(["unshare", *flags, "true"], capture_output=True)
            if probe.returncode == 0:
                rc = subprocess.call(["unshare", *flags, sys.executable, __file__,
                                      "--in-netns", *sys.argv[1:]])
                if rc != NO_NETNS:
                    return rc
                break
    return run(args, "loopback")


if __name__ == "__main__":
    sys.exit(main())
