"""Which backend a command uses: --backend, --context, $KFLAB_BACKEND, lab.yaml `backend:`,
the lab `kflab up` verified, else local; scenarios that cannot run on a backend say why and
are skipped; a guided session keeps its backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import config
from lab.backends import Choice, choose, get_backend
from lab.errors import InputError, LabError
from lab.scenarios import guided
from lab.scenarios.loader import load_scenario
from lab.scenarios.runner import run_scenario


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("KFLAB_BACKEND", "KFLAB_CONTEXT", "KFLAB_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)


def _lab_record(state: Path, kubeconfig: str) -> None:
    path = state / "labs" / "kflab" / "lab.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"profile": {"provider": "host"}, "backend": {
        "name": "cluster", "kubeconfig": kubeconfig, "context": None}}))


def test_local_is_the_default(tmp_path: Path) -> None:
    assert choose(None, tmp_path) == Choice("local", why="default")


def test_the_verified_lab_becomes_the_default_and_a_flag_still_wins(tmp_path: Path) -> None:
    _lab_record(tmp_path, "/labs/kubeconfig")
    got = choose(None, tmp_path)
    assert (got.name, got.kubeconfig) == ("cluster", "/labs/kubeconfig")
    assert choose("local", tmp_path).name == "local"
    assert choose("cluster", tmp_path).kubeconfig == "/labs/kubeconfig"


def test_order_env_then_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lab_record(tmp_path, "/k")
    assert choose(None, tmp_path, profile_backend="local").name == "local"
    monkeypatch.setenv("KFLAB_BACKEND", "local")
    assert choose(None, tmp_path, profile_backend="cluster").why == "$KFLAB_BACKEND"
    monkeypatch.setenv("KFLAB_BACKEND", "kubernetes")
    with pytest.raises(LabError, match=r"unknown backend 'kubernetes'"):
        choose(None, tmp_path)


def test_a_context_means_the_cluster_backend(tmp_path: Path) -> None:
    got = choose(None, tmp_path, context="prod")
    assert (got.name, got.context, got.why) == ("cluster", "prod", "--context")


def test_lab_yaml_backend_is_validated(tmp_path: Path) -> None:
    assert config.parse("provider: host\nbackend: cluster\n").backend == "cluster"
    with pytest.raises(InputError, match=r"backend.*not a valid choice"):
        config.parse("provider: host\nbackend: k8s\n")


def test_cluster_backend_maps_default_to_the_lab_namespace(tmp_path: Path) -> None:
    backend = get_backend(Choice("cluster", kubeconfig=str(tmp_path / "none")), str(tmp_path))
    assert backend.ns("default") == config.lab_namespace() == "kflab-lab"
    assert backend.ns("team-a") == "team-a"
    with pytest.raises(LabError, match="invalid namespace"):
        backend.ns("../kube-system")


SCENARIO = """
id: {sid}
title: t
level: beginner
duration: 1m
backends: {backends}
steps:
  - id: one
    title: one
    text: steps/a.md
    solve:
      - command: [python, -c, "open('a.txt', 'w').write('x')"]
    checks:
      - type: file-exists
        path: a.txt
        message: a.txt missing
"""


def _scenario(tmp_path: Path, backends: str, sid: str = "only-local") -> Path:
    root = tmp_path / sid
    (root / "steps").mkdir(parents=True)
    (root / "steps" / "a.md").write_text("do it\n")
    (root / "scenario.yaml").write_text(SCENARIO.format(sid=sid, backends=backends))
    return root


def test_a_scenario_says_why_it_cannot_run_on_a_backend_and_is_skipped(tmp_path: Path) -> None:
    s = load_scenario(_scenario(tmp_path, '{local: true, cluster: "needs this laptop"}'))
    assert s.backends == ("local",)
    assert s.why_not("cluster") == "needs this laptop"
    assert s.why_not("local") is None
    res = run_scenario(s, tmp_path / "state", mode="test", backend=Choice("cluster"))
    assert res.status == "skipped" and res.ok
    assert res.steps[0].skip_reason == "needs this laptop"
    ran = run_scenario(s, tmp_path / "state", mode="test", backend="local")
    assert ran.status == "passed"


def test_backends_mapping_needs_a_reason(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="give true, or the reason"):
        load_scenario(_scenario(tmp_path, "{local: true, cluster: false}"))


def test_a_guided_session_keeps_its_backend(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFLAB_SCENARIOS", str(tmp_path))
    s = load_scenario(_scenario(tmp_path, "[local, cluster]", "both"))
    state = tmp_path / "state"
    state.mkdir()
    session = guided.start(s, state, tmp_path / "work", restart=False,
                           backend=Choice("cluster", context="lab"), explicit=True)
    assert guided.active(state).backend_choice.context == "lab"
    assert session.backend_choice.name == "cluster"
    with pytest.raises(LabError, match="was started on the cluster backend"):
        guided.start(s, state, tmp_path / "work", restart=False,
                     backend=Choice("local"), explicit=True)
    again = guided.start(s, state, tmp_path / "work", restart=False, backend=Choice("local"))
    assert again.backend_choice.name == "cluster"  # resuming without naming one keeps it


def test_cli_commands_take_backend_and_context(kflab) -> None:
    for argv in (["apply"], ["get"], ["describe"], ["delete"], ["logs"], ["predict"],
                 ["pipeline", "run"], ["scenario", "run"], ["scenario", "test"],
                 ["scenario", "start"], ["demo"]):
        out = kflab(*argv, "--help")
        assert "--backend [local|cluster]" in out.stdout and "--context" in out.stdout, argv


def test_scenario_list_shows_backends(kflab) -> None:
    out = kflab("scenario", "list", "--json")
    rows = json.loads(out.stdout)
    assert all(r["backends"][0] == "local" for r in rows)
    # a lab that cannot use a cluster says why, and every other one runs on both
    local_only = {r["id"]: r["unsupported"] for r in rows if r["backends"] == ["local"]}
    assert set(local_only) == {"dask-grid-search", "input-pipeline-bottleneck",
                               "mixed-precision-and-profiling"}
    assert all(why["cluster"] for why in local_only.values()), local_only
    assert all(r["backends"] == ["local", "cluster"] for r in rows if r["id"] not in local_only)
