"""InferenceService conditions in the shape KServe v0.16.0 writes them: knative's
apis.Condition (knative.dev/pkg c43477f0052b apis/condition_types.go: type, status, severity,
lastTransitionTime, reason, message, all but the first two omitempty -- no lastUpdateTime,
no empty reason) through its living condition set (apis/condition_set.go SetCondition,
MarkTrue/MarkFalse/MarkUnknown, recomputeHappiness) over PredictorReady and IngressReady
(pkg/apis/serving/v1beta1/inference_service_status.go conditionSet), with Stopped False
(pkg/controller/v1beta1/inferenceservice/controller.go Reconcile) and IngressReady True
(reconcilers/ingress/kube_ingress_reconciler.go RawIngressReconciler.Reconcile)."""

from __future__ import annotations

import json
from pathlib import Path

from lab.backends.local import LocalBackend
from lab.backends.local.serving import handler as serving
from lab.kube import knative
from lab.kube.knative import INFERENCE_SERVICE as ISVC

FIELDS = {"type", "status", "severity", "lastTransitionTime", "reason", "message"}


def _shape(status: dict) -> None:
    for cond in status["conditions"]:
        assert set(cond) <= FIELDS, cond  # never lastUpdateTime
        assert all(cond.get(k) != "" for k in ("reason", "message", "severity")), cond
    types = [c["type"] for c in status["conditions"]]
    assert types == sorted(types)


def test_propagate_raw_status_with_messages_as_upstream_tests_it() -> None:
    """TestPropagateRawStatusWithMessages: PredictorReady False with the reason and message,
    first in the list (sorted by type); Ready follows it (MarkFalse of a dependent)."""
    status: dict = {}
    ISVC.mark(status, "PredictorReady", False, "test reason", "test message")
    first = status["conditions"][0]
    assert (first["type"], first["status"], first["reason"], first["message"]) == \
        ("PredictorReady", "False", "test reason", "test message")
    ready = ISVC.get(status, "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == \
        ("False", "test reason", "test message")
    _shape(status)


def test_set_condition_keeps_the_time_when_nothing_else_changes(monkeypatch) -> None:
    status: dict = {}
    monkeypatch.setattr(knative, "now", lambda: "2026-01-01T00:00:00Z")
    ISVC.mark(status, "IngressReady", True)
    monkeypatch.setattr(knative, "now", lambda: "2026-01-01T00:01:00Z")
    ISVC.mark(status, "IngressReady", True)  # the same: untouched
    assert ISVC.get(status, "IngressReady")["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    # a dependent never set: Ready Unknown (findUnhappyDependent's stand-in), no reason
    assert ISVC.get(status, "Ready") == {"type": "Ready", "status": "Unknown",
                                         "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ISVC.mark(status, "PredictorReady", "Unknown", "ModelLoading", "loading")
    ISVC.mark(status, "PredictorReady", "Unknown", "ModelLoading", "loading, 50%")
    # the message changed: a new transition time, as SetCondition stamps any change
    assert ISVC.get(status, "PredictorReady")["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    ISVC.mark(status, "PredictorReady", True, "NewReplicaSetAvailable", "ignored")
    assert ISVC.get(status, "PredictorReady") == {  # MarkTrue sets neither reason nor message
        "type": "PredictorReady", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}
    assert ISVC.get(status, "Ready")["status"] == "True"
    ISVC.mark(status, "Stopped", False)
    assert ISVC.get(status, "Stopped")["severity"] == "Info"  # outside the living set
    _shape(status)


def test_the_local_backend_writes_kserves_conditions(tmp_path: Path) -> None:
    backend = LocalBackend(str(tmp_path / "state"))
    obj = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
           "metadata": {"name": "m", "namespace": "default", "uid": "u"},
           "spec": {"predictor": {"sklearn": {"storageUri": "file://m"}}}, "status": {}}
    backend.store.put(obj)
    ready = serving._ready(backend, json.loads(json.dumps(obj)),
                           {"host": "127.0.0.1", "port": 12345})
    conds = {c["type"]: c for c in ready["status"]["conditions"]}
    assert list(conds) == ["IngressReady", "PredictorReady", "Ready", "Stopped"]
    assert [conds[t]["status"] for t in conds] == ["True", "True", "True", "False"]
    _shape(ready["status"])
    failed = serving._fail(backend, json.loads(json.dumps(ready)), "ServerExited",
                           "RuntimeUnhealthy", "boom")
    conds = {c["type"]: c for c in failed["status"]["conditions"]}
    assert (conds["Ready"]["status"], conds["Ready"]["reason"], conds["Ready"]["message"]) \
        == ("False", "ServerExited", "boom")
    assert conds["IngressReady"]["status"] == "True"
    _shape(failed["status"])
