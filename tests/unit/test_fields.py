"""Unknown fields: the field tree shipped in lab/kube/fields.json and the walker over it."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

from lab.kube.fields import FIELDS_FILE, unknown_fields
from lab.yamlio import load_documents

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = sorted(p for pattern in ("scenarios/*/assets/*.yaml", "scenarios/*/solutions/*.yaml")
                   for p in REPO.glob(pattern))


def _load(path: Path) -> dict:
    return load_documents(path.read_text(), str(path))[0].data


def _messages(obj: dict) -> list[str]:
    return [u.message() for u in unknown_fields(obj)]


def test_generated_tree_matches_a_fresh_generation(shared: Path) -> None:
    """fields.json is project data generated from ../shared and the pinned kubernetes client;
    this regenerates it and compares, so a stale or hand-edited file fails here."""
    spec = importlib.util.spec_from_file_location("gen_fields", REPO / "scripts/gen_fields.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.render(gen.generate(shared)) == FIELDS_FILE.read_text(), \
        "run: python scripts/gen_fields.py"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_scenario_manifest_is_clean(path: Path) -> None:
    """No false alarm on the manifests kflab ships (Jobs, PyTorchJobs, ISVCs, Experiments)."""
    for doc in load_documents(path.read_text(), str(path)):
        assert _messages(doc.data) == []


def test_katib_misspelled_tpe_setting_is_found() -> None:
    """The katib-hpo repro: `algorithmSetings` was dropped in silence and TPE ran as random."""
    exp = _load(REPO / "scenarios/katib-hpo/solutions/tpe.yaml")
    exp["spec"]["algorithm"]["algorithmSetings"] = exp["spec"]["algorithm"].pop(
        "algorithmSettings")
    assert _messages(exp) == ['unknown field "spec.algorithm.algorithmSetings" '
                              '(did you mean "algorithmSettings"?)']


def test_trial_template_is_checked_as_its_own_kind() -> None:
    """A Katib trialSpec is a Job (or a PyTorchJob...): its PodSpec fields are known too."""
    exp = _load(REPO / "scenarios/katib-hpo/solutions/tpe.yaml")
    job = exp["spec"]["trialTemplate"]["trialSpec"]
    job["spec"]["backofLimit"] = 2
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Never"
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"  # a real field: no warning
    assert sorted(_messages(exp)) == [
        'unknown field "spec.trialTemplate.trialSpec.spec.backofLimit" '
        '(did you mean "backoffLimit"?)',
        'unknown field "spec.trialTemplate.trialSpec.spec.template.spec.containers[0].'
        'imagePullPolcy" (did you mean "imagePullPolicy"?)']
    job["kind"] = "SomeCustomJob"  # a kind kflab has no tree of: not checked inside
    assert _messages(exp) == []


def test_pytorchjob_and_inferenceservice_fields() -> None:
    job = _load(REPO / "scenarios/distributed-training/solutions/pytorchjob.yaml")
    job["spec"]["runPolicy"] = {"backofLimit": 3}
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["Replicas"] = 2
    assert _messages(job) == [
        'unknown field "spec.runPolicy.backofLimit" (did you mean "backoffLimit"?)',
        'unknown field "spec.pytorchReplicaSpecs.Worker.Replicas" (did you mean "replicas"?)']
    isvc = _load(REPO / "scenarios/kserve-serving/assets/isvc.yaml")
    isvc["spec"]["predictor"]["model"]["protocolVerison"] = "v2"
    isvc["metadata"]["annotations"] = {"anything/goes": "x"}  # a map: any key is fine
    assert _messages(isvc) == ['unknown field "spec.predictor.model.protocolVerison" '
                               '(did you mean "protocolVersion"?)']


def test_metadata_and_unrelated_typos() -> None:
    exp = _load(REPO / "scenarios/katib-hpo/assets/random.yaml")
    exp["metadata"]["lables"] = {"a": "b"}
    exp["spec"]["zzz"] = 1
    assert _messages(exp) == ['unknown field "metadata.lables" (did you mean "labels"?)',
                              'unknown field "spec.zzz"']


def test_unknown_kinds_and_non_mappings_are_not_checked() -> None:
    assert unknown_fields({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": 1}}) == []
    assert unknown_fields(["not", "a", "mapping"]) == []
    broken = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
              "metadata": {"name": "x"}, "spec": {"parameters": "not a list", "objective": 3}}
    assert unknown_fields(copy.deepcopy(broken)) == []  # type errors are the validator's job
