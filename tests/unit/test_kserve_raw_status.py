"""KServe Standard (raw deployment) status at v0.16.0, as kflab's cluster path reads it.

Upstream: pkg/apis/serving/v1beta1/inference_service_status.go. PropagateRawStatus sets the
component's Ready condition from the predictor Deployment (False while it is not Available,
with the Deployment's reason) and `status.observedGeneration` to the *Deployment's*
observedGeneration, not the InferenceService's generation; PropagateModelStatus /
UpdateModelRevisionStates write modelStatus (Pending/Loading -> InProgress, FailedToLoad ->
BlockedByFailedLoad with lastFailureInfo). The statuses below are built from those
functions and the Deployment conditions of their test (inference_service_status_test.go
TestPropagateRawStatus: MinimumReplicasUnavailable while starting, NewReplicaSetAvailable
when done, ProgressDeadlineExceeded when stuck)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backends.cluster.serving import handler
from lab.kube.conditions import summary_state


def _isvc(generation: int, ready: str, reason: str = "", model: dict | None = None,
          observed: int = 1) -> dict:
    conds = [{"type": t, "status": ready, **({"reason": reason} if reason else {})}
             for t in ("PredictorReady", "Ready")]
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "iris", "namespace": "lab", "generation": generation},
            "status": {"observedGeneration": observed, "conditions": conds,
                       **({"modelStatus": model} if model else {})}}


STARTING = {"transitionStatus": "InProgress", "states": {"targetModelState": "Pending"},
            "copies": {"totalCopies": 0}}
FAILED = {"transitionStatus": "BlockedByFailedLoad",
          "states": {"targetModelState": "FailedToLoad"},
          "lastFailureInfo": {"reason": "ModelLoadFailed", "message": "no model.joblib"}}


def test_observed_generation_is_the_deployments_so_ready_does_not_compare_it() -> None:
    # a label change on the ISVC bumps its generation to 3; the Deployment stays at 1
    assert handler.ready(_isvc(3, "True", "NewReplicaSetAvailable", observed=1))
    assert not handler.ready(_isvc(1, "False", "MinimumReplicasUnavailable", STARTING))


@pytest.mark.parametrize(("status", "reason", "model", "want"), [
    ("False", "MinimumReplicasUnavailable", STARTING, "Pending"),  # the image still pulls
    ("False", "", None, "Pending"),  # no Deployment condition yet
    ("Unknown", "ReplicaSetUpdated", None, "Pending"),
    ("False", "MinimumReplicasUnavailable", FAILED, "Failed"),  # CrashLoopBackOff
    ("False", "ProgressDeadlineExceeded", STARTING, "Failed"),
    ("True", "NewReplicaSetAvailable", None, "Ready"),
])
def test_get_isvc_shows_failed_only_for_a_failure(status: str, reason: str,
                                                  model: dict | None, want: str) -> None:
    assert summary_state(_isvc(1, status, reason, model)) == want


def test_retraining_into_the_same_folder_changes_the_pod_template(tmp_path: Path) -> None:
    """KServe copies spec.predictor.annotations into the predictor Deployment's pod template
    (components/predictor.go buildObjectMeta; deployment_reconciler.go
    createRawDefaultDeployment): a new digest there is a new template, so a rollout."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.joblib").write_bytes(b"v1")
    obj = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
           "metadata": {"name": "iris", "namespace": "lab"},
           "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                            "storageUri": "file://model"}}}}
    first, _, _ = handler.prepare(obj, tmp_path)
    again, _, _ = handler.prepare(obj, tmp_path)
    (model / "model.joblib").write_bytes(b"v2")
    retrained, _, _ = handler.prepare(obj, tmp_path)
    key = handler.MODEL_DIGEST
    digest = first["spec"]["predictor"]["annotations"][key]
    assert again["spec"]["predictor"]["annotations"][key] == digest
    assert retrained["spec"]["predictor"]["annotations"][key] != digest
    assert len(digest) == 64


def _deployment(generation: int, observed: int, digest: str, updated: int, available: int,
                replicas: int = 1, total: int | None = None) -> dict:
    return {"metadata": {"name": "iris-predictor", "generation": generation},
            "spec": {"replicas": replicas,
                     "template": {"metadata": {"annotations": {handler.MODEL_DIGEST: digest}}}},
            "status": {"observedGeneration": observed, "replicas": total or updated,
                       "updatedReplicas": updated, "availableReplicas": available}}


