"""`kflab apply` validates every document of every file before applying the first, and
warns about unknown fields as kubectl does (--validate=strict makes them errors). Run
through the real CLI in a subprocess, with real workloads on the local backend."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: quick}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              command: [python3, -c, "print('ran')"]
"""

EXPERIMENT = """\
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: tiny}
spec:
  objective: {type: minimize, objectiveMetricName: loss}
  algorithm:
    algorithmName: random
    algorithmSettings: [{name: random_state, value: "1"}]
  maxTrialCount: 1
  parallelTrialCount: 1
  parameters:
    - {name: x, parameterType: double, feasibleSpace: {min: "0.1", max: "0.9"}}
  trialTemplate:
    primaryContainerName: training-container
    trialParameters: [{name: x, reference: x}]
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers:
              - name: training-container
                command: [python3, -c, "import sys; print('loss=' + sys.argv[1])",
                          "${trialParameters.x}"]
"""


def _names(kflab, kind: str) -> list[str]:
    out = kflab("get", kind, "-o", "json")
    assert out.returncode == 0, out.stderr
    return [i["metadata"]["name"] for i in json.loads(out.stdout)["items"]]


def _assert_clean_error(out) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout


def test_one_bad_document_means_nothing_is_applied(kflab, state, tmp_path: Path) -> None:
    """The issue's repro: a PyTorchJob ran to Succeeded before the invalid Experiment after
    it in the same file was reported. Now the Experiment's error comes first, alone."""
    bad = EXPERIMENT.replace("parameterType: double", "parameterType: dubble")
    path = tmp_path / "both.yaml"
    path.write_text(JOB + "---\n" + bad)
    out = kflab("apply", "-f", str(path))
    _assert_clean_error(out)
    assert f"{path}:" in out.stderr and "spec.parameters[0].parameterType" in out.stderr
    assert "pytorchjob/quick" not in out.stdout
    assert _names(kflab, "pytorchjobs") == [] and _names(kflab, "experiments") == []


def test_several_files_are_validated_together(kflab, state, tmp_path: Path) -> None:
    good, bad = tmp_path / "job.yaml", tmp_path / "isvc.yaml"
    good.write_text(JOB)
    bad.write_text("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n"
                   "metadata: {name: m}\nspec: {predictor: {model: {modelFormat: {name: "
                   "sklearn}, storageUri: file:///nowhere/at/all}}}\n")
    out = kflab("apply", "-f", str(good), "-f", str(bad))
    _assert_clean_error(out)
    assert str(bad) in out.stderr and "storageUri" in out.stderr
    assert _names(kflab, "pytorchjobs") == []
    ok = kflab("apply", "-f", str(good))  # the same job alone runs: it was only held back
    assert ok.returncode == 0, ok.stderr
    assert "pytorchjob/quick Succeeded" in ok.stdout


def test_misspelled_field_warns_and_strict_refuses(kflab, state, tmp_path: Path) -> None:
    """katib-hpo's repro: a misspelled `algorithmSetings` was dropped in silence."""
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT.replace("algorithmSettings:", "algorithmSetings:"))
    strict = kflab("apply", "-f", str(path), "--validate=strict")
    _assert_clean_error(strict)
    assert 'unknown field "spec.algorithm.algorithmSetings" (did you mean ' \
           '"algorithmSettings"?)' in strict.stderr
    assert "nothing was applied" in strict.stderr and _names(kflab, "experiments") == []

    warn = kflab("apply", "-f", str(path))
    assert warn.returncode == 0, warn.stderr
    assert f'Warning: {path}:8: unknown field "spec.algorithm.algorithmSetings"' in warn.stderr
    assert _names(kflab, "experiments") == ["tiny"]
    quiet = kflab("apply", "-f", str(path), "--validate=ignore")
    assert quiet.returncode == 0 and "Warning" not in quiet.stderr


