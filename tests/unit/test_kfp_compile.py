"""Compiling for the lab's KFP server: the server's SDK version, checked in the IR."""

from __future__ import annotations

import pytest

from lab.backends.cluster.pipelines import compile as kfp_compile
from lab.components.catalog import load
from lab.errors import LabError


def test_the_compiler_version_is_the_servers() -> None:
    pipelines = load().get("pipelines")
    assert pipelines.version == kfp_compile.KFP_SERVER_VERSION


def test_an_ir_from_another_sdk_or_schema_is_refused() -> None:
    good = {"sdkVersion": "kfp-2.16.0", "schemaVersion": "2.1.0"}
    kfp_compile.check_ir(good, "2.16.0", "p.py")
    with pytest.raises(LabError, match=r"compiled by kfp-2\.17\.3, not kfp-2\.16\.0"):
        kfp_compile.check_ir({**good, "sdkVersion": "kfp-2.17.3"}, "2.16.0", "p.py")
    with pytest.raises(LabError, match=r"schemaVersion '3\.0\.0'"):
        kfp_compile.check_ir({**good, "schemaVersion": "3.0.0"}, "2.16.0", "p.py")


@pytest.mark.slow
def test_a_scenario_pipeline_compiles_with_the_servers_sdk(tmp_path, monkeypatch) -> None:
    """Needs the package index the first time (kfp==2.16.0 into kflab's cache folder)."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    for f in ("components.py", "pipeline.py"):
        (tmp_path / f).write_text((repo / "scenarios/pipeline-classifiers/assets" / f)
                                  .read_text())
    ir = kfp_compile.compile_for_server(tmp_path / "pipeline.py", None, tmp_path / "ir.json")
    assert ir["sdkVersion"] == "kfp-2.16.0" and ir["schemaVersion"] == "2.1.0"
    assert set(ir["root"]["dag"]["tasks"]) == {"load-data", "train-decision-tree"}
