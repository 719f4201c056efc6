"""lab.kube against the real v1.36 CRD API server holding the upstream Kubeflow CRDs unchanged.

No controller runs here: the tests play Katib's experiment controller (tests/integration/
controllers.py) by writing status through the status subresource as it does, and the garbage
collector by removing the foregroundDeletion finalizer.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from lab.errors import LabError
from lab.kube import objects, watch
from lab.kube.apierrors import Conflict, Invalid, NotFound, NotServed
from lab.kube.manifests import load_manifests
from lab.kube.objects import MANAGER_APPLY, MANAGER_SCENARIO, Ref
from tests.integration.controllers import collect_garbage, katib_step, update_status

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _ns() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"  # any name: this server has no Namespace objects


def experiment(name: str = "random-search") -> dict[str, Any]:
    """katib-hpo's Experiment, exactly as the scenario ships it."""
    doc = load_manifests(REPO / "scenarios/katib-hpo/assets/random.yaml")[0].data
    out = copy.deepcopy(doc)
    out["metadata"]["name"] = name
    return out


def pytorchjob() -> dict[str, Any]:
    """distributed-training's PyTorchJob solution, exactly as the scenario ships it."""
    path = REPO / "scenarios/distributed-training/solutions/pytorchjob.yaml"
    return copy.deepcopy(load_manifests(path)[0].data)


def isvc() -> dict[str, Any]:
    """kserve-serving's InferenceService, exactly as the scenario ships it."""
    return copy.deepcopy(load_manifests(REPO / "scenarios/kserve-serving/assets/isvc.yaml")[0].data)


def _waiter(kube: Any, ref: Ref, pred: Any, **kw: Any) -> tuple[threading.Thread, dict]:
    """wait_for in a thread; the dict gets 'result' or 'error'."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = watch.wait_for(kube, ref, pred, **kw)
        except Exception as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_upstream_crds_are_served(crd_apiserver):
    kube = crd_apiserver.kube()
    names = crd_apiserver.extra["crds"]
    assert {"experiments.kubeflow.org", "trials.kubeflow.org", "suggestions.kubeflow.org",
            "pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org",
            "inferenceservices.serving.kserve.io", "trainjobs.trainer.kubeflow.org",
            "clustertrainingruntimes.trainer.kubeflow.org"} <= set(names)
    # Katib 3, Training Operator 2, Notebook controller 1, KServe 13, Trainer 3
    assert len(names) == 22
    crds = objects.list_objects(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert {c["metadata"]["name"] for c in crds} == set(names)


def test_apply_twice_changes_nothing(crd_apiserver):
    kube, ns = crd_apiserver.kube(), _ns()
    first = objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns)
    second = objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns)
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["generation"] == 1
    assert objects.owners(second) == {MANAGER_APPLY: ["spec"]}
    # A real change does move it.
    changed = experiment()
    changed["spec"]["maxTrialCount"] = 8
    third = objects.apply(kube, changed, manager=MANAGER_APPLY, namespace=ns)
    assert third["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert third["metadata"]["generation"] == 2


def test_conflict_names_the_other_manager_and_field(crd_apiserver):
    kube, ns = crd_apiserver.kube(), _ns()
    objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns)
    # The same value from a second manager is shared ownership, not a conflict.
    objects.apply(kube, experiment(), manager=MANAGER_SCENARIO, namespace=ns)
    mine = experiment()
    mine["spec"]["maxTrialCount"] = 3
    with pytest.raises(Conflict) as err:
        objects.apply(kube, mine, manager=MANAGER_SCENARIO, namespace=ns)
    assert err.value.fields == [(MANAGER_APPLY, ".spec.maxTrialCount")]
    msg = str(err.value)
    assert "'kflab-apply'" in msg and ".spec.maxTrialCount" in msg and "--force" in msg
    assert "Traceback" not in msg and len(msg.splitlines()) == 2  # message + fix
    # Nothing changed; with force the field moves to the new manager.
    ref = Ref.of(mine, ns)
    assert objects.get(kube, ref)["spec"]["maxTrialCount"] == 6
    out = objects.apply(kube, mine, manager=MANAGER_SCENARIO, namespace=ns, force=True)
    assert out["spec"]["maxTrialCount"] == 3
    flat = {m: f for m, f in objects.owners(out).items()}
    assert "spec" in flat[MANAGER_SCENARIO]


def test_status_written_like_katib_survives_reapply(crd_apiserver):
    """Katib's experiment controller writes status with Status().Update (status subresource):
    spec and generation stay; kflab's next apply of the spec leaves that status alone."""
    kube, ns = crd_apiserver.kube(), _ns()
    obj = objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns)
    ref = Ref.of(obj)
    katib_step(kube, ref, "Created")
    out = katib_step(kube, ref, "Running", trials=2, trialsRunning=2)
    assert out["metadata"]["generation"] == 1
    assert [c["type"] for c in out["status"]["conditions"]] == ["Created", "Running"]
    again = objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns)
    assert again["status"] == out["status"]
    assert again["metadata"]["resourceVersion"] == out["metadata"]["resourceVersion"]
    # A status in kflab's manifest is ignored by the main resource (the subresource owns it).
    with_status = experiment()
    with_status["status"] = {"trials": 99}
    kept = objects.apply(kube, with_status, manager=MANAGER_APPLY, namespace=ns)
    assert kept["status"]["trials"] == 2
    # A controller writing from a stale read gets 409, as controller-runtime would.
    with pytest.raises(Exception) as stale:
        update_status(kube, obj, {"trials": 5})
    assert getattr(stale.value, "status", None) == 409


