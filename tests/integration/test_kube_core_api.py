"""lab.kube against the real v1.20 kube-apiserver (RBAC on): core objects and every error path.

There is no kubelet, controller-manager or scheduler here: pods stay Pending, so their logs
and port-forwards cannot work; those tests check what can be checked (the one-line error,
the loopback listener on a free port). Namespaces never finish terminating (no namespace
controller), which is itself a realistic "never done" case.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.kube import logs, namespaces, objects, portforward, watch
from lab.kube.apierrors import Conflict, Forbidden, Unauthorized, Unreachable
from lab.kube.client import connect, contexts
from lab.kube.objects import MANAGER_APPLY, MANAGER_SCENARIO, Ref
from tests.integration.apiservers import write_kubeconfig
from tests.integration.controllers import collect_garbage

pytestmark = pytest.mark.integration


@pytest.fixture
def ns(core_apiserver) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    namespaces.ensure_namespace(core_apiserver.kube(), name)
    return name


def configmap(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": dict(data)}


def pod(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/x:1",
                                     "ports": [{"name": "http", "containerPort": 8080}]}]}}


def test_kubeconfig_is_private_and_has_contexts(core_apiserver):
    assert core_apiserver.kubeconfig.stat().st_mode & 0o777 == 0o600
    names, current = contexts(core_apiserver.kubeconfig)
    assert sorted(names) == ["admin", "bad-token", "nobody"] and current == "admin"
    with pytest.raises(LabError) as err:
        connect(core_apiserver.kubeconfig, "prod")
    assert "no context named 'prod'" in str(err.value)
    assert "use one of: admin, nobody, bad-token" in str(err.value)


def test_lab_namespace_is_labelled_and_idempotent(core_apiserver):
    kube = core_apiserver.kube()
    name = f"lab-{uuid.uuid4().hex[:6]}"
    first = namespaces.ensure_lab_namespace(kube, name)
    labels = first["metadata"]["labels"]
    assert labels["katib.kubeflow.org/metrics-collector-injection"] == "enabled"
    again = namespaces.ensure_lab_namespace(kube, name)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    # A label another tool adds stays when kflab ensures the namespace again.
    namespaces.ensure_namespace(kube, name, {"team": "ml"}, manager="someone-else")
    third = namespaces.ensure_lab_namespace(kube, name)
    assert third["metadata"]["labels"]["team"] == "ml"
    assert third["metadata"]["labels"]["katib.kubeflow.org/metrics-collector-injection"] == \
        "enabled"
    with pytest.raises(LabError):
        namespaces.ensure_namespace(kube, "Not_A_Namespace")
    # A cluster-scoped object ignores the namespace it is applied "into".
    again = objects.apply(kube, {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": name}}, manager=MANAGER_SCENARIO,
                          namespace="elsewhere")
    assert "namespace" not in again["metadata"]


def test_configmap_apply_idempotent_and_conflict(core_apiserver, ns):
    kube = core_apiserver.kube()
    one = objects.apply(kube, configmap("cfg", a="1"), manager=MANAGER_APPLY, namespace=ns)
    two = objects.apply(kube, configmap("cfg", a="1"), manager=MANAGER_APPLY, namespace=ns)
    assert one["metadata"]["resourceVersion"] == two["metadata"]["resourceVersion"]
    with pytest.raises(Conflict) as err:
        objects.apply(kube, configmap("cfg", a="2"), manager=MANAGER_SCENARIO, namespace=ns)
    assert err.value.fields == [(MANAGER_APPLY, ".data.a")]
    # Removing a field from the manifest removes it from the object (apply owns the set).
    objects.apply(kube, configmap("cfg", a="1", b="2"), manager=MANAGER_APPLY, namespace=ns)
    out = objects.apply(kube, configmap("cfg", b="2"), manager=MANAGER_APPLY, namespace=ns)
    assert out["data"] == {"b": "2"}


def test_wait_on_a_core_object(core_apiserver, ns):
    kube = core_apiserver.kube()
    ref = Ref("v1", "ConfigMap", "later", ns)
    import threading

    box: dict = {}
    t = threading.Thread(target=lambda: box.update(r=watch.wait_for(
        kube, ref, lambda o: bool(o and o.get("data", {}).get("ready") == "yes"),
        timeout=20, describe="say ready")), daemon=True)
    t.start()
    objects.apply(kube, configmap("later", ready="no"), manager=MANAGER_APPLY, namespace=ns)
    time.sleep(0.3)
    assert t.is_alive()
    objects.apply(kube, configmap("later", ready="yes"), manager=MANAGER_APPLY, namespace=ns)
    t.join(10)
    assert box["r"]["data"]["ready"] == "yes"


def test_foreground_delete_waits_for_the_garbage_collector(core_apiserver, ns):
    kube = core_apiserver.kube()
    ref = Ref.of(objects.apply(kube, configmap("fg"), manager=MANAGER_APPLY, namespace=ns))
    objects.delete(kube, ref, propagation="Foreground")
    with pytest.raises(watch.WaitTimeout):
        watch.wait_deleted(kube, ref, timeout=1)
    collect_garbage(kube, ref)
    watch.wait_deleted(kube, ref, timeout=10)
    with pytest.raises(LabError) as err:
        objects.delete(kube, ref, propagation="Sideways")
    assert "Background, Foreground, Orphan" in str(err.value)


def test_a_namespace_never_finishes_terminating_here(core_apiserver):
    """No namespace controller: the namespace keeps its kubernetes finalizer forever."""
    kube = core_apiserver.kube()
    name = f"t-{uuid.uuid4().hex[:8]}"
    ref = Ref.of(namespaces.ensure_namespace(kube, name))
    objects.delete(kube, ref)
    with pytest.raises(watch.WaitTimeout) as err:
        watch.wait_deleted(kube, ref, timeout=1.5)
    assert "last status: phase=Terminating; being deleted" in str(err.value)


def test_forbidden_names_verb_and_resource(core_apiserver, ns):
    nobody = core_apiserver.kube("nobody")
    with pytest.raises(Forbidden) as err:
        objects.apply(nobody, configmap("x"), manager=MANAGER_APPLY, namespace=ns)
    msg = str(err.value)
    assert msg.startswith("forbidden: cannot apply configmaps (ConfigMap ")
    assert 'User "nobody" cannot patch resource "configmaps"' in msg
    assert "fix: ask a cluster admin for RBAC permission to apply configmaps" in msg
    with pytest.raises(Forbidden) as err2:
        objects.list_objects(nobody, "v1", "Pod", ns)
    assert 'cannot list resource "pods"' in str(err2.value)
    with pytest.raises(Forbidden):
        logs.pods(nobody, ns, "app=x")


def test_unauthorized_token(core_apiserver):
    with pytest.raises(Unauthorized) as err:
        objects.list_objects(core_apiserver.kube("bad-token"), "v1", "ConfigMap", "default")
    assert "rejected the credentials (401 Unauthorized)" in str(err.value)
    assert "invalid or expired" in str(err.value)


def test_unreachable_server(core_apiserver, tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}", core_apiserver.ca,
                           {"admin": core_apiserver.tokens["admin"]})
    started = time.monotonic()
    with pytest.raises(Unreachable) as err:
        objects.get(connect(cfg, timeout=3), Ref("v1", "ConfigMap", "x", "default"))
    assert time.monotonic() - started < 15
    msg = str(err.value)
    # The first request is discovery (which kinds the server has).
    assert msg.startswith(f"cannot reach the Kubernetes API at https://127.0.0.1:{port} to "
                          "discover the server's APIs: connection refused\n"), msg
    assert "Traceback" not in msg


def test_tls_error_with_the_wrong_ca(core_apiserver, tmp_path):
    other = tmp_path / "other-ca.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=someone-else", "-keyout", str(tmp_path / "k"),
                    "-out", str(other)], check=True, capture_output=True)
    cfg = write_kubeconfig(tmp_path / "kc", core_apiserver.url, other,
                           {"admin": core_apiserver.tokens["admin"]})
    with pytest.raises(Unreachable) as err:
        objects.list_objects(connect(cfg), "v1", "ConfigMap", "default")
    msg = str(err.value)
    assert msg.startswith(f"TLS error talking to {core_apiserver.url} while trying to discover "
                          "the server's APIs: certificate verify failed: self-signed "
                          "certificate in certificate chain\n"), msg
    assert "certificate-authority does not match" in msg


def test_logs_error_paths_without_a_kubelet(core_apiserver, ns):
    kube = core_apiserver.kube()
    with pytest.raises(LabError) as none:
        list(logs.pod_logs(kube, ns, logs.selector_for("Trial", "t1")))
    assert "no pods match katib.kubeflow.org/trial=t1" in str(none.value)
    objects.apply(kube, pod("t1-abc", {"katib.kubeflow.org/trial": "t1"}),
                  manager=MANAGER_APPLY, namespace=ns)
    assert [p["metadata"]["name"] for p in logs.pods(kube, ns, "katib.kubeflow.org/trial=t1")] \
        == ["t1-abc"]
    # Never scheduled (no scheduler, no kubelet): no logs, and the message says why.
    for follow in (False, True):
        with pytest.raises(LabError) as err:
            list(logs.pod_logs(kube, ns, "katib.kubeflow.org/trial=t1", tail=5, follow=follow))
        assert str(err.value).startswith("no logs yet: no pod matching katib.kubeflow.org/"
                                         "trial=t1 has started: t1-abc (Pending)")
    with pytest.raises(LabError):
        list(logs.pod_logs(kube, ns, "katib.kubeflow.org/trial=t1", container="nope"))
    with pytest.raises(LabError):
        logs.selector_for("Widget", "x")


def test_port_forward_listens_on_loopback_free_port():
    a, b = portforward.listen(), portforward.listen()
    try:
        assert a.getsockname()[0] == b.getsockname()[0] == "127.0.0.1"
        assert a.getsockname()[1] != b.getsockname()[1] and a.getsockname()[1] > 0
        with pytest.raises(LabError) as err:
            portforward.listen(a.getsockname()[1])
        assert "already in use" in str(err.value)
    finally:
        a.close()
        b.close()


def test_port_forward_error_paths_without_a_kubelet(core_apiserver, ns):
    kube = core_apiserver.kube()
    objects.apply(kube, pod("web-1", {"app": "web"}), manager=MANAGER_APPLY, namespace=ns)
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
           "spec": {"selector": {"app": "web"},
                    # v1.20's server-side apply needs the list key (fixed in later versions)
                    "ports": [{"name": "http", "port": 80, "targetPort": "http",
                               "protocol": "TCP"}]}}
    objects.apply(kube, svc, manager=MANAGER_APPLY, namespace=ns)
    with pytest.raises(LabError) as err, portforward.forward(kube, ns, "svc/web"):
        pass
    assert f"no ready pod behind service {ns}/web (web-1: Pending, not Ready)" in str(err.value)
    with pytest.raises(LabError) as err2, portforward.forward(kube, ns, "svc/web", port=443):
        pass
    assert "has no port 443" in str(err2.value) and "http:80" in str(err2.value)
    with pytest.raises(LabError):
        portforward.parse_target("deploy/web")
    with pytest.raises(LabError):
        portforward.parse_target("svc/../secrets")
    # The tunnel itself: the API server refuses it (no node), the one connection closes,
    # and the reason is kept in one line.
    errors: list[str] = []
    with portforward.port_forward(kube, ns, "web-1", 8080, errors=errors) as port, \
            socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.settimeout(10)
        assert conn.recv(1) == b""  # closed by the forwarder
    deadline = time.monotonic() + 5
    while not errors and time.monotonic() < deadline:
        time.sleep(0.1)
    assert errors and all("\n" not in e for e in errors), errors


def test_names_are_checked_before_any_request(core_apiserver):
    kube = core_apiserver.kube()
    for bad in ("../secrets", "UPPER", "a/b", ""):
        with pytest.raises(LabError):
            objects.get(kube, Ref("v1", "ConfigMap", bad, "default"))
    with pytest.raises(LabError):
        objects.list_objects(kube, "v1", "ConfigMap", "../kube-system")


def test_context_namespace_is_the_default(core_apiserver, ns, tmp_path):
    import yaml

    cfg = yaml.safe_load(Path(core_apiserver.kubeconfig).read_text())
    cfg["contexts"][0]["context"]["namespace"] = ns
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    kube = connect(path, cfg["contexts"][0]["name"])
    out = objects.apply(kube, configmap("here"), manager=MANAGER_APPLY)
    assert out["metadata"]["namespace"] == ns


def _pod_status(kube, ns: str, name: str, phase: str, ready: bool) -> None:
    """The kubelet's part (no kubelet here): phase and the Ready condition, through the
    status subresource."""
    res = kube.resource("v1", "Pod")
    live = kube.dynamic.get(res, name=name, namespace=ns).to_dict()
    live["status"] = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    kube.dynamic.replace(res.status, body=live, name=name, namespace=ns)


def test_port_forward_picks_a_ready_pod_through_a_rollout(core_apiserver, ns):
    """A Deployment's rollout behind a Service: the old replica serves (Ready), the new one
    is Running but its model is still loading (not Ready), then the new one is Ready and the
    old one is terminating. The forward must reach a pod that serves, and the new model as
    soon as it does."""
    kube = core_apiserver.kube()
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "model"},
           "spec": {"selector": {"app": "model"},
                    "ports": [{"name": "http", "port": 80, "targetPort": "http",
                               "protocol": "TCP"}]}}
    objects.apply(kube, svc, manager=MANAGER_APPLY, namespace=ns)
    objects.apply(kube, pod("model-old", {"app": "model"}), manager=MANAGER_APPLY, namespace=ns)
    _pod_status(kube, ns, "model-old", "Running", ready=True)
    time.sleep(1.1)  # creationTimestamp has second precision: the new pod is newer
    objects.apply(kube, pod("model-new", {"app": "model"}), manager=MANAGER_APPLY, namespace=ns)
    _pod_status(kube, ns, "model-new", "Running", ready=False)
    assert portforward.service_target(kube, ns, "model") == ("model-old", 8080)
    _pod_status(kube, ns, "model-new", "Running", ready=True)
    assert portforward.service_target(kube, ns, "model") == ("model-new", 8080)
    # the old replica is being deleted (a finalizer keeps it, as a grace period would)
    res = kube.resource("v1", "Pod")
    kube.dynamic.patch(res, name="model-old", namespace=ns,
                       body={"metadata": {"finalizers": ["kflab.test/hold"]}},
                       content_type="application/merge-patch+json")
    kube.dynamic.delete(res, name="model-old", namespace=ns)
    assert portforward.service_target(kube, ns, "model") == ("model-new", 8080)
    _pod_status(kube, ns, "model-new", "Running", ready=False)
    with pytest.raises(LabError) as err:
        portforward.service_target(kube, ns, "model")
    assert "no ready pod behind service" in str(err.value)
    assert "model-new: Running, not Ready" in str(err.value)
    kube.dynamic.patch(res, name="model-old", namespace=ns, body={"metadata": {"finalizers": []}},
                       content_type="application/merge-patch+json")


def test_status_names_katibs_pod_webhook_when_its_controller_is_down(core_apiserver):
    """katib-controller serves a pod webhook with failurePolicy Fail over the lab namespace:
    `kflab status` says so when that Deployment is not available (not for other parts)."""
    from lab.kube.client import api_client
    from lab.status import component_status

    kube = core_apiserver.kube()
    namespaces.ensure_namespace(kube, "kubeflow")
    api = api_client(core_apiserver.kubeconfig)
    for name in ("katib-controller", "katib-db-manager", "katib-mysql", "katib-ui"):
        dep = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": "kubeflow"},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "c",
                                                              "image": "x:1"}]}}}}
        objects.apply(kube, dep, manager=MANAGER_APPLY)
    down = component_status(api, "katib")
    assert not down["ready"]
    assert "pod webhook (failurePolicy Fail)" in down["warning"]
    assert "kflab-lab" in down["warning"] and "PyTorchJobs" in down["warning"]
    res = kube.resource("apps/v1", "Deployment")
    live = kube.dynamic.get(res, name="katib-controller", namespace="kubeflow").to_dict()
    live["status"] = {"replicas": 1, "availableReplicas": 1, "readyReplicas": 1}
    kube.dynamic.replace(res.status, body=live, name="katib-controller", namespace="kubeflow")
    assert "warning" not in component_status(api, "katib")  # only the UI etc. are down


def test_the_install_wait_reads_deployments_with_kubectl(core_apiserver, ns):
    """playbooks/roles/kubeflow/files/kflab_wait_ready.py, as the role runs it: kubectl
    against a real API server; not Available -> gives up at its budget naming the
    Deployment; Available -> done."""
    import json
    import shutil
    import sys

    from tests.conftest import REPO

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (scripts/standins/21-kubectl.sh)")
    script = REPO / "playbooks" / "roles" / "kubeflow" / "files" / "kflab_wait_ready.py"
    kube = core_apiserver.kube()
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hook"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "hook"}},
                    "template": {"metadata": {"labels": {"app": "hook"}},
                                 "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}}
    objects.apply(kube, dep, manager=MANAGER_APPLY, namespace=ns)
    argv = [sys.executable, str(script),
            json.dumps([kubectl, "--kubeconfig", str(core_apiserver.kubeconfig)]),
            "2", "2", "10", f"{ns}/hook"]
    late = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert late.returncode == 1 and "not Available after" in late.stderr
    assert f"{ns}/hook" in late.stderr
    res = kube.resource("apps/v1", "Deployment")
    live = kube.dynamic.get(res, name="hook", namespace=ns).to_dict()
    live["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "conditions": [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}
    kube.dynamic.replace(res.status, body=live, name="hook", namespace=ns)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "available after" in done.stdout, done.stderr
