"""Compiling for the lab's KFP server: the server's SDK version, checked in the IR."""

from __future__ import annotations

import json

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


# --- a package index for every step (issue 35 point 1) -------------------------------------

SCRIPT = ('\nif ! [ -x "$(command -v pip)" ]; then\n    python3 -m ensurepip || python3 -m '
          'ensurepip --user || apt-get install python3-pip\nfi\n\nPIP_DISABLE_PIP_VERSION_CHECK'
          "=1 python3 -m pip install --quiet --no-warn-script-location {opts}'scikit-learn'  && "
          " python3 -m pip install --quiet --no-warn-script-location {opts}'kfp==2.16.0' "
          "'--no-deps' 'typing-extensions>=3.7.4,<5; python_version<\"3.9\"' && \"$0\" \"$@\"\n")


def _ir(opts: str = "") -> dict:
    """Two executors as kfp 2.16.0 compiles them: a lightweight step (its pip script, as
    component_factory.py writes it) and a container component (no pip)."""
    return {"deploymentSpec": {"executors": {
        "exec-train": {"container": {"image": "docker.io/library/python:3.11-slim",
                                     "command": ["sh", "-c", SCRIPT.format(opts=opts),
                                                 "sh", "-ec", "program_path=$(mktemp -d)..."]}},
        "exec-echo": {"container": {"image": "alpine", "command": ["echo", "hi"]}}}}}


def test_a_step_kflab_did_not_compile_gets_the_index_options() -> None:
    from lab.backends.cluster.pipelines.index import for_url

    index = for_url("http://kflab-pip-index.kubeflow.svc.cluster.local/simple/")
    ir = _ir()
    assert kfp_compile.point_at_index(ir, index) == ["exec-train"]
    opts = ("--index-url http://kflab-pip-index.kubeflow.svc.cluster.local/simple/ "
            "--trusted-host kflab-pip-index.kubeflow.svc.cluster.local ")
    assert ir == _ir(opts)  # exactly what kfp's make_index_url_options writes
    assert kfp_compile.point_at_index(ir, index) == []  # already pointed: unchanged
    other = _ir("--index-url https://pypi.example.org/simple/ --trusted-host "
                "https://pypi.example.org/simple/ ")
    assert kfp_compile.point_at_index(other, index) == ["exec-train"] and other == _ir(opts)


def test_a_step_needing_a_package_the_index_lacks_is_refused() -> None:
    from lab.backends.cluster.pipelines.index import ClassIndex

    index = ClassIndex("http://h/simple/", ["h"], {"kfp": ["2.16.0"]})
    with pytest.raises(LabError) as err:
        kfp_compile.check_index(_ir(), index, "p.py")
    assert str(err.value).splitlines()[0] == ("p.py: step 'train' installs scikit-learn (the "
                                              "index has no scikit-learn), from the package "
                                              "index http://h/simple/")
    index.packages["scikit-learn"] = ["1.4.2"]
    kfp_compile.check_index(_ir(), index, "p.py")  # the marker-only line is skipped, as pip
    index.packages["kfp"] = ["2.15.0"]
    with pytest.raises(LabError, match=r"installs kfp==2\.16\.0 \(the index has kfp 2\.15\.0\)"):
        kfp_compile.check_index(_ir(), index, "p.py")


@pytest.mark.parametrize("url", ["ftp://h/simple/", "http:///simple/", "http://h/s'; rm x",
                                 "http://h/$(id)/", "http://h/a b/"])
def test_an_index_url_that_could_bend_the_step_shell_is_refused(url: str) -> None:
    from lab.backends.cluster.pipelines.index import for_url

    with pytest.raises(LabError, match="is not a package index URL"):
        for_url(url)


def test_the_class_index_from_the_environment(monkeypatch) -> None:
    from lab.backends.cluster.pipelines import index

    monkeypatch.setenv("KFLAB_PIP_INDEX_URL", "http://mirror.local:3141/root/pypi/+simple")
    got = index.class_index(kube=None)
    assert got is not None and got.url == "http://mirror.local:3141/root/pypi/+simple/"
    assert got.trusted_hosts == ["mirror.local:3141"] and got.packages is None


@pytest.mark.slow
def test_every_step_of_a_lab_pipeline_installs_from_the_index(tmp_path) -> None:
    """Compiled by the server's SDK with kfp's own pip_index_urls / pip_trusted_hosts; a
    component loaded from YAML (compiled without an index) gets the same options."""
    from pathlib import Path

    from lab.backends.cluster.pipelines.index import for_url

    repo = Path(__file__).resolve().parents[2]
    for f in ("components.py", "pipeline.py"):
        (tmp_path / f).write_text((repo / "scenarios/pipeline-classifiers/solutions" / f)
                                  .read_text())
    index = for_url("http://kflab-pip-index.kubeflow.svc.cluster.local/simple/")
    ir = kfp_compile.compile_for_server(tmp_path / "pipeline.py", None, tmp_path / "ir.json",
                                        index=index)
    opts = kfp_compile.index_options(index)
    commands = [e["container"]["command"][2] for e in ir["deploymentSpec"]["executors"]
                .values()]
    assert len(commands) == 7
    for script in commands:
        assert script.count("python3 -m pip install --quiet --no-warn-script-location "
                            + opts) == 2, script
    # a pipeline compiled elsewhere, without the index, submitted as it is: pointed too
    plain = kfp_compile.compile_for_server(tmp_path / "pipeline.py", None,
                                           tmp_path / "plain.yaml")
    assert "--index-url" not in json.dumps(plain)
    again = kfp_compile.compile_for_server(tmp_path / "plain.yaml", None,
                                           tmp_path / "again.json", index=index)
    assert json.dumps(again).count(opts) == 14
