"""Names and namespaces are checked as the API server and each project's webhook check them,
per kind, before anything is written (lab.kube.names), and at their line in a manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import InputError
from lab.kube import names
from lab.kube.manifests import load_manifests


@pytest.mark.parametrize(("kind", "ok", "bad"), [
    ("Experiment", ["a", "random-search", "x" * 40],
     ["x" * 41, "1abc", "-a", "a-", "A", "a.b", "a_b", "", "../x"]),
    ("PyTorchJob", ["data", "j" * 63], ["j" * 64, "9job", "job.v1", "data/x", "..", "a b"]),
    ("InferenceService", ["iris", "m" * 53], ["m" * 54, "0iris", "iris.v2", "Iris"]),
    ("PipelineRun", ["run-1", "1run", "r" * 63], ["r" * 64, "../../../../victim", "a.b", "."]),
    ("Trial", ["exp-1a2b3c4d", "a.b-c", "t" * 253], ["t" * 254, "a..b", ".a", "a/b", "A"]),
])
def test_names_per_kind(kind: str, ok: list[str], bad: list[str]) -> None:
    for name in ok:
        assert names.name_problem(kind, name) is None, name
        assert names.check_kind_name(kind, name) == name
    for name in bad:
        assert names.name_problem(kind, name) is not None, name
        with pytest.raises(InputError, match=f"invalid {kind} name"):
            names.check_kind_name(kind, name)


def test_length_limits_say_why() -> None:
    problem = names.name_problem("Experiment", "e" * 41)
    assert "the limit is 40" in problem and "suggestion Service" in problem
    assert "<name>-predictor" in names.name_problem("InferenceService", "m" * 54)
    long = names.name_problem("PyTorchJob", "j" * 300)
    assert "300 characters long" in long and len(long) < 400  # the name is shortened


@pytest.mark.parametrize("ns", ["/tmp/victim", "..", "a/b", "Team", "-a", "a" * 64, "", "a.b"])
def test_bad_namespaces(ns: str) -> None:
    with pytest.raises(InputError, match="invalid namespace"):
        names.check_namespace(ns)


def test_non_text_names_are_refused() -> None:
    assert "must be text" in names.name_problem("PyTorchJob", 5)
    assert "must be text" in names.namespace_problem(["default"])


def test_slug_derives_a_valid_default() -> None:
    assert names.slug("My_Pipeline v2") == "my-pipeline-v2"
    assert names.slug("___") == "run"
    assert names.slug("9lives", "Experiment", fallback="exp") == "exp-9lives"
    assert len(names.slug("x" * 300)) == 63
    for text in ("Ünïcode", "a" * 200, "--", "0"):
        assert names.name_problem("PipelineRun", names.slug(text)) is None


def test_manifest_names_are_checked_at_their_line(tmp_path: Path) -> None:
    """The repro: a PyTorchJob whose namespace is a path is refused by the loader, with the
    file, line and field, before anything runs or is written."""
    f = tmp_path / "job.yaml"
    f.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: data\n"
                 "  namespace: /tmp/victim\nspec: {}\n")
    with pytest.raises(InputError) as err:
        load_manifests(f)
    assert err.value.field == "metadata.namespace" and err.value.line == 5
    assert "invalid namespace" in str(err.value) and str(f) in str(err.value)
    f.write_text("apiVersion: kubeflow.org/v1beta1\nkind: Experiment\nmetadata:\n"
                 f"  name: {'e' * 41}\nspec: {{}}\n")
    with pytest.raises(InputError, match="invalid Experiment name") as err:
        load_manifests(f)
    assert err.value.line == 4


def test_pytorchjob_replica_services_must_fit() -> None:
    """A valid 60-character job name still cannot run 12 workers: the Service
    `<name>-worker-11` would exceed 63 characters, as on a cluster."""
    from lab.backends.local.training.kinds import parse

    container = {"name": "pytorch", "command": ["python", "x.py"]}
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "j" * 60},
           "spec": {"pytorchReplicaSpecs": {"Worker": {
               "replicas": 12, "template": {"spec": {"containers": [container]}}}}}}
    assert names.name_problem("PyTorchJob", "j" * 60) is None
    with pytest.raises(InputError, match="worker-11' would be 70 characters") as err:
        parse(obj)
    assert err.value.field == "metadata.name" and "at most 53" in str(err.value)
    obj["metadata"]["name"] = "j" * 53
    assert parse(obj).name == "j" * 53


def test_a_near_miss_name_is_answered_with_its_valid_spelling(kflab, tmp_path) -> None:
    """`--name first_run` (a learner's first guess): the error says the rule once and
    offers 'first-run'; a name with nothing to keep still gets the rule and an example."""
    from lab.kube.names import name_hint

    (tmp_path / "p.py").write_text("")
    done = kflab("pipeline", "run", str(tmp_path / "p.py"), "--name", "first_run")
    text = " ".join(done.stderr.split())
    assert done.returncode == 2 and "try 'first-run'" in text, text
    assert text.count("lower-case letters") == 1, text
    assert name_hint("PipelineRun", "___").endswith("e.g. my-pipelinerun")
    assert name_hint("PipelineRun", "Model.V2") == "try 'model-v2'"
