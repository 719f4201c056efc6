"""Deliverable 3, kflab's side: `kflab up` ends with the verify table, `kflab status` shows
the last run and `kflab status --verify` re-runs the verify role only.

Real ansible-playbook (local connection) with the stand-in playbook of
tests/fixtures/playbooks, whose verify role writes verify.json by the real role's contract
(playbooks/roles/verify/README.md); k3s and Kubeflow cannot run here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, run_kflab

PLAYBOOK = REPO / "tests" / "fixtures" / "playbooks" / "site.yml"


@pytest.fixture
def lab(tmp_path: Path) -> dict:
    kube = tmp_path / "user-kubeconfig"
    kube.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n")
    out = tmp_path / "offline"
    out.mkdir()
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: existing\nname: vt\nkubeconfig: {kube}\n"
                    f"components: [katib]\noffline: {out}\n")
    state = tmp_path / "state"
    return {"prof": prof, "out": out, "env": {"KFLAB_STATE": str(state)},
            "lab": state / "labs" / "vt"}


def test_up_ends_with_the_verify_table(lab: dict) -> None:
    res = run_kflab("up", "-p", str(lab["prof"]), "--playbook", str(PLAYBOOK), env=lab["env"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verify (" in res.stdout and "2/2 passed" in res.stdout
    assert "Experiment Succeeded, 2 trials" in res.stdout
    # piped: plain columns, one line per check, nothing drawn (as doctor and get print)
    assert not set("│┃━─┏┡└╭") & set(res.stdout), res.stdout
    assert any(line.split()[:2] == ["katib", "pass"] for line in res.stdout.splitlines())
    # the closing line says how long each phase took; the record keeps it
    assert "is up (" in res.stdout and "kubeflow " in res.stdout and "verify " in res.stdout
    rec = json.loads((lab["lab"] / "lab.json").read_text())
    assert set(rec["phases"]) == {"create", "kubeflow", "verify"}

    res = run_kflab("status", env=lab["env"])  # the API is closed: exit 1, still the table
    assert res.returncode == 1
    assert "verify (" in res.stdout and "2/2 passed" in res.stdout
    res = run_kflab("status", "--json", env=lab["env"])
    report = json.loads(res.stdout)
    assert [r["name"] for r in report["verify"]["rows"]] == ["node", "katib"]
    assert report["verify"]["ok"] is True and report["verify"]["when"]
    assert set(report["last_up_seconds"]) == {"create", "kubeflow", "verify"}


def test_a_failed_check_is_named_with_where_to_look(lab: dict) -> None:
    env = {**lab["env"], "KFLAB_TEST_VERIFY_FAIL": "katib"}
    res = run_kflab("up", "-p", str(lab["prof"]), "--playbook", str(PLAYBOOK), env=env)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "1/2 passed; failed: katib" in res.stdout  # the table comes before the error
    assert "not done after 10s" in res.stdout
    assert "kubectl -n kflab-lab describe experiment kflab-verify-hpo" in res.stdout
    assert "lab vt is installed, but verify failed: katib" in res.stderr
    assert "kflab status --verify" in res.stderr


def test_status_verify_reruns_only_the_verify_role(lab: dict) -> None:
    res = run_kflab("up", "-p", str(lab["prof"]), "--playbook", str(PLAYBOOK), env=lab["env"])
    assert res.returncode == 0, res.stderr
    results = lab["lab"] / "verify.json"
    first = json.loads(results.read_text())["finished"]
    (lab["out"] / "components").write_text("marker\n")  # the kubeflow role would rewrite it
    env = {**lab["env"], "KFLAB_TEST_VERIFY_FAIL": "katib"}
    res = run_kflab("status", "--verify", env=env)
    assert res.returncode == 1
    assert "role verify" in res.stdout and "role kubeflow" not in res.stdout
    assert (lab["out"] / "components").read_text() == "marker\n"
    assert json.loads(results.read_text())["finished"] > first
    assert "1/2 passed; failed: katib" in res.stdout


def test_a_malformed_results_file_names_its_field(lab: dict, tmp_path: Path) -> None:
    from lab.errors import InputError
    from lab.provision import verify

    path = tmp_path / "verify.json"
    path.write_text(json.dumps({"schema": 1, "rows": [{"name": "node", "ok": "yes",
                                                       "seconds": 1, "message": ""}]}))
    with pytest.raises(InputError, match=r"verify.json: field 'rows\[0\].ok'"):
        verify.read(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="unreadable verify results"):
        verify.read(path)
    assert verify.read(tmp_path / "absent.json") is None