def test_wait_returns_when_the_controller_finishes(crd_apiserver):
    kube, ns = crd_apiserver.kube(), _ns()
    ref = Ref.of(objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns))
    t, box = _waiter(kube, ref, watch.condition_is("Succeeded"), timeout=30,
                     describe="succeed")
    for step in ("Created", "Running"):
        katib_step(kube, ref, step)
    time.sleep(0.3)
    assert t.is_alive()  # Created and Running do not satisfy it
    katib_step(kube, ref, "Succeeded", trials=6, trialsSucceeded=6)
    t.join(10)
    assert "error" not in box, box.get("error")
    assert box["result"]["status"]["trialsSucceeded"] == 6
    assert box["result"]["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"


def test_wait_stops_at_a_failure(crd_apiserver):
    kube, ns = crd_apiserver.kube(), _ns()
    ref = Ref.of(objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns))

    def failed(obj: dict[str, Any] | None) -> str | None:
        return "Failed" if watch.condition_is("Failed")(obj) else None

    t, box = _waiter(kube, ref, watch.condition_is("Succeeded"), timeout=30, fail=failed,
                     describe="succeed")
    katib_step(kube, ref, "Running")
    katib_step(kube, ref, "Failed", trialsFailed=2)
    t.join(10)
    err = box.get("error")
    assert isinstance(err, watch.WaitFailed), box
    assert "will not succeed" in str(err)
    assert "ExperimentFailed" in str(err) and "max failed count" in str(err)


def test_timeout_shows_the_last_status(crd_apiserver):
    kube, ns = crd_apiserver.kube(), _ns()
    ref = Ref.of(objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns))
    katib_step(kube, ref, "Created")
    katib_step(kube, ref, "Running", trials=2, trialsRunning=2)
    started = time.monotonic()
    with pytest.raises(watch.WaitTimeout) as err:
        watch.wait_for(kube, ref, watch.condition_is("Succeeded"), timeout=2,
                       describe="succeed")
    assert 1.9 < time.monotonic() - started < 8
    msg = str(err.value)
    assert msg.startswith(f"timed out after 2s waiting for Experiment {ns}/random-search "
                          "to succeed; last status: ")
    assert "Running=True ExperimentRunning: Experiment is running" in msg
    assert "trials=2" in msg
    assert err.value.last["status"]["trialsRunning"] == 2


def test_a_resource_that_never_becomes_ready(crd_apiserver):
    """No KServe controller: the InferenceService is accepted but never gets a status."""
    kube, ns = crd_apiserver.kube(), _ns()
    ref = Ref.of(objects.apply(kube, isvc(), manager=MANAGER_SCENARIO, namespace=ns))
    with pytest.raises(watch.WaitTimeout) as err:
        watch.wait_for(kube, ref, watch.condition_is("Ready"), timeout=1.5, resync=0.5)
    assert f"InferenceService {ns}/iris to be ready; last status: no status yet" in str(err.value)