def test_a_typo_in_a_required_field_says_did_you_mean(kflab, state, tmp_path: Path) -> None:
    """Issue 23, point 9: `pytorchReplicaSpec` got "missing" alone; the unknown-field
    warning (and its did-you-mean) was dropped because an error came first."""
    path = tmp_path / "job.yaml"
    path.write_text(JOB.replace("pytorchReplicaSpecs:", "pytorchReplicaSpec:"))
    out = kflab("apply", "-f", str(path))
    _assert_clean_error(out)
    assert "'spec.pytorchReplicaSpecs': missing" in out.stderr
    assert 'unknown field "spec.pytorchReplicaSpec" (did you mean "pytorchReplicaSpecs"?)' \
        in out.stderr


def test_duplicate_fields_warn_like_unknown_ones(kflab, state, tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(EXPERIMENT.replace("  maxTrialCount: 1\n",
                                       "  maxTrialCount: 1\n  maxTrialCount: 1\n"))
    out = kflab("apply", "-f", str(path), "--validate=true")  # kubectl's spelling of strict
    _assert_clean_error(out)
    assert 'duplicate field "spec.maxTrialCount"' in out.stderr


def test_guided_check_shows_the_last_apply_warnings(kflab, state, tmp_path: Path) -> None:
    """A learner misspells the TPE setting: the step's check fails, and `kflab check` shows
    why next to it. Step 1 is solved with kflab's own solution to get to step 2."""
    work = tmp_path / "work"
    assert kflab("scenario", "start", "katib-hpo", "--workdir", str(work)).returncode == 0
    solved = kflab("solve", cwd=work)
    assert solved.returncode == 0, solved.stdout + solved.stderr
    tpe = yaml.safe_load((REPO / "scenarios/katib-hpo/solutions/tpe.yaml").read_text())
    tpe["spec"]["algorithm"]["algorithmSetings"] = tpe["spec"]["algorithm"].pop(
        "algorithmSettings")
    (work / "tpe.yaml").write_text(yaml.safe_dump(tpe, sort_keys=False))
    applied = kflab("apply", "-f", "tpe.yaml", cwd=work)
    assert applied.returncode == 0, applied.stderr
    assert "Warning:" in applied.stderr and "algorithmSetings" in applied.stderr

    check = kflab("check", cwd=work)
    assert check.returncode == 1
    assert "tpe-search starts modelling after 3 trials" in check.stdout
    assert "Your last `kflab apply` warned" in check.stdout
    assert '"spec.algorithm.algorithmSetings" (did you mean "algorithmSettings"?)' in \
        check.stdout.replace("\n", " ").replace("  ", " ")


def test_scenario_assets_apply_without_warnings(tmp_path: Path) -> None:
    """kflab's own solutions and starting files give no unknown-field warning."""
    from lab.kube.manifests import field_warnings, load_manifests

    for path in sorted(REPO.glob("scenarios/*/*/*.yaml")):
        if path.name == "scenario.yaml":
            continue
        copy = tmp_path / path.name
        shutil.copy(path, copy)
        for doc in load_manifests(copy):
            assert field_warnings(doc) == [], path


def test_dry_run_on_the_local_backend_validates_only(kflab, state, tmp_path: Path) -> None:
    """As kubectl's client dry run: every document validated, nothing stored or run; a bad
    one is the same error a real apply gives."""
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    out = kflab("apply", "-f", str(path), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "pytorchjob/quick valid (client dry run: validated here, nothing applied)" in \
        out.stdout
    assert "quick" not in kflab("get", "pytorchjobs").stdout  # nothing was stored
    path.write_text(JOB.replace("replicas: 1", "replicas: -1"))
    bad = kflab("apply", "-f", str(path), "--dry-run")
    assert bad.returncode == 2 and "replicas" in bad.stderr, bad.stderr


def test_open_a_ui_on_the_local_backend_says_what_it_offers(kflab, state) -> None:
    out = kflab("open", "pipelines")
    assert out.returncode == 2
    assert "the local backend has no Kubeflow Pipelines UI to open" in out.stderr
    assert "kflab get runs" in out.stderr and "kflab up" in out.stderr
    assert "kflab get trials" in kflab("open", "katib").stderr
