"""`kflab up --dry-run` is the plan a newcomer reads first: no raw Jinja, advice that fits
their provider, a note that names what is really missing, and an exit status a script can
test (non-zero when `kflab up` would stop)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lab import doctor, lifecycle
from lab.doctor.rows import Host, Needs, Row
from lab.provision.preview import Change, Preview
from tests.conftest import run_kflab


def _dry_run(tmp_path: Path, profile: str) -> tuple[int, str]:
    prof = tmp_path / "lab.yaml"
    prof.write_text(profile)
    bindir = tmp_path / "bin"  # no vagrant, no VBoxManage: a blocker every machine has
    bindir.mkdir(exist_ok=True)
    res = run_kflab("up", "--dry-run", "-p", str(prof),
                    env={"PATH": f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin",
                         "KFLAB_STATE": str(tmp_path / "state")}, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, res.stdout + res.stderr


def test_a_virtualbox_plan_has_no_templates_no_libvirt_and_exits_non_zero(tmp_path: Path
                                                                          ) -> None:
    code, out = _dry_run(tmp_path, "provider: vagrant-virtualbox\nname: vb\ngpu: off\n")
    assert "kflab up would stop here" in out
    assert code != 0, out
    assert "{{" not in out and "{%" not in out, [ln for ln in out.splitlines() if "{{" in ln]
    assert "libvirt" not in out.lower(), [ln for ln in out.splitlines() if "libvirt" in ln]
    assert "growpart /dev/<" in out  # a run-time value is named, not shown as Jinja
    assert "nothing was changed (dry run)" in out
    assert not re.search(r"\(\)", out)


def test_an_existing_cluster_plan_says_the_kubeconfig_is_missing(tmp_path: Path) -> None:
    code, out = _dry_run(tmp_path, f"provider: existing\nname: far\n"
                                   f"kubeconfig: {tmp_path / 'nowhere.yaml'}\n")
    assert code != 0
    assert "node does not exist" not in out
    assert f"no kubeconfig at {tmp_path / 'nowhere.yaml'}" in out


def test_the_wsl_row_always_has_advice_and_a_blocker_never_shows_empty_parentheses() -> None:
    rows = doctor.diagnose(Needs(provider="wsl2"), Host(root=Path("/nonexistent")))
    wsl = next(r for r in rows if r.name == "wsl")
    assert wsl.status == "fail" and wsl.advice
    assert "wsl2" in wsl.advice or "WSL" in wsl.advice
    assert lifecycle.blocker_line(Row("x", "fail", "seen", "")) == "doctor: x: seen"


def test_virtualbox_without_vt_x_gets_no_libvirt_advice(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu sse2\n")
    host = Host(root=tmp_path, which=lambda _: None, disk_free_gib=100)
    row = next(r for r in doctor.diagnose(Needs(provider="vagrant-virtualbox"), host)
               if r.name == "virtualization")
    assert row.status == "fail" and "VT-x" in row.advice
    assert "libvirt" not in row.advice and "qemu" not in row.advice


def test_render_names_run_time_values_instead_of_jinja() -> None:
    shown = Preview("lab", "host", "this machine")
    shown.changes = [Change("k3s", "Fetch and verify the sha256: {{ artifact_file.file }}",
                            "download", "/usr/local/bin/k3s",
                            ["checksum sha256:{{ artifact_file.sha256 }}",
                             "for each: {{ k3s_link_stat.results | map('x') }}"])]
    text = "\n".join(shown.render())
    assert "{{" not in text
    assert "checksum sha256:<artifact_file.sha256>" in text
    assert "[Fetch and verify the sha256: <artifact_file.file>]" in text
    assert "<k3s_link_stat.results>" in text