def test_watch_resumes_after_the_api_server_restarts(crd_apiserver, caplog):
    """The API server process goes away mid-wait and comes back on the same port: the wait
    carries on and sees the status written after the restart."""
    caplog.set_level(logging.INFO, logger="lab.kube.watch")
    kube, ns = crd_apiserver.kube(), _ns()
    ref = Ref.of(objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns))
    katib_step(kube, ref, "Running")
    t, box = _waiter(kube, ref, watch.condition_is("Succeeded"), timeout=90, resync=300,
                     describe="succeed")
    time.sleep(1.0)  # the waiter is watching now
    crd_apiserver.restart()
    time.sleep(0.5)
    katib_step(kube, ref, "Succeeded", trials=6, trialsSucceeded=6)
    t.join(60)
    assert "error" not in box, box.get("error")
    assert box["result"]["status"]["trialsSucceeded"] == 6
    text = caplog.text
    assert "dropped" in text or "cannot reach" in text, text
    assert "resumed" in text or "listing again" in text, text


def test_watch_resumes_after_the_connection_is_cut(crd_apiserver, caplog):
    """The connection under the watch is closed (a proxy in between cuts it): the wait
    resumes from the last resourceVersion and sees what happened meanwhile."""
    caplog.set_level(logging.INFO, logger="lab.kube.watch")
    with crd_apiserver.proxied() as (proxy, kube):
        ns = _ns()
        ref = Ref.of(objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns))
        t, box = _waiter(kube, ref, watch.condition_is("Succeeded"), timeout=60, resync=300,
                         describe="succeed")
        time.sleep(1.0)
        proxy.held.set()  # the waiter's reconnects fail for a while
        assert proxy.cut() >= 1
        katib_step(crd_apiserver.kube(), ref, "Succeeded", trials=6, trialsSucceeded=6)
        time.sleep(1.0)
        assert t.is_alive()
        proxy.held.clear()
        t.join(30)
    assert "error" not in box, box.get("error")
    assert box["result"]["status"]["trialsSucceeded"] == 6
    assert "watch connection dropped" in caplog.text
    assert "resumed after: " in caplog.text, caplog.text


def test_watch_relists_after_410_gone(crd_apiserver, caplog):
    """While the client is cut off, the API server restarts and etcd compacts its history:
    resuming the watch from the old resourceVersion gets 410 Gone, and the wait lists again."""
    caplog.set_level(logging.INFO, logger="lab.kube.watch")
    with crd_apiserver.proxied() as (proxy, kube):
        ns = _ns()
        ref = Ref.of(objects.apply(kube, experiment(), manager=MANAGER_APPLY, namespace=ns))
        t, box = _waiter(kube, ref, watch.condition_is("Succeeded"), timeout=90, resync=300,
                         describe="succeed")
        time.sleep(1.0)
        proxy.held.set()
        crd_apiserver.stop()
        for i in range(5):
            crd_apiserver.etcd.put(f"/kflab-test/{ns}/{i}", "x")
        crd_apiserver.etcd.compact()
        crd_apiserver.start()
        crd_apiserver.serves("kubeflow.org/v1beta1", "experiments")
        katib_step(crd_apiserver.kube(), ref, "Succeeded", trials=6, trialsSucceeded=6)
        proxy.held.clear()
        t.join(60)
    assert "error" not in box, box.get("error")
    assert box["result"]["status"]["conditions"][-1]["type"] == "Succeeded"
    assert "(410 Gone); listing again" in caplog.text, caplog.text


def test_get_list_and_not_found(crd_apiserver):
    kube = crd_apiserver.kube()
    a, b = _ns(), _ns()
    for ns, name in ((a, "one"), (a, "two"), (b, "three")):
        objects.apply(kube, experiment(name), manager=MANAGER_APPLY, namespace=ns)
    names = lambda items: sorted(o["metadata"]["name"] for o in items)  # noqa: E731
    assert names(objects.list_objects(kube, "kubeflow.org/v1beta1", "Experiment", a)) == \
        ["one", "two"]
    everywhere = objects.list_objects(kube, "kubeflow.org/v1beta1", "Experiment", page=1)
    assert {"one", "two", "three"} <= set(names(everywhere))  # three pages, followed
    assert all(o["kind"] == "Experiment" for o in everywhere)
    missing = Ref("kubeflow.org/v1beta1", "Experiment", "nope", a)
    assert objects.get(kube, missing, missing_ok=True) is None
    with pytest.raises(NotFound) as err:
        objects.get(kube, missing)
    assert f"Experiment {a}/nope not found" in str(err.value)
    with pytest.raises(NotServed) as err2:
        objects.get(kube, Ref("kubeflow.org/v1", "Widget", "x", a))
    assert "does not serve Widget (kubeflow.org/v1)" in str(err2.value)


