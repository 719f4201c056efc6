"""Real Kubernetes API servers for the cluster tests, on 127.0.0.1 free ports.

- `crd_apiserver`: the v1.36 CRD API server (k8s.io/apiextensions-apiserver, built by
  scripts/standins/40-crd-apiserver.sh) on its own etcd 3.5, holding the upstream Kubeflow
  CRDs (tests/crds.py CRD_SOURCES) loaded unchanged: custom resources are validated exactly as
  a v1.36 cluster would (schema, CEL, pruning, status subresource, SSA). No core API, no RBAC.
- `core_apiserver`: the v1.20 kube-apiserver (scripts/standins/41-kube-apiserver.sh) on its
  own etcd 3.4, --authorization-mode=RBAC: Namespaces, ConfigMaps, Services, Pods. No
  controller-manager and no kubelet: pods stay Pending, nothing is garbage-collected, no
  default ServiceAccount appears (so the ServiceAccount admission plugin is off).

Each writes a kubeconfig (mode 0600) with three contexts on the same server: `admin`
(system:masters, the current one), `nobody` (a valid token with no RBAC rights) and
`bad-token` (a token the server does not know: 401). Both servers and their etcds are
stopped by PID when the session ends; a missing binary skips with the script to run.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import secrets
import select
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.backends.local.procs import free_port
from tests.conftest import SHARED, need_upstream

CACHE = Path(os.environ.get("KFLAB_STANDIN_CACHE", "/var/cache/kflab-standins"))
CRD_BIN = CACHE / "crd-apiserver" / "current" / "bin"
CORE_BIN = CACHE / "kube-apiserver" / "current" / "bin"


def _die_with_parent() -> None:
    """In the child: get SIGTERM if pytest dies, so no server outlives a killed test run."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stop(proc: subprocess.Popen | None, grace: float = 10) -> None:
    """Stop one process we started, by its PID: SIGTERM, then SIGKILL after `grace`."""
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(grace)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Etcd:
    """One etcd on 127.0.0.1, data in `data`."""

    binary: Path
    data: Path
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port, peer = free_port(), free_port()
        log = self.data.parent / f"{self.data.name}.log"
        argv = [str(self.binary), "--name", "kflab", "--data-dir", str(self.data),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"kflab=http://127.0.0.1:{peer}"]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited ({self.proc.returncode}):\n{_tail(log)}")
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                if json.loads(r.read()).get("health") == "true":
                    return
            time.sleep(0.2)
        raise RuntimeError(f"etcd not healthy after 30 s:\n{_tail(log)}")

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        # etcd's JSON gateway to its gRPC API (v3), loopback only.
        req = urllib.request.Request(f"{self.url}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def revision(self) -> int:
        """The store's current revision (what the API server calls resourceVersion)."""
        key = base64.b64encode(b"kflab-probe").decode()
        return int(self._post("/v3/kv/range", {"key": key})["header"]["revision"])

    def put(self, key: str, value: str) -> int:
        """Write a key outside the API server's prefix (moves the revision); returns it."""
        out = self._post("/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                                         "value": base64.b64encode(value.encode()).decode()})
        return int(out["header"]["revision"])

    def compact(self) -> int:
        """Compact history up to now: any watch from an older resourceVersion gets 410."""
        rev = self.revision()
        self._post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    def stop(self) -> None:
        _stop(self.proc)


@dataclass
class ApiServer:
    """An API server process on 127.0.0.1 with its etcd, restartable on the same port."""

    name: str
    argv: list[str]
    root: Path
    etcd: Etcd
    port: int
    ca: Path
    kubeconfig: Path
    tokens: dict[str, str]
    proc: subprocess.Popen | None = None
    restarts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def start(self, timeout: float = 90) -> None:
        log = self.root / f"{self.name}.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{_tail(log)}")
            if self.ca.exists():
                req = urllib.request.Request(
                    f"{self.url}/readyz",
                    headers={"Authorization": f"Bearer {self.tokens['admin']}"})
                with contextlib.suppress(OSError, ssl.SSLError), \
                        urllib.request.urlopen(req, timeout=2, context=self._ssl()) as r:
                    if r.status == 200:
                        return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {timeout:g} s:\n{_tail(log)}")

    def stop(self) -> None:
        _stop(self.proc)

    def restart(self) -> None:
        """Stop the API server process (etcd stays) and start it again on the same port."""
        self.stop()
        self.restarts += 1
        self.start()

    def kube(self, context: str | None = None, timeout: float = 10.0) -> Any:
        from lab.kube.client import connect

        return connect(self.kubeconfig, context, timeout=timeout)

    @contextlib.contextmanager
    def proxied(self) -> Iterator[tuple[TcpProxy, Any]]:
        """A TcpProxy to this server and an admin Kube that goes through it."""
        proxy = TcpProxy(self.port)
        try:
            path = write_kubeconfig(self.root / f"kubeconfig-proxy-{proxy.port}", proxy.url,
                                    self.ca, self.tokens)
            from lab.kube.client import connect

            yield proxy, connect(path, "admin")
        finally:
            proxy.close()

    def serves(self, api_version: str, plural: str, timeout: float = 30) -> None:
        """Wait until the server serves `plural` again (a restarted server loads its CRDs
        a moment after /readyz)."""
        req = urllib.request.Request(f"{self.url}/apis/{api_version}/{plural}?limit=1",
                                     headers={"Authorization": f"Bearer {self.tokens['admin']}"})
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(req, timeout=2, context=self._ssl()) as r:
                    if r.status == 200:
                        return
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def shutdown(self) -> None:
        try:
            self.stop()
        finally:
            self.etcd.stop()


class TcpProxy:
    """A loopback TCP relay in front of an API server, so a test can cut the client's
    connections (`cut`) or refuse new ones for a while (`hold`) without touching the server.
    TLS passes through untouched: the client still verifies the server's certificate."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held = threading.Event()
        self.cuts = 0
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.held.is_set():
                client.close()  # the client sees the connection closed at once
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        pair = {a: b, b: a}
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select(list(pair), [], [], 0.5)
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    pair[src].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()

    def cut(self) -> int:
        """Close every relayed connection (a dropped watch); returns how many pairs."""
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
                s.close()
        self.cuts += 1
        return len(conns) // 2

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        self.cut()


def write_kubeconfig(path: Path, url: str, ca: Path, tokens: dict[str, str]) -> Path:
    """A kubeconfig (0600) with one cluster and a context per token name; `admin` current."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "admin",
        "clusters": [{"name": "standin", "cluster": {"server": url,
                                                     "certificate-authority": str(ca)}}],
        "users": [{"name": n, "user": {"token": t}} for n, t in tokens.items()],
        "contexts": [{"name": n, "context": {"cluster": "standin", "user": n}}
                     for n in tokens],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(config, fh)
    return path


def _tokens(root: Path) -> tuple[dict[str, str], Path]:
    """Tokens for admin and nobody in a token file; bad-token is known to no server."""
    tokens = {"admin": secrets.token_hex(16), "nobody": secrets.token_hex(16),
              "bad-token": secrets.token_hex(16)}
    path = root / "tokens.csv"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f'{tokens["admin"]},admin,admin,"system:masters"\n')
        fh.write(f'{tokens["nobody"]},nobody,nobody\n')
    return tokens, path


