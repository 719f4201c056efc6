"""The release data kflab ships (manifests/release-data.json): class plans and bundles with
no manifests tree, and a check that the data is what the pinned tree and the labs give."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lab.cli import cli
from lab.components import release
from lab.errors import LabError
from tests.conftest import REPO, SHARED

UPSTREAM = SHARED / "upstream" / "kubeflow-manifests-26.03"
needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(),
                                    reason=f"../shared/upstream not found at {SHARED}")


def _plan(tmp_path: Path, *extra: str) -> str:
    res = CliRunner().invoke(cli, ["--state", str(tmp_path), "class", "plan", "--students",
                                   "30", "--cpus", "32", "--memory", "128", "--disk", "400",
                                   *extra], env={"KFLAB_UPSTREAM": None})
    assert res.exit_code == 0, res.output
    return res.output


def test_class_plan_needs_no_manifests_tree(tmp_path: Path) -> None:
    """Before: --upstream was required ("Missing option '--upstream'")."""
    out = _plan(tmp_path)
    base = next(line for line in out.splitlines() if line.startswith("(lab profile + k3s)"))
    total = release.footprint_rows()[-1][1]
    # the base row is the shipped components' requests plus k3s's 0.5 CPU
    assert base.split()[4] == f"{total.cpu_requests + Decimal('0.5'):.2f}", base
    assert "labs fit 30 student(s)" in out and "katib-hpo" in out


def test_components_footprint_and_images_without_a_tree() -> None:
    res = CliRunner().invoke(cli, ["components", "footprint", "--json"],
                             env={"KFLAB_UPSTREAM": None})
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert set(rows) == {*release.component_names(), "total"}
    images = CliRunner().invoke(cli, ["components", "images", "--json"],
                                env={"KFLAB_UPSTREAM": None})
    assert images.exit_code == 0, images.output
    found = {i["image"]: i for i in json.loads(images.output)}
    assert "ghcr.io/kubeflow/katib/suggestion-hyperopt:v0.19.0" in found
    assert "katib-suggestion:random" in found[
        "ghcr.io/kubeflow/katib/suggestion-hyperopt:v0.19.0"]["uses"]


def test_data_made_for_other_pins_is_refused(tmp_path: Path, monkeypatch) -> None:
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    versions["artifacts"]["kubeflow-manifests"]["commit"] = "0" * 40
    versions["artifacts"]["kubeflow-manifests"]["url"] = (
        f"https://github.com/kubeflow/manifests/archive/{'0' * 40}.tar.gz")
    path = tmp_path / "versions.yaml"
    path.write_text(yaml.safe_dump(versions))
    monkeypatch.setenv("KFLAB_VERSIONS_FILE", str(path))
    with pytest.raises(LabError) as err:
        release.load()
    assert "was made for other pins" in str(err.value)
    assert "scripts/release_data.py" in str(err.value)


@pytest.mark.slow  # ~60 s: renders every component with kustomize
@needs_upstream
def test_shipped_data_is_what_the_pinned_tree_gives() -> None:
    """The release-time generator's output, recomputed here from ../shared/upstream: a pin
    or overlay change without `python3 scripts/release_data.py` fails this test."""
    shipped = release.load()
    fresh = release.compute(UPSTREAM)
    assert {k: v for k, v in shipped.items() if k != "pipeline_steps"} == \
        json.loads(json.dumps(fresh))


@pytest.mark.slow  # ~25 s: compiles the labs' pipelines
def test_shipped_pipeline_steps_are_what_the_labs_compile_to() -> None:
    pytest.importorskip("kfp")
    pytest.importorskip("nbformat")
    from lab.teaching import steps

    assert steps.shipped() == json.loads(json.dumps(steps.compute()))
    # the classifiers lab's steps install what its components.py names
    classifiers = steps.shipped()["labs"]["pipeline-classifiers"]
    assert {"scikit-learn", "pandas", "joblib", "xgboost-cpu"} <= set(
        classifiers[0]["requirements"])
    assert classifiers[0]["image"] == "docker.io/library/python:3.11-slim"
