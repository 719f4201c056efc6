"""lab.kube's pure parts: name checks (before anything reaches a URL), Refs, field managers,
the one-line status summary of timeouts. The API calls are tested against real servers in
tests/integration/test_kube_*_api.py."""

from __future__ import annotations

import pytest

from lab.errors import LabError
from lab.kube.names import check_label, check_manager, check_name, check_namespace
from lab.kube.objects import Ref, install_manager, owners
from lab.kube.watch import condition_is, status_summary


@pytest.mark.parametrize("name", ["a", "web-1", "a.b.c", "x" * 253])
def test_good_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "../x", "a/b", "UP", "-a", "a-", "a..b", "x" * 254,
                                  "a?b", "a b", None, 3])
def test_bad_names(name):
    with pytest.raises(LabError):
        check_name(name)


@pytest.mark.parametrize("ns", ["a.b", "x" * 64, "kube_system", ".."])
def test_bad_namespaces(ns):
    with pytest.raises(LabError) as err:
        check_namespace(ns)
    assert "63 characters" in str(err.value)


def test_labels_and_managers():
    assert check_label("katib.kubeflow.org/metrics-collector-injection", "enabled")
    assert check_label("app", "")
    for key, value in (("a/b/c", "x"), ("k", "bad value"), ("-k", "v"), ("k", "x" * 64)):
        with pytest.raises(LabError):
            check_label(key, value)
    assert install_manager("katib") == "kflab-install-katib"
    with pytest.raises(LabError):
        install_manager("katib/../x")
    with pytest.raises(LabError):
        check_manager("x" * 129)


def test_ref_from_manifest_validates():
    ref = Ref.of({"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
                  "metadata": {"name": "hpo"}}, "lab")
    assert str(ref) == "Experiment lab/hpo" and ref.namespace == "lab"
    with pytest.raises(LabError):
        Ref.of({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "../../x"}})
    with pytest.raises(LabError):
        Ref.of({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "a/b"}})
    with pytest.raises(LabError):
        Ref.of({"kind": "ConfigMap", "metadata": {"name": "x"}})


def test_status_summary_and_condition_predicate():
    assert status_summary(None) == "absent"
    assert status_summary({"metadata": {}}) == "no status yet"
    obj = {"status": {"conditions": [
        {"type": "Created", "status": "True", "reason": "ExperimentCreated"},
        {"type": "Running", "status": "True", "reason": "ExperimentRunning",
         "message": "Experiment is running"}], "trials": 2, "currentOptimalTrial": {}}}
    assert status_summary(obj) == ("Created=True ExperimentCreated; Running=True "
                                   "ExperimentRunning: Experiment is running (trials=2)")
    assert len(status_summary({"status": {"x": "y" * 1000}})) == 300
    assert condition_is("Running")(obj) and not condition_is("Succeeded")(obj)
    assert not condition_is("Running", "False")(obj) and not condition_is("Ready")(None)


def test_owners_reads_managed_fields():
    obj = {"metadata": {"managedFields": [
        {"manager": "kflab-apply", "fieldsV1": {"f:metadata": {}, "f:spec": {}}},
        {"manager": "katib-controller", "subresource": "status",
         "fieldsV1": {"f:status": {}}}]}}
    assert owners(obj) == {"kflab-apply": ["metadata", "spec"],
                           "katib-controller": ["status:status"]}