def _need(binaries: list[Path], script: str) -> None:
    missing = [str(b) for b in binaries if not os.access(b, os.X_OK)]
    if missing:
        pytest.skip(f"API-server stand-in not built ({', '.join(missing)}): "
                    f"run scripts/standins/{script}")


def start_crd_apiserver(root: Path) -> ApiServer:
    """etcd + the v1.36 CRD API server in `root` (started, ready)."""
    root.mkdir(parents=True, exist_ok=True)
    etcd = Etcd(CRD_BIN / "etcd", root / "etcd")
    etcd.start()
    tokens, token_file = _tokens(root)
    port = free_port()
    certs = root / "certs"
    argv = [str(CRD_BIN / "crd-apiserver"), f"--etcd-servers={etcd.url}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={certs}",
            f"--token-auth-file={token_file}"]
    ca = certs / "apiserver.crt"
    server = ApiServer("crd-apiserver", argv, root, etcd, port, ca,
                       write_kubeconfig(root / "kubeconfig", f"https://127.0.0.1:{port}", ca,
                                        tokens), tokens)
    try:
        server.start()
    except BaseException:
        server.shutdown()
        raise
    return server


def start_core_apiserver(root: Path) -> ApiServer:
    """etcd + the v1.20 kube-apiserver (RBAC) in `root` (started, ready)."""
    root.mkdir(parents=True, exist_ok=True)
    etcd = Etcd(CORE_BIN / "etcd", root / "etcd")
    etcd.start()
    tokens, token_file = _tokens(root)
    sa_key = root / "sa.key"
    subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(sa_key), "-pubout", "-out",
                    str(root / "sa.pub")], check=True, capture_output=True)
    port = free_port()
    certs = root / "certs"
    argv = [str(CORE_BIN / "kube-apiserver"), f"--etcd-servers={etcd.url}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", "--insecure-port=0",
            f"--cert-dir={certs}", f"--token-auth-file={token_file}",
            "--authorization-mode=RBAC", f"--service-account-key-file={root / 'sa.pub'}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/24",
            # No controller-manager creates the default ServiceAccount (and its token):
            # without this, every Pod would be refused for want of one.
            "--disable-admission-plugins=ServiceAccount"]
    ca = certs / "apiserver.crt"
    server = ApiServer("kube-apiserver", argv, root, etcd, port, ca,
                       write_kubeconfig(root / "kubeconfig", f"https://127.0.0.1:{port}", ca,
                                        tokens), tokens)
    try:
        server.start()
    except BaseException:
        server.shutdown()
        raise
    return server


def load_upstream_crds(server: ApiServer, shared: Path) -> list[str]:
    """Apply the upstream CRDs unchanged (server-side, as `kubectl apply --server-side`) and
    wait until each is Established; returns their names."""
    from lab.kube.objects import Ref, apply
    from lab.kube.watch import condition_is, wait_for
    from tests.crds import crd_documents

    kube = server.kube()
    names = []
    for crd in crd_documents(shared):
        apply(kube, crd, manager="kflab-test-crds")
        names.append(crd["metadata"]["name"])
    for name in names:
        wait_for(kube, Ref("apiextensions.k8s.io/v1", "CustomResourceDefinition", name),
                 condition_is("Established"), timeout=60, describe="be Established")
    return names


@pytest.fixture(scope="session")
def crd_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """The v1.36 CRD API server with the upstream Kubeflow CRDs, for the whole session."""
    _need([CRD_BIN / "crd-apiserver", CRD_BIN / "etcd"], "40-crd-apiserver.sh")
    need_upstream()
    server = start_crd_apiserver(tmp_path_factory.mktemp("crd-apiserver"))
    try:
        server.extra["crds"] = load_upstream_crds(server, SHARED)
        yield server
    finally:
        server.shutdown()


@pytest.fixture(scope="session")
def core_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """The v1.20 kube-apiserver (RBAC on) for core objects, for the whole session."""
    _need([CORE_BIN / "kube-apiserver", CORE_BIN / "etcd"], "41-kube-apiserver.sh")
    server = start_core_apiserver(tmp_path_factory.mktemp("kube-apiserver"))
    try:
        yield server
    finally:
        server.shutdown()
