"""A STAND-IN cluster for the cluster backend: real API servers, stand-ins for the rest.

Real: the v1.36 CRD API server holding the upstream Kubeflow CRDs unchanged (every custom
resource kflab writes is validated by it), the v1.20 kube-apiserver (Namespaces, ConfigMaps,
Pods, Services, Nodes; pod logs and port-forward proxied to the node's kubelet), both on
their own etcd, built by scripts/standins/4x-*.sh.
Stand-ins (named so everywhere): the aggregation layer (aggregator.py: one URL for both
servers), one node's kubelet (kubelet.py), and the Kubeflow controllers (controllers.py),
which run each workload on this machine and write status as the upstream controller would.

`StandinCluster.start(root)` brings it all up on 127.0.0.1 and writes a kubeconfig (0600)
with contexts `admin`, `nobody` (valid token, no RBAC rights) and `bad-token` (401).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.standins.aggregator import Aggregator, Upstream
from tests.standins.kubelet import Kubelet, self_signed

CACHE = Path(os.environ.get("KFLAB_STANDIN_CACHE", "/var/cache/kflab-standins"))


def _bin(name: str, binary: str) -> Path:
    """CACHE/NAME/current/bin, else the one keyed build that has `binary`."""
    current = CACHE / name / "current" / "bin"
    if (current / binary).exists():
        return current
    built = sorted((CACHE / name).glob(f"*/bin/{binary}"))
    return built[-1].parent if built else current


CRD_BIN = _bin("crd-apiserver", "crd-apiserver")
CORE_BIN = _bin("kube-apiserver", "kube-apiserver")
NODE = "standin-node"
# the kubelet marks a pod whose containers run (and pass their probes) Ready
READY = {"type": "Ready", "status": "True"}


def missing_binaries() -> list[str]:
    need = [CRD_BIN / "crd-apiserver", CRD_BIN / "etcd", CORE_BIN / "kube-apiserver",
            CORE_BIN / "etcd"]
    return [str(p) for p in need if not os.access(p, os.X_OK)]


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def free_port() -> int:
    from lab.backends.local.procs import free_port as fp

    return fp()


@dataclass
class Proc:
    argv: list[str]
    log: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        return ""


def _etcd(binary: Path, root: Path) -> tuple[Proc, str]:
    port, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    p = Proc([str(binary), "--name", "kflab", "--data-dir", str(root / "etcd"),
              "--listen-client-urls", url, "--advertise-client-urls", url,
              "--listen-peer-urls", f"http://127.0.0.1:{peer}",
              "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
              "--initial-cluster", f"kflab=http://127.0.0.1:{peer}"], root / "etcd.log")
    p.start()
    return p, url


def _wait_ready(url: str, ca: Path, token: str, proc: Proc, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.proc is not None and proc.proc.poll() is not None:
            raise RuntimeError(f"{proc.argv[0]} exited:\n{proc.tail()}")
        if ca.exists():
            req = urllib.request.Request(f"{url}/readyz",
                                         headers={"Authorization": f"Bearer {token}"})
            with contextlib.suppress(OSError, ssl.SSLError), urllib.request.urlopen(
                    req, timeout=2, context=ssl.create_default_context(cafile=str(ca))) as r:
                if r.status == 200:
                    return
        time.sleep(0.3)
    raise RuntimeError(f"{proc.argv[0]} not ready after {timeout:g}s:\n{proc.tail()}")


@dataclass
class StandinCluster:
    root: Path
    tokens: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    kubelet: Kubelet | None = None
    aggregator: Aggregator | None = None
    kubeconfig: Path | None = None
    controllers: Any = None
    kfp: Any = None
    stoppers: list[Any] = field(default_factory=list)

    @classmethod
    def start(cls, root: Path, shared: Path) -> StandinCluster:
        self = cls(root)
        try:
            self._start(shared)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, shared: Path) -> None:
        root = self.root
        root.mkdir(parents=True, exist_ok=True)
        self.tokens = {"admin": secrets.token_hex(16), "nobody": secrets.token_hex(16),
                       "bad-token": secrets.token_hex(16)}
        token_file = root / "tokens.csv"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f'{self.tokens["admin"]},admin,admin,"system:masters"\n')
            fh.write(f'{self.tokens["nobody"]},nobody,nobody\n')
        cert, key = self_signed(root / "kubelet")
        self.kubelet = Kubelet(cert, key)
        self.kubelet.start()
        # the v1.20 kube-apiserver (core objects; logs/port-forward via the kubelet stand-in)
        core_root = root / "core"
        core_root.mkdir()
        etcd, etcd_url = _etcd(CORE_BIN / "etcd", core_root)
        self.procs.append(etcd)
        sa = core_root / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(sa), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(sa), "-pubout", "-out",
                        str(core_root / "sa.pub")], check=True, capture_output=True)
        core_port = free_port()
        core = Proc([str(CORE_BIN / "kube-apiserver"), f"--etcd-servers={etcd_url}",
                     "--bind-address=127.0.0.1", f"--secure-port={core_port}",
                     "--insecure-port=0", f"--cert-dir={core_root / 'certs'}",
                     f"--token-auth-file={token_file}", "--authorization-mode=RBAC",
                     f"--service-account-key-file={core_root / 'sa.pub'}",
                     f"--service-account-signing-key-file={sa}",
                     "--service-account-issuer=https://kubernetes.default.svc",
                     "--service-cluster-ip-range=10.96.0.0/24",
                     "--disable-admission-plugins=ServiceAccount",
                     f"--kubelet-certificate-authority={cert}",
                     "--kubelet-preferred-address-types=InternalIP"],
                    core_root / "kube-apiserver.log")
        core.start()
        self.procs.append(core)
        # the v1.36 CRD API server (the upstream CRDs)
        crd_root = root / "crd"
        crd_root.mkdir()
        etcd2, etcd2_url = _etcd(CRD_BIN / "etcd", crd_root)
        self.procs.append(etcd2)
        crd_port = free_port()
        crd = Proc([str(CRD_BIN / "crd-apiserver"), f"--etcd-servers={etcd2_url}",
                    "--bind-address=127.0.0.1", f"--secure-port={crd_port}",
                    f"--cert-dir={crd_root / 'certs'}", f"--token-auth-file={token_file}"],
                   crd_root / "crd-apiserver.log")
        crd.start()
        self.procs.append(crd)
        core_ca, crd_ca = core_root / "certs" / "apiserver.crt", crd_root / "certs" / \
            "apiserver.crt"
        _wait_ready(f"https://127.0.0.1:{core_port}", core_ca, self.tokens["admin"], core)
        _wait_ready(f"https://127.0.0.1:{crd_port}", crd_ca, self.tokens["admin"], crd)
        self.aggregator = Aggregator(
            Upstream("core", f"https://127.0.0.1:{core_port}", str(core_ca), self.tokens),
            Upstream("crd", f"https://127.0.0.1:{crd_port}", str(crd_ca), self.tokens),
            self.tokens)
        self.aggregator.start()
        self.kubeconfig = self._write_kubeconfig()
        self._load_crds(shared)
        self._register_node()

    def _write_kubeconfig(self) -> Path:
        assert self.aggregator is not None
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "admin",
                  "clusters": [{"name": "standin", "cluster": {"server": self.aggregator.url}}],
                  "users": [{"name": n, "user": {"token": t}} for n, t in self.tokens.items()],
                  "contexts": [{"name": n, "context": {"cluster": "standin", "user": n}}
                               for n in self.tokens]}
        path = self.root / "kubeconfig"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(config, fh)
        return path

    def kube(self, context: str | None = None) -> Any:
        from lab.kube.client import connect

        assert self.kubeconfig is not None
        return connect(self.kubeconfig, context)

    def _load_crds(self, shared: Path) -> None:
        from lab.kube.objects import Ref, apply
        from lab.kube.watch import condition_is, wait_for
        from tests.crds import crd_documents

        kube = self.kube()
        names = []
        for crd in crd_documents(shared):
            apply(kube, crd, manager="standin-crds")
            names.append(crd["metadata"]["name"])
        for name in names:
            wait_for(kube, Ref("apiextensions.k8s.io/v1", "CustomResourceDefinition", name),
                     condition_is("Established"), timeout=60, describe="be Established")
        assert self.aggregator is not None
        self.aggregator.refresh_groups()
        # What the lab profile installs with the Trainer (manifests/overlays/trainer): the
        # torch-distributed runtime, unchanged from the manifests.
        from tests.crds import TORCH_RUNTIME

        runtime = yaml.safe_load((shared / TORCH_RUNTIME).read_text())
        apply(kube, runtime, manager="standin-crds")

    def _register_node(self) -> None:
        """A Node whose kubelet is the stand-in (its InternalIP and port), marked Ready."""
        from lab.kube.objects import apply

        assert self.kubelet is not None
        kube = self.kube()
        apply(kube, {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}},
              manager="standin-kubelet")
        res = kube.resource("v1", "Node")
        status = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                  "message": "kubelet stand-in"}],
                  "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                {"type": "Hostname", "address": NODE}],
                  "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet.port}},
                  "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                  "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                  "nodeInfo": {"kubeletVersion": "v1.20.2-standin", "machineID": "",
                               "systemUUID": "", "bootID": "", "kernelVersion": "",
                               "osImage": "", "containerRuntimeVersion": "",
                               "kubeProxyVersion": "", "operatingSystem": "linux",
                               "architecture": "amd64"}}
        kube.dynamic.patch(res.status, body={"status": status}, name=NODE,
                           content_type="application/merge-patch+json")

    def stop(self) -> None:
        if self.controllers is not None:
            self.controllers.stop()
        for stop in self.stoppers:
            stop()
        if self.aggregator is not None:
            self.aggregator.stop()
        if self.kubelet is not None:
            self.kubelet.stop()
        for p in reversed(self.procs):
            p.stop()


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)[:2000]


def add_kfp(cluster: StandinCluster, root: Path) -> Any:
    """Kubeflow Pipelines' services as stand-ins (kfp.py), behind Services and Pods of the
    `kubeflow` namespace like a real install: ml-pipeline:8888, metadata-grpc-service:8080,
    seaweedfs:8333 and the Secret mlpipeline-minio-artifact; the kubelet stand-in forwards
    their pods' ports to the stand-in servers. Returns the KfpApi stand-in."""
    import base64 as b64

    from lab.kube.objects import apply
    from tests.standins.kfp import KfpApi, Mlmd, ObjectStore

    kube = cluster.kube()
    assert cluster.kubelet is not None
    mlmd, store = Mlmd(), ObjectStore()
    mlmd.start()
    store.start()
    kfp = KfpApi(root / "kfp", mlmd, store)
    kfp.start()
    cluster.stoppers += [kfp.stop, store.stop, mlmd.stop]
    apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow"}},
          manager="standin-kfp")
    apply(kube, {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "mlpipeline-minio-artifact", "namespace": "kubeflow"},
        "data": {"accesskey": b64.b64encode(store.access.encode()).decode(),
                 "secretkey": b64.b64encode(store.secret.encode()).decode()}},
        manager="standin-kfp")
    for service, port, local in (("ml-pipeline", 8888, kfp.port),
                                 ("metadata-grpc-service", 8080, mlmd.port),
                                 ("seaweedfs", 8333, store.port)):
        apply(kube, {"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": service, "namespace": "kubeflow"},
                     "spec": {"selector": {"app": service},
                              "ports": [{"name": "main", "port": port, "targetPort": port,
                                         "protocol": "TCP"}]}},
              manager="standin-kfp")
        pod = f"{service}-standin"
        apply(kube, {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": pod, "namespace": "kubeflow",
                                  "labels": {"app": service}},
                     "spec": {"nodeName": NODE, "containers": [{
                         "name": "main", "image": f"{service}:standin",
                         "ports": [{"containerPort": port, "protocol": "TCP"}]}]}},
              manager="standin-kfp")
        res = kube.resource("v1", "Pod")
        kube.dynamic.patch(res.status, body={"status": {"phase": "Running",
                                                        "podIP": "127.0.0.1",
                                                        "conditions": [READY]}},
                           name=pod, namespace="kubeflow",
                           content_type="application/merge-patch+json")
        cluster.kubelet.ports[("kubeflow", pod, port)] = local

    def on_pod(spec: dict[str, Any]) -> None:
        """A pod of a run's workflow (tests/standins/kfp.py KfpApi._make_pods)."""
        apply(kube, {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": spec["name"], "namespace": "kubeflow",
                                  "labels": spec["labels"],
                                  "annotations": spec["annotations"]},
                     "spec": {"nodeName": NODE, "containers": [
                         {"name": "wait", "image": "argoexec:standin"},
                         {"name": "main", "image": "kfp-launcher:standin"}]}},
              manager="standin-kfp")
        kube.dynamic.patch(kube.resource("v1", "Pod").status,
                           body={"status": {"phase": "Succeeded", "podIP": "127.0.0.1"}},
                           name=spec["name"], namespace="kubeflow",
                           content_type="application/merge-patch+json")
        lines = list(spec["lines"])
        assert cluster.kubelet is not None
        cluster.kubelet.logs[("kubeflow", spec["name"], "main")] = lambda: lines

    kfp.on_pod = on_pod
    return kfp


def start_world(root: Path, shared: Path) -> StandinCluster:
    """The whole stand-in cluster: API servers, node, controllers and KFP."""
    from tests.standins.controllers import Controllers

    cluster = StandinCluster.start(root, shared)
    try:
        cluster.kfp = add_kfp(cluster, root)
        cluster.controllers = Controllers(cluster, root / "controllers")
        cluster.controllers.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