def test_the_server_validates_like_a_cluster(crd_apiserver):
    """The Training Operator's CRD is a full structural schema: wrong types and unknown
    fields are refused, as on a v1.36 cluster. (Katib's CRDs preserve unknown fields: a
    cluster accepts anything there, so only kflab's own checks can catch an Experiment typo.)"""
    kube, ns = crd_apiserver.kube(), _ns()
    bad = pytorchjob()
    bad["spec"]["runPolicy"]["backoffLimit"] = "two"
    with pytest.raises(Invalid) as err:
        objects.apply(kube, bad, manager=MANAGER_APPLY, namespace=ns)
    msg = str(err.value)
    assert msg.startswith(f"the API server rejected PyTorchJob {ns}/digits-ddp: ")
    assert ".spec.runPolicy.backoffLimit: expected numeric (int or float), got string" in msg
    typo = pytorchjob()
    typo["spec"]["runPolice"] = {}
    with pytest.raises(Invalid) as err2:
        objects.apply(kube, typo, manager=MANAGER_APPLY, namespace=ns)
    assert ".spec.runPolice: field not declared in schema" in str(err2.value)
    # Server-side apply refuses an undeclared field whatever fieldValidation says.
    with pytest.raises(Invalid):
        objects.apply(kube, typo, manager=MANAGER_APPLY, namespace=ns, validation="Ignore")
    elsewhere = pytorchjob()
    elsewhere["metadata"]["namespace"] = "other"
    with pytest.raises(LabError) as err3:
        objects.apply(kube, elsewhere, manager=MANAGER_APPLY, namespace=ns)
    assert "names namespace 'other'" in str(err3.value)


def test_pytorchjob_status_like_the_training_operator(crd_apiserver):
    """The Training Operator (pkg/util/status.go, UpdateJobConditions) writes conditions
    PyTorchJobCreated -> Running -> Succeeded and replicaStatuses per replica type through the
    status subresource; the upstream status schema is enforced on that write too."""
    kube, ns = crd_apiserver.kube(), _ns()
    job = objects.apply(kube, pytorchjob(), manager=MANAGER_APPLY, namespace=ns)
    ref = Ref.of(job)
    t, box = _waiter(kube, ref, watch.condition_is("Succeeded"), timeout=30,
                     describe="succeed")
    stamp = "2026-01-01T00:00:00Z"

    def cond(ctype: str, state: str = "True") -> dict[str, str]:
        return {"type": ctype, "status": state, "reason": f"PyTorchJob{ctype}",
                "message": f"PyTorchJob {ns}/digits-ddp is {ctype.lower()}.",
                "lastUpdateTime": stamp, "lastTransitionTime": stamp}

    cur = update_status(kube, objects.get(kube, ref), {
        "conditions": [cond("Created"), cond("Running")], "startTime": stamp,
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2}}})
    with pytest.raises(Exception) as bad:
        update_status(kube, cur, {"replicaStatuses": {"Master": {"active": "one"}}})
    assert getattr(bad.value, "status", None) == 422
    update_status(kube, cur, {
        "conditions": [cond("Created"), cond("Running", "False"), cond("Succeeded")],
        "startTime": stamp, "completionTime": stamp,
        "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {"succeeded": 2}}})
    t.join(10)
    assert "error" not in box, box.get("error")
    assert box["result"]["status"]["replicaStatuses"]["Worker"] == {"succeeded": 2}
    assert box["result"]["metadata"]["generation"] == 1


def test_delete_background_and_foreground(crd_apiserver):
    kube, ns = crd_apiserver.kube(), _ns()
    gone = Ref.of(objects.apply(kube, experiment("bg"), manager=MANAGER_APPLY, namespace=ns))
    assert objects.delete(kube, gone) is True
    watch.wait_deleted(kube, gone, timeout=10)
    assert objects.delete(kube, gone) is False  # already gone
    with pytest.raises(NotFound):
        objects.delete(kube, gone, missing_ok=False)
    fg = Ref.of(objects.apply(kube, experiment("fg"), manager=MANAGER_APPLY, namespace=ns))
    assert objects.delete(kube, fg, propagation="Foreground") is True
    held = objects.get(kube, fg)
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert held["metadata"].get("deletionTimestamp")
    with pytest.raises(watch.WaitTimeout) as err:
        watch.wait_deleted(kube, fg, timeout=1)
    assert "to be deleted; last status: being deleted" in str(err.value)
    t, box = _waiter(kube, fg, lambda o: o is None, timeout=20, describe="be deleted")
    collect_garbage(kube, fg)  # no dependents: the garbage collector lets it go
    t.join(10)
    assert "error" not in box and box["result"] is None