@pytest.mark.parametrize(("dep", "want"), [
    (_deployment(2, 2, "new", 1, 1), True),
    (_deployment(1, 1, "old", 1, 1), False),  # KServe has not reconciled the new spec yet
    (_deployment(2, 1, "new", 1, 1), False),  # the deployment controller has not seen it
    (_deployment(2, 2, "new", 1, 1, total=2), False),  # the old replica still runs
    (_deployment(2, 2, "new", 1, 0), False),  # the new replica is not available yet
])
def test_a_rollout_is_done_when_the_deployment_runs_this_spec(dep: dict, want: bool) -> None:
    obj = _isvc(2, "True", "NewReplicaSetAvailable", observed=dep["status"]["observedGeneration"])
    obj["spec"] = {"predictor": {"annotations": {handler.MODEL_DIGEST: "new"}}}
    assert handler.rolled_out(obj, dep) is want


# kserve v0.16.0 inference_service_status_test.go TestPropagateRawStatus: the Deployment
# conditions of each scenario and whether PredictorReady is True, as upstream expects.
_AVAIL = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
          "message": "Deployment has minimum availability."}
_UNAVAIL = {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
            "message": "Deployment does not have minimum availability."}
UPSTREAM_SCENARIOS = {
    "Available true": ([_AVAIL], True),
    "Available true, Progressing succeeded": ([_AVAIL, {
        "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
        "message": "ReplicaSet has successfully progressed."}], True),
    "Available true, Progressing failed": ([_AVAIL, {
        "type": "Progressing", "status": "False", "reason": "",
        "message": "ProgressDeadlineExceeded"}], False),
    "Available false, Progressing failed": ([_UNAVAIL, {
        "type": "Progressing", "status": "False", "reason": "",
        "message": "Some error happened"}], False),
    "Available false, Progressing completed": ([_UNAVAIL, {
        "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
        "message": ""}], False),
    "Available false, Progressing ongoing": ([_UNAVAIL, {
        "type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated",
        "message": ""}], False),
    "Available true, ReplicaFailure true": ([_AVAIL, {
        "type": "ReplicaFailure", "status": "True", "reason": "replica failure",
        "message": "replica failure"}], False),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM_SCENARIOS))
def test_the_standins_predictor_ready_follows_upstreams_cases(name: str) -> None:
    from tests.standins.controllers import Controllers

    conditions, ready = UPSTREAM_SCENARIOS[name]
    got = Controllers._component_ready({"conditions": conditions})
    assert (got["status"] == "True") is ready, got


def test_a_stuck_rollout_and_a_replica_failure_read_as_failed() -> None:
    """The stand-in writes what the deployment controller writes for a rollout past its
    progressDeadlineSeconds and for pods the ReplicaSet cannot create; KServe propagates
    their reasons and messages to PredictorReady (and Ready), and kflab shows Failed with
    that message. Before: the stand-in could write neither."""
    from lab.kube.conditions import ready_message
    from tests.standins.controllers import Controllers, deployment_conditions

    stamp = "2026-11-27T10:00:00Z"
    stuck = deployment_conditions("iris-predictor-b5k2x9dqzm", False, False, "deadline", stamp)
    assert stuck[1] == {"type": "Progressing", "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                        "message": 'ReplicaSet "iris-predictor-b5k2x9dqzm" has timed out '
                                   "progressing.",
                        "lastUpdateTime": stamp, "lastTransitionTime": stamp}
    ready = Controllers._component_ready({"conditions": stuck})
    # Available False comes after Progressing in PropagateRawStatus: its reason wins
    assert (ready["status"], ready["reason"]) == ("False", "MinimumReplicasUnavailable")
    old_serving = deployment_conditions("iris-predictor-b5k2x9dqzm", True, False, "deadline",
                                        stamp)
    ready = Controllers._component_ready({"conditions": old_serving})
    assert (ready["status"], ready["reason"]) == ("False", "ProgressDeadlineExceeded")
    isvc = _isvc(1, "False", "ProgressDeadlineExceeded")
    isvc["status"]["conditions"][1]["message"] = ready["message"]
    assert summary_state(isvc) == "Failed"
    assert ready_message(isvc) == ('ProgressDeadlineExceeded: ReplicaSet '
                                   '"iris-predictor-b5k2x9dqzm" has timed out progressing.')
    quota = deployment_conditions("iris-predictor-b5k2x9dqzm", True, False, "replicas", stamp)
    ready = Controllers._component_ready({"conditions": quota})
    assert (ready["status"], ready["reason"]) == ("False", "FailedCreate")
    assert ready["message"].startswith('pods "iris-predictor-b5k2x9dqzm-" is forbidden: '
                                       "exceeded quota")
    assert summary_state(_isvc(1, "False", "FailedCreate")) == "Failed"
