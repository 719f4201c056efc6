"""Class roster (hostile CSV), lab sizing and the class plan: pure logic, no cluster."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import cli
from lab.components.footprint import Footprint
from lab.errors import InputError
from lab.scenarios.loader import find, load_all
from lab.teaching import plan, roster, sizing
from tests.conftest import SHARED, upstream_missing


def _roster(tmp_path: Path, text: str | bytes, name: str = "r.csv") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def test_roster_names_become_labels(tmp_path: Path) -> None:
    p = _roster(tmp_path, "\ufeffStudent,Name,email,group\n"
                          "José Núñez,,j@x.org,a\n\n  s-0042 ,Ada Lovelace,,b\n"
                          '"O\'Brien, Pat",Pat,,c\n')
    r = roster.load(p, "ml-101")
    assert [s.id for s in r.students] == ["jose-nunez", "s-0042", "o-brien-pat"]
    assert [s.name for s in r.students] == ["José Núñez", "Ada Lovelace", "Pat"]
    assert r.students[1].line == 4 and r.students[1].namespace("ml-101") == "ml-101-s-0042"
    assert r.ignored_columns == ["group"]


@pytest.mark.parametrize(("text", "field", "line", "words"), [
    ("name\nann\n", "student", 1, "no 'student' column"),
    ("student,student\nann,bob\n", "student", 1, "column named twice"),
    ("student\nann\nAnn\n", "student", 3, "same student id 'ann' as line 2"),
    ("student\nann\n,x\n", "student", 3, "empty"),
    ("student\n李雷\n", "student", 2, "no letter or digit"),
    ("student\n" + "a" * 60 + "\n", "student", 2, "at most 56 fit"),
    ('student,name\nann,"two\nlines"\n', "name", 2, "line break"),
    ("student\n", "student", None, "only a header row"),
    ("", None, 1, "no header row"),
    ('student\n"ann\n', None, None, "not valid CSV"),
])
def test_roster_refuses_bad_rows_naming_line_and_field(tmp_path: Path, text: str,
                                                        field: str | None, line: int | None,
                                                        words: str) -> None:
    p = _roster(tmp_path, text)
    with pytest.raises(InputError) as err:
        roster.load(p, "ml-101")
    assert err.value.file == str(p) and err.value.field == field and words in str(err.value)
    if line is not None:
        assert err.value.line == line
    assert err.value.hint


def test_roster_refuses_binary_and_huge_files_and_bad_class_names(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not UTF-8"):
        roster.load(_roster(tmp_path, b"student\nann\n\xff\xfe\n"), "c")
    with pytest.raises(InputError, match="NUL"):
        roster.load(_roster(tmp_path, b"student\nann\x00\n"), "c")
    with pytest.raises(InputError, match="MAX_ROSTER_BYTES"):
        roster.load(_roster(tmp_path, b"student\n" + b"a\n" * 600_000), "c")
    with pytest.raises(InputError, match="cannot read"):
        roster.load(tmp_path / "missing.csv", "c")
    for bad in ("ML", "-a", "a" * 21, "a_b", ""):
        with pytest.raises(InputError, match="class name"):
            roster.load(_roster(tmp_path, "student\nann\n"), bad)
    for bad in ("kube", "kube-x"):  # `kube` + student `system` would be kube-system
        with pytest.raises(InputError, match="Kubernetes' own"):
            roster.load(_roster(tmp_path, "student\nsystem\n"), bad)


GOOD_RECORD = {"name": "c1", "created_at": "t", "server": "https://s", "quota": {"cpu": "2"},
               "kfp": False, "kubeconfigs": "/k", "format": 1,
               "seats": [{"id": "a", "name": "A", "email": "", "namespace": "c1-a",
                          "kubeconfig": "/k/a.kubeconfig", "expires": None}]}


@pytest.mark.parametrize(("edit", "field"), [
    ({"seats": 5}, "'seats'"),
    ({"seats": [5]}, "'seats[0]'"),
    ({"seats": [{"id": "a"}]}, "'seats[0].name'"),
    ({"seats": [{**GOOD_RECORD["seats"][0], "namespace": "kube-system"}]}, "'seats[0]'"),
    ({"seats": [{**GOOD_RECORD["seats"][0], "id": "../x", "namespace": "c1-../x"}]},
     "'seats[0]'"),
    ({"quota": [1]}, "'quota'"),
    ({"kfp": "yes"}, "'kfp'"),
    ({"server": None}, "'server'"),
    ({"format": 9}, "'format'"),
    ({"name": "c2", "seats": []}, "holds class 'c2'"),
])
def test_a_hand_edited_class_record_is_refused_naming_the_field(
        tmp_path: Path, edit: dict, field: str) -> None:
    """class.json of the wrong shape: one error naming the file and the field (each of
    these was a TypeError, exit 70, in class status / grade / delete)."""
    import json

    from lab.errors import LabError
    from lab.teaching import class_

    path = class_.record_path(tmp_path, "c1")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(GOOD_RECORD))
    assert class_.load_record(tmp_path, "c1").seats[0].namespace == "c1-a"
    path.write_text(json.dumps({**GOOD_RECORD, **edit}))
    with pytest.raises(LabError) as err:
        class_.load_record(tmp_path, "c1")
    assert field in str(err.value) and str(path) in str(err.value), str(err.value)


def test_lab_need_counts_what_the_controllers_run() -> None:
    """katib-hpo ships two Experiments with parallelTrialCount 2: per Experiment 2 trial pods
    (the training container + Katib's metrics-collector sidecar) and 1 suggestion pod."""
    need = sizing.lab_need(find("katib-hpo"))
    assert (need.pods, need.containers) == (6, 10)
    assert need.cpu == 10 * Decimal("0.25") and need.memory == 10 * 512 * 2**20
    ddp = sizing.lab_need(find("distributed-training"))
    assert (ddp.pods, ddp.containers) == (3, 3)  # master + 2 workers of the PyTorchJob
    assert sizing.lab_need(find("pipeline-classifiers")).pipelines


def test_class_quota_is_the_largest_lab_with_headroom() -> None:
    needs = [sizing.lab_need(s) for s in load_all()]
    quota = sizing.class_quota(needs)
    biggest = max(n.cpu for n in needs)
    assert quota["requests.cpu"] == f"{int(biggest * Decimal('1.25') * 1000)}m"
    assert int(quota["pods"]) == 2 * max(n.pods for n in needs)
    assert sizing.class_quota([])["requests.cpu"] == "312m"  # one default container


def test_plan_says_which_labs_fit() -> None:
    labs = [find("katib-hpo"), find("kserve-serving"), find("dask-grid-search")]
    comps = Footprint(cpu_requests=Decimal("0.4"), memory_requests=Decimal(2 * 2**30))
    server = plan.Server(Decimal(16), Decimal(64 * 2**30), Decimal(500 * 2**30))
    base, rows = plan.plan(10, labs, comps, server)
    by = {r.lab: r for r in rows}
    assert base.cpu == Decimal("0.9")
    assert by["katib-hpo"].cpu == Decimal("0.9") + 10 * Decimal("2.5")
    assert by["katib-hpo"].short == ["cpu"] and not by["katib-hpo"].fits
    assert by["kserve-serving"].fits
    assert by["dask-grid-search"].why_not and not by["dask-grid-search"].fits


@pytest.mark.slow  # ~25 s: renders the whole lab profile with kustomize for the footprint
@pytest.mark.skipif(bool(upstream_missing("kubeflow-manifests-26.03")),
                    reason=upstream_missing("kubeflow-manifests-26.03") or "")
def test_class_plan_command(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["--state", str(tmp_path), "class", "plan", "--students",
                                   "30", "--upstream",
                                   str(SHARED / "upstream" / "kubeflow-manifests-26.03"),
                                   "--cpus", "32", "--memory", "128", "--disk", "400"])
    assert out.exit_code == 0, out.output
    assert "katib-hpo" in out.output and "no: cpu short" in out.output
    assert "labs fit 30 student(s)" in out.output


def test_class_create_checks_the_roster_before_any_cluster(tmp_path: Path) -> None:
    """A bad roster fails before kflab even reads a kubeconfig (there is none here)."""
    p = _roster(tmp_path, "student\nann\nANN\n")
    out = CliRunner().invoke(cli, ["--state", str(tmp_path / "s"), "class", "create", str(p),
                                   "--kubeconfig", str(tmp_path / "none")])
    assert isinstance(out.exception, InputError)
    assert f"{p}:3: field 'student'" in str(out.exception)
    assert not (tmp_path / "kubeconfigs-class").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_class_plan_refuses_absurd_server_sizes(tmp_path: Path, value: str) -> None:
    """click's FloatRange lets nan through; it would reach Decimal comparisons."""
    (tmp_path / "applications").mkdir()
    out = CliRunner().invoke(cli, ["--state", str(tmp_path / "s"), "class", "plan",
                                   "--students", "2", "--upstream", str(tmp_path),
                                   "--cpus", value])
    assert out.exit_code == 2 and "--cpus" in out.output, out.output


def test_a_kubeconfig_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    """In a shared --out folder, a `.NAME.part` symlink planted by another user must not
    make the token land in (or truncate) the file it points to."""
    import os

    from lab.teaching import class_

    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / ".ann.kubeconfig.part")
    path = class_.write_kubeconfig(tmp_path / "ann.kubeconfig", {"server": "https://s"},
                                   "c-ann", "tok", "c-ann")
    assert victim.read_text() == "keep"
    assert oct(path.stat().st_mode)[-3:] == "600" and "tok" in path.read_text()


@pytest.mark.parametrize("command", ["status", "grade", "delete"])
def test_class_commands_stop_on_an_unreachable_cluster(tmp_path: Path, command: str) -> None:
    """A kubeconfig whose server is a closed loopback port (nothing mocked: a real refused
    connection): the command exits 2 (kflab's code for an unreachable cluster) naming the
    server and why, instead of showing every student 0/N or writing grades of 0."""
    import json
    import socket

    from lab.teaching import class_

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kubeconfig"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                               "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    kc.chmod(0o600)
    path = class_.record_path(tmp_path / "state", "c1")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(GOOD_RECORD))
    args = ["--state", str(tmp_path / "state"), "class", command, "--class", "c1",
            "--kubeconfig", str(kc)]
    if command == "delete":
        args.append("--yes")
    if command == "grade":
        args += ["--out", str(tmp_path / "grades")]
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"cannot reach the Kubernetes API at https://127.0.0.1:{port}" in res.stderr
    assert "connection refused" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "grades").exists()
