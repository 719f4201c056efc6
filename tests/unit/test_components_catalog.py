"""manifests/versions.yaml: the catalog loads, selects with dependencies, rejects bad entries
with the file and field named, and the CLI prints the footprint of the rendered set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.components.catalog import REPO_ROOT, VERSIONS_FILE, load
from lab.errors import InputError, LabError


def write(tmp_path: Path, doc) -> Path:
    path = tmp_path / "versions.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


def base() -> dict:
    return yaml.safe_load(VERSIONS_FILE.read_text())


def test_real_catalog_order_and_selection():
    cat = load()
    assert cat.names()[:5] == ["cert-manager", "training-operator", "katib", "pipelines",
                               "kserve"]
    assert [c.name for c in cat.select(["kserve"])] == ["cert-manager", "kserve"]
    assert "gpu" in [c.name for c in cat.select(["katib"], gpu=True)]
    for name, art in cat.artifacts.items():
        urls = [u for f in art.arch.values() for u in (f.url, f.checksums)] or [art.url]
        assert all(u.startswith("https://") for u in urls), name
        assert art.pinned and (art.version or art.kind == "openpgp-key"), name
        assert art.file or set(art.arch) == {"amd64", "arm64"}, name


def test_unknown_component_names_the_choices():
    with pytest.raises(InputError, match="unknown component 'kubeflow-all'") as err:
        load().select(["kubeflow-all"])
    assert "cert-manager" in str(err.value)


def amd64(d: dict) -> dict:
    return d["artifacts"]["k3s"]["arch"]["amd64"]


def manifests(d: dict) -> dict:
    return d["artifacts"]["kubeflow-manifests"]


@pytest.mark.parametrize("mutate, field", [
    (lambda d: amd64(d).update(sha256="abc"), "artifacts.k3s.arch.amd64.sha256"),
    (lambda d: amd64(d).update(url="http://example.com/k3s"), "artifacts.k3s.arch.amd64.url"),
    (lambda d: amd64(d).update(checksums="http://example.com/s"),
     "artifacts.k3s.arch.amd64.checksums"),
    (lambda d: amd64(d).pop("file"), "artifacts.k3s.arch.amd64.file"),
    (lambda d: amd64(d).update(file="k3s-arm64"), "artifacts.k3s.arch.amd64.file"),
    (lambda d: d["artifacts"]["k3s"]["arch"].update(riscv64={}), "artifacts.k3s.arch"),
    (lambda d: d["artifacts"]["k3s"].update(kind="binary"), "artifacts.k3s.kind"),
    (lambda d: manifests(d).update(tree="7db2485"), "artifacts.kubeflow-manifests.tree"),
    (lambda d: manifests(d).update(commit="A" * 40), "artifacts.kubeflow-manifests.commit"),
    (lambda d: manifests(d).update(url="https://github.com/kubeflow/manifests/archive/refs/"
                                       "tags/26.03.tar.gz"), "artifacts.kubeflow-manifests.url"),
    (lambda d: manifests(d).update(file="../x.tar.gz"), "artifacts.kubeflow-manifests.file"),
    (lambda d: d["artifacts"]["nvidia-container-toolkit-key"].update(fingerprint="c95b"),
     "artifacts.nvidia-container-toolkit-key.fingerprint"),
    (lambda d: d.update(schema=1), "schema"),
    (lambda d: d["components"][4].update(requires=["nope"]), "components.kserve.requires"),
    (lambda d: d.pop("components"), "components"),
])
def test_bad_entries_name_file_and_field(tmp_path, mutate, field):
    doc = base()
    mutate(doc)
    path = write(tmp_path, doc)
    with pytest.raises(InputError) as err:
        load(path)
    assert err.value.file == str(path)
    assert err.value.field.lstrip(".") == field


def test_null_pins_load_but_are_reported_missing(tmp_path):
    doc = base()
    amd64(doc)["sha256"] = None
    manifests(doc)["tree"] = None
    cat = load(write(tmp_path, doc))
    assert cat.artifacts["k3s"].missing() == ["arch.amd64.sha256"]
    assert cat.artifacts["kubeflow-manifests"].missing() == ["tree"]
    assert cat.unpinned(["k3s", "kubeflow", "gpu"]) == ["k3s", "kubeflow-manifests"]


def test_versions_file_and_mirror_come_from_the_environment(tmp_path, monkeypatch):
    from lab.components import catalog

    doc = base()
    doc["artifacts"]["k3s"]["version"] = "v1.0.0+k3s1"
    monkeypatch.setenv("KFLAB_VERSIONS_FILE", str(write(tmp_path, doc)))
    assert load().artifacts["k3s"].version == "v1.0.0+k3s1"
    assert catalog.github_url() == "https://github.com"
    monkeypatch.setenv("KFLAB_GITHUB_URL", "http://127.0.0.1:8080/")
    assert catalog.github_url() == "http://127.0.0.1:8080"
    for bad in ("http://10.0.0.1/gh", "ftp://x", "https://a b"):
        monkeypatch.setenv("KFLAB_GITHUB_URL", bad)
        with pytest.raises(InputError, match="KFLAB_GITHUB_URL"):
            catalog.github_url()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=20))
def test_fuzz_loader_fails_only_with_input_errors(tmp_path, doc):
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        load(path)
    except InputError as exc:
        assert str(path) in str(exc)


def test_footprint_cli_prints_every_component_and_a_total(tmp_path):
    from tests.conftest import need_upstream

    upstream = need_upstream("kubeflow-manifests-26.03")
    if not shutil.which("kubectl"):
        pytest.skip("needs kubectl (scripts/standins/21-kubectl.sh)")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "KFLAB_STATE": str(tmp_path)}
    import sys

    proc = subprocess.run([sys.executable, "-m", "lab.cli", "components", "footprint", "--json",
                           "-c", "cert-manager", "-c", "katib", "--upstream", str(upstream)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data) == ["cert-manager", "katib", "total"]  # install order, not argv order
    assert data["total"]["memory_requests_bytes"] == (
        data["cert-manager"]["memory_requests_bytes"] + data["katib"]["memory_requests_bytes"])
    assert data["katib"]["pods"] == 4
    assert data["total"]["containers_without_memory_request"] == 0


def test_render_refuses_a_tree_that_is_not_kubeflow_manifests(tmp_path):
    from lab.components.render import render

    with pytest.raises(LabError, match="not a kubeflow/manifests tree"):
        render("kserve", tmp_path)
