"""The KFP stand-in's task rows are what KFP 2.16's persistence-agent report writes.

Expected values come from upstream's own tests at kubeflow/pipelines 2.16.0:
backend/src/apiserver/server/api_converter_test.go, Test_toModelTasks_wf (a workflow "run1"
with two nodes: pod names, names, states, times and children), and Argo v3.7.3's pod naming
(workflow/util/pod_name.go: `<workflow>-<template>-<fnv32a(node name)>`).
"""

from __future__ import annotations

import json

from tests.conftest import need_upstream
from tests.standins import kfp_argo

# Test_toModelTasks_wf's input (trimmed to the fields NodeStatuses reads) and expected rows.
FIXTURE_WF = {
    "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
    "metadata": {"name": "run1", "namespace": "kubeflow", "uid": "run1_uid",
                 "labels": {"pipeline/runid": "run1_uid_true"}},
    "status": {"nodes": {
        "boudary_exec_id-node0": {
            "id": "boudary_exec_id-node0", "name": "boudary_exec_id",
            "displayName": "boudary_exec_id", "type": "DAG",
            "templateName": "file-passing-pipelines", "phase": "Succeeded",
            "startedAt": "2023-02-07T01:55:19Z", "finishedAt": "2023-02-07T01:58:38Z",
            "children": ["boudary_exec_id-node1"]},
        "boudary_exec_id-node1": {
            "id": "boudary_exec_id-node1", "name": "boudary_exec_id.print-text",
            "displayName": "print-text", "type": "Pod", "templateName": "print-text",
            "phase": "Succeeded", "startedAt": "2023-02-07T01:56:55Z",
            "finishedAt": "2023-02-07T01:57:21Z"}}}}
FIXTURE_EXPECTED = [
    {"PodName": "run1-file-passing-pipelines-node0", "Namespace": "kubeflow",
     "RunID": "run1_uid_true", "CreatedTimestamp": -62135596800,
     "StartedTimestamp": 1675734919, "FinishedTimestamp": 1675735118,
     "Name": "boudary_exec_id", "State": "SUCCEEDED",
     "ChildrenPods": ["boudary_exec_id-node1"]},
    {"PodName": "run1-print-text-node1", "Namespace": "kubeflow", "RunID": "run1_uid_true",
     "CreatedTimestamp": -62135596800, "StartedTimestamp": 1675735015,
     "FinishedTimestamp": 1675735041, "Name": "print-text", "State": "SUCCEEDED",
     "ChildrenPods": []}]


def test_model_tasks_match_upstream_fixture() -> None:
    assert kfp_argo.model_tasks(FIXTURE_WF) == FIXTURE_EXPECTED


def _two_task_ir() -> dict:
    return {"pipelineInfo": {"name": "my-pipeline"}, "root": {"dag": {"tasks": {
        "a": {"componentRef": {"name": "comp-a"}},
        "b": {"componentRef": {"name": "comp-b"}, "dependentTasks": ["a"]}}}}}


def test_a_two_task_run_has_argo_nodes_and_no_outputs() -> None:
    wf = kfp_argo.build_workflow("rid", _two_task_ir(), {
        "a": {"phase": "Succeeded", "started": 100, "finished": 110},
        "b": {"phase": "Succeeded", "started": 111, "finished": 120}}, 99, 121)
    name = wf["metadata"]["name"]
    assert name.startswith("my-pipeline-") and len(name) == len("my-pipeline-") + 5
    rows = kfp_argo.store_tasks(kfp_argo.model_tasks(wf), {}, 130)
    api = [kfp_argo.api_task_detail(t) for t in rows]
    names = sorted(t["display_name"] for t in api)
    assert names == sorted([name, "root-driver", "root", "a-driver", "a", "executor",
                            "b-driver", "b", "executor"])
    for t in api:  # toApiPipelineTaskDetail never sets these from a node
        assert "execution_id" not in t and "outputs" not in t and "pod_name" not in t
    by_name = {t["display_name"]: t for t in api if t["display_name"] != "executor"}
    nodes = wf["status"]["nodes"]
    [child] = [c["pod_name"] for c in by_name["a"]["child_tasks"]]
    assert nodes[child]["displayName"] == "executor"
    assert child == f"{name}-{kfp_argo.fnv32a(f'{name}.root.a.executor')}"
    # the executor's pod, as Argo names it (POD_NAMES=v2) and KFP derives it
    pod = kfp_argo.retrieve_pod_name(wf, nodes[child])
    assert pod == f"{name}-system-container-impl-{child.rsplit('-', 1)[1]}"
    # b's driver hangs off a's executor (a's outbound node)
    assert any(nodes[c]["displayName"] == "b-driver" for c in nodes[child]["children"])


def test_fnv32a_is_go_hash_fnv() -> None:
    # Go's hash/fnv New32a on "" and "a" (the algorithm's published test vectors)
    assert kfp_argo.fnv32a("") == 0x811C9DC5
    assert kfp_argo.fnv32a("a") == 0xE40C292C


def test_task_rows_follow_the_v2beta1_schema() -> None:
    """Each rendered row validates against KFP 2.16.0's swagger, with no extra fields."""
    swagger = need_upstream("kfp-api-2.16.0", "v2beta1", "swagger", "run.swagger.json")
    from jsonschema import Draft4Validator

    defs = json.loads(swagger.read_text())["definitions"]
    for d in defs.values():
        if d.get("type") == "object" and d.get("properties"):
            d["additionalProperties"] = False
    wf = kfp_argo.build_workflow("rid", _two_task_ir(), {
        "a": {"phase": "Succeeded", "started": 100, "finished": 110},
        "b": {"phase": "Failed", "started": 111, "finished": 120}}, 99, 121)
    rows = [*kfp_argo.store_tasks(kfp_argo.model_tasks(wf), {}, 130),
            kfp_argo.cache_row("rid", "my-pipeline", "", 5, "fp", 100, 110)]
    validator = Draft4Validator({"$ref": "#/definitions/v2beta1PipelineTaskDetail",
                                 "definitions": defs})
    for row in rows:
        detail = kfp_argo.api_task_detail(row)
        assert not list(validator.iter_errors(detail)), detail
