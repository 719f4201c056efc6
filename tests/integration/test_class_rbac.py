"""`kflab class` against the real v1.20 kube-apiserver with RBAC on (core_apiserver).

The core server has no Katib: the test registers a simplified Experiment CRD on it
(kubeflow.org/v1beta1 experiments, any fields kept, a status subresource), so what is proven
is RBAC (who may create an Experiment where) and kflab's own objects, not Katib's schema
(that is the CRD server's job in test_kube_crd_api.py). The test plays Katib's experiment
controller with tests/integration/controllers.py (status written as Katib writes it). No
controller-manager runs: a deleted namespace stays Terminating, so deletion is checked by the
namespaces' deletionTimestamp and by the student's token being refused (their RoleBinding
and ServiceAccount are deleted first).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import cli
from lab.kube.apierrors import Forbidden, NotFound, Unauthorized
from lab.kube.client import connect
from lab.kube.objects import Ref, apply, get, list_objects
from lab.kube.watch import condition_is, wait_for
from lab.yamlio import load_documents, read_text
from tests.integration.controllers import katib_step

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
EXPERIMENT_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "experiments.kubeflow.org"},
    "spec": {"group": "kubeflow.org", "scope": "Namespaced",
             "names": {"plural": "experiments", "singular": "experiment",
                       "kind": "Experiment", "listKind": "ExperimentList"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _kflab(state: Path, *args: str) -> str:
    out = CliRunner().invoke(cli, ["--state", str(state), *args], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out.output


def _experiment() -> dict:
    path = REPO / "scenarios" / "katib-hpo" / "assets" / "random.yaml"
    return load_documents(read_text(path), str(path))[0].data


@pytest.fixture(scope="module")
def klass(core_apiserver, tmp_path_factory):
    """A class of two on the core server, made by `kflab class create`."""
    root = tmp_path_factory.mktemp("class")
    admin = core_apiserver.kube()
    apply(admin, EXPERIMENT_CRD, manager="kflab-test-crds")
    wait_for(admin, Ref("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                        "experiments.kubeflow.org"), condition_is("Established"), timeout=60,
             describe="be Established")
    apply(admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow"}},
          manager="kflab-test")
    name = f"c{uuid.uuid4().hex[:6]}"
    roster = root / "roster.csv"
    roster.write_text("student,email\nÁnn Lee,ann@example.org\nbob,\n")
    state, out = root / "state", root / "kubeconfigs"
    text = _kflab(state, "class", "create", str(roster), "--class", name, "--out", str(out),
                  "--kubeconfig", str(core_apiserver.kubeconfig), "--context", "admin",
                  "--hours", "2")
    return {"name": name, "state": state, "out": out, "admin": admin, "text": text,
            "server": core_apiserver, "ann": f"{name}-ann-lee", "bob": f"{name}-bob"}


def test_create_makes_namespaces_quota_and_private_kubeconfigs(klass):
    admin, ann = klass["admin"], klass["ann"]
    assert "ann-lee" in klass["text"] and "students can reach Kubeflow Pipelines" in klass["text"]
    ns = get(admin, Ref("v1", "Namespace", ann))
    assert ns["metadata"]["labels"]["katib.kubeflow.org/metrics-collector-injection"] == \
        "enabled"
    assert ns["metadata"]["labels"]["kflab.dev/class"] == klass["name"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    quota = get(admin, Ref("v1", "ResourceQuota", "kflab-class", ann))
    assert set(quota["spec"]["hard"]) >= {"requests.cpu", "requests.memory", "pods"}
    limits = get(admin, Ref("v1", "LimitRange", "kflab-class", ann))
    assert limits["spec"]["limits"][0]["defaultRequest"]["memory"] == "512Mi"
    assert klass["out"].stat().st_mode & 0o777 == 0o700
    for sid in ("ann-lee", "bob"):
        path = klass["out"] / f"{sid}.kubeconfig"
        assert path.stat().st_mode & 0o777 == 0o600
        assert "certificate-authority-data" in path.read_text()


def test_create_refuses_to_take_over_a_namespace(klass, core_apiserver, tmp_path):
    admin = klass["admin"]
    apply(admin, {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": f"{klass['name']}x-carol"}}, manager="someone")
    roster = tmp_path / "r.csv"
    roster.write_text("student\ndave\ncarol\n")
    out = CliRunner().invoke(cli, ["--state", str(tmp_path / "s"), "class", "create",
                                   str(roster), "--class", f"{klass['name']}x", "--out",
                                   str(tmp_path / "kc"), "--kubeconfig",
                                   str(core_apiserver.kubeconfig)])
    assert out.exit_code != 0
    assert f"{klass['name']}x-carol (line 3)" in str(out.exception)
    assert get(admin, Ref("v1", "Namespace", f"{klass['name']}x-dave"), missing_ok=True) is None


def test_student_can_create_an_experiment_in_their_namespace_only(klass):
    ann = connect(klass["out"] / "ann-lee.kubeconfig")
    assert ann.namespace == klass["ann"]  # the context's namespace is the student's
    made = apply(ann, _experiment(), manager="kflab-apply")
    assert made["metadata"]["namespace"] == klass["ann"]
    with pytest.raises(Forbidden):
        apply(ann, _experiment(), manager="kflab-apply", namespace=klass["bob"])
    with pytest.raises(Forbidden):
        apply(ann, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
              manager="kflab-apply", namespace="default")
    with pytest.raises(Forbidden):
        list_objects(ann, "v1", "Namespace")
    with pytest.raises(Forbidden):  # the quota is the instructor's, not the student's
        apply(ann, {"apiVersion": "v1", "kind": "ResourceQuota",
                    "metadata": {"name": "kflab-class"}, "spec": {"hard": {"pods": "999"}}},
              manager="kflab-apply", namespace=klass["ann"])
    # KFP (single-user, shared): the services kflab port-forwards to, and nothing else there.
    assert get(ann, Ref("v1", "Service", "ml-pipeline", "kubeflow"), missing_ok=True) is None
    with pytest.raises(Forbidden):
        get(ann, Ref("v1", "Service", "minio-service", "kubeflow"), missing_ok=True)
    with pytest.raises(Forbidden):
        get(ann, Ref("v1", "Secret", "other-secret", "kubeflow"), missing_ok=True)


def test_student_runs_a_lab_workload_with_kflab(klass, tmp_path):
    """kflab's own cluster backend with Bob's kubeconfig: the Experiment and the ConfigMap of
    its files land in his namespace (he may not label namespaces: the instructor did)."""
    from lab.backends import Choice, get_backend

    kc = str(klass["out"] / "bob.kubeconfig")
    backend = get_backend(Choice("cluster", None, kc), str(tmp_path), namespace=klass["bob"])
    made = backend.apply(_experiment(), base_dir=REPO / "scenarios" / "katib-hpo" / "assets",
                         wait=False)
    assert made["metadata"]["namespace"] == klass["bob"]
    files = list_objects(connect(Path(kc)), "v1", "ConfigMap", klass["bob"])
    assert any("random-search" in c["metadata"]["name"] for c in files)


def test_status_and_grade_read_each_namespace(klass):
    """Ann's random-search succeeded (Katib's controller, played); Bob made nothing."""
    admin = klass["admin"]
    katib_step(admin, Ref("kubeflow.org/v1beta1", "Experiment", "random-search", klass["ann"]),
               "Created")
    katib_step(admin, Ref("kubeflow.org/v1beta1", "Experiment", "random-search", klass["ann"]),
               "Succeeded", trials=6, trialsSucceeded=6,
               # Katib's status_util.go: the best trial's observation, metric values as text
               currentOptimalTrial={
                   "bestTrialName": "random-search-t0",
                   "parameterAssignments": [{"name": "C", "value": "10"}],
                   "observation": {"metrics": [{"name": "accuracy", "min": "0.97",
                                                "max": "0.97", "latest": "0.97"}]}})
    before = get(admin, Ref("kubeflow.org/v1beta1", "Experiment", "random-search",
                            klass["ann"]))
    common = ["--class", klass["name"], "--lab", "katib-hpo", "--kubeconfig",
              str(klass["server"].kubeconfig), "--context", "admin"]
    cells = json.loads(_kflab(klass["state"], "class", "status", *common, "--json"))
    by = {c["student"]: c for c in cells}
    first, *_, last = list(by["ann-lee"]["steps"])
    assert by["ann-lee"]["steps"][first] == "passed"
    assert by["bob"]["steps"][first] == "failed"
    assert by["ann-lee"]["steps"][last] == "skipped"  # checked on the student's files only
    after = get(admin, Ref("kubeflow.org/v1beta1", "Experiment", "random-search",
                           klass["ann"]))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    table = _kflab(klass["state"], "class", "status", *common)
    assert "ann-lee" in table.splitlines()[1] and "1/" in table.splitlines()[1]
    grades = klass["state"].parent / "grades"
    _kflab(klass["state"], "class", "grade", *common, "--out", str(grades))
    grade = json.loads((grades / "ann-lee" / "katib-hpo" / "grade.json").read_text())
    assert grade["kind"] == "kflab-grade" and grade["summary"]["steps_passed"] == 1
    rows = (grades / "grades.csv").read_text().splitlines()
    assert rows[0].startswith("student,scenario,status") and len(rows) == 3


def test_the_class_package_index_is_applied_and_students_read_it(klass):
    """`kflab up --bundle` serves the bundle's package index in the lab (Deployment, Service,
    ConfigMap in kubeflow); a student's cluster backend reads the ConfigMap (the class Role
    allows that one, and no other) to point every pipeline step at it."""
    from lab.backends.cluster.pipelines.index import HOST, URL, class_index
    from lab.teaching import pipindex

    record = {"image": "localhost/kflab/pip-index:0123456789abcdef", "python": "3.11",
              "platform": "linux/amd64",
              "packages": {"kfp": ["2.16.0"], "scikit-learn": ["1.7.2"]}}
    admin = klass["admin"]
    assert pipindex.install(admin, record) == ["ConfigMap/kflab-pip-index",
                                               "Deployment/kflab-pip-index",
                                               "Service/kflab-pip-index"]
    pipindex.install(admin, record)  # again: server-side apply, no change, no error
    dep = get(admin, Ref("apps/v1", "Deployment", "kflab-pip-index", "kubeflow"))
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == record["image"]
    assert container["command"][:4] == ["python3", "-m", "http.server", "8080"]
    svc = get(admin, Ref("v1", "Service", "kflab-pip-index", "kubeflow"))
    assert svc["spec"]["ports"][0]["port"] == 80
    ann = connect(klass["out"] / "ann-lee.kubeconfig")
    index = class_index(ann)
    assert index is not None and index.url == URL and index.trusted_hosts == [HOST]
    assert index.packages == record["packages"]
    with pytest.raises(Forbidden):
        get(ann, Ref("v1", "ConfigMap", "other", "kubeflow"), missing_ok=True)

def test_delete_revokes_and_removes_everything(klass):
    ann_kc = klass["out"] / "ann-lee.kubeconfig"
    ann = connect(ann_kc)
    _kflab(klass["state"], "class", "delete", "--class", klass["name"], "--yes",
           "--kubeconfig", str(klass["server"].kubeconfig), "--context", "admin")
    admin = klass["admin"]
    for ns in (klass["ann"], klass["bob"]):
        obj = get(admin, Ref("v1", "Namespace", ns), missing_ok=True)
        assert obj is None or obj["metadata"].get("deletionTimestamp")
        assert get(admin, Ref("v1", "ServiceAccount", "student", ns), missing_ok=True) is None
    with pytest.raises(NotFound):
        get(admin, Ref("rbac.authorization.k8s.io/v1", "Role",
                       f"kflab-class-kfp-{klass['name']}", "kubeflow"))
    # Refused at once: 403 (the RoleBinding is gone) until the server's ServiceAccount cache
    # sees the account gone, 401 after.
    with pytest.raises((Unauthorized, Forbidden)):
        list_objects(ann, "kubeflow.org/v1beta1", "Experiment", klass["ann"])
    assert not ann_kc.exists() and not (klass["out"] / "bob.kubeconfig").exists()
    assert not (klass["state"] / "classes" / klass["name"]).exists()

