"""wsl2 / host / existing providers and the doctor rows behind them, against stand-in /proc
and /sys trees (doctor.rows.Host takes a root folder) and a STAND-IN `wsl.exe` (a script that
answers like Windows' wsl.exe, in UTF-16LE): neither exists on a Linux CI machine."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from lab.config import Profile
from lab.doctor import linux as doctor_linux
from lab.doctor import rows as doctor_rows
from lab.errors import LabError
from lab.providers.existing import ExistingProvider, extract_context
from lab.providers.local import Wsl2Provider, wsl_exe_version


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _standin_wsl_exe(folder: Path, listing: str) -> Path:
    """A stand-in for Windows' wsl.exe: prints `listing` as UTF-16LE with a BOM, like it."""
    exe = folder / "wsl.exe"
    data = ("\ufeff" + listing).encode("utf-16-le")
    (folder / "listing.bin").write_bytes(data)
    exe.write_text(f"#!/bin/sh\n[ \"$1 $2\" = '--list --verbose' ] || exit 2\n"
                   f"cat '{folder / 'listing.bin'}'\n")
    exe.chmod(0o755)
    return exe


WSL2_FACTS = {
    "proc/sys/kernel/osrelease": "5.15.153.1-microsoft-standard-WSL2\n",
    "proc/1/comm": "systemd\n",
    "proc/meminfo": "MemTotal:       16303428 kB\n",
    "usr/lib/wsl/lib/libcuda.so.1": "",
}


def _host(root: Path, bin_dir: Path | None = None, env: dict | None = None) -> doctor_rows.Host:
    def which(name: str) -> str | None:
        p = bin_dir / name if bin_dir else None
        return str(p) if p and p.exists() else None

    return doctor_rows.Host(root=root, which=which,
                       env=env if env is not None else {"WSL_DISTRO_NAME": "Ubuntu"})


def test_wsl_rows_pass_on_wsl2_with_systemd_and_cuda(tmp_path: Path) -> None:
    host = _host(_tree(tmp_path, WSL2_FACTS))
    rows = {r.name: r for r in doctor_linux.wsl_rows(host)}
    assert {r.status for r in rows.values()} == {"pass"}
    assert "libcuda.so.1" in rows["cuda on wsl"].observed


@pytest.mark.parametrize(("facts", "row", "advice"), [
    ({"proc/1/comm": "init\n"}, "systemd", "systemd=true"),
    ({"proc/sys/kernel/osrelease": "4.4.0-19041-Microsoft\n"}, "wsl version", "--set-version"),
])
def test_wsl_rows_fail_with_advice(tmp_path: Path, facts: dict, row: str, advice: str) -> None:
    host = _host(_tree(tmp_path, {**WSL2_FACTS, **facts}))
    rows = {r.name: r for r in doctor_linux.wsl_rows(host)}
    assert rows[row].status == "fail" and advice in rows[row].advice


def test_wsl2_provider_reads_version_from_standin_wsl_exe(tmp_path: Path) -> None:
    root = _tree(tmp_path / "root", WSL2_FACTS)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _standin_wsl_exe(bin_dir, "  NAME      STATE           VERSION\r\n"
                              "* Ubuntu    Running         1\r\n"
                              "  Debian    Stopped         2\r\n")
    host = _host(root, bin_dir)
    assert wsl_exe_version(host, "Ubuntu") == 1
    assert wsl_exe_version(host, "Debian") == 2
    assert wsl_exe_version(host, "Arch") is None
    prov = Wsl2Provider(Profile(provider="wsl2"), tmp_path / "lab", host=host)
    with pytest.raises(LabError, match="WSL 1") as err:
        prov.preflight()  # `kflab up` runs it before create (unless --force)
    assert "wsl --set-version Ubuntu 2" in str(err.value)
    said: list[str] = []
    ok = Wsl2Provider(Profile(provider="wsl2"), tmp_path / "lab",
                      host=_host(root, bin_dir, {"WSL_DISTRO_NAME": "Debian"}))
    ok.preflight()  # WSL 2 + systemd: accepted
    ok.create(Profile(provider="wsl2"), said.append)
    assert said and ok.inventory().connection == "local"


def test_wsl2_provider_refuses_without_systemd_and_outside_wsl(tmp_path: Path) -> None:
    root = _tree(tmp_path / "r1", {**WSL2_FACTS, "proc/1/comm": "init\n"})
    with pytest.raises(LabError, match="systemd") as err:
        Wsl2Provider(Profile(provider="wsl2"), tmp_path, host=_host(root)).preflight()
    assert "/etc/wsl.conf" in str(err.value)
    plain = _tree(tmp_path / "r2", {"proc/sys/kernel/osrelease": "6.1.0-13-amd64\n"})
    with pytest.raises(LabError, match="not a WSL distro"):
        Wsl2Provider(Profile(provider="wsl2"), tmp_path, host=_host(plain, env={})).preflight()


def test_wsl2_gpus_from_cuda_on_wsl_nvidia_smi(tmp_path: Path) -> None:
    """The stand-in nvidia-smi sits where CUDA on WSL puts it (/usr/lib/wsl/lib)."""
    root = _tree(tmp_path, WSL2_FACTS)
    smi = root / "usr/lib/wsl/lib/nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA GeForce RTX 4090, 24564 MiB, 00000000:01:00.0'\n")
    smi.chmod(0o755)
    gpus = Wsl2Provider(Profile(provider="wsl2"), tmp_path / "lab", host=_host(root)).gpus()
    assert [(g.name, g.memory) for g in gpus] == [("NVIDIA GeForce RTX 4090", "24564 MiB")]


# --- existing cluster -------------------------------------------------------------------------

def test_existing_extracts_one_context_with_absolute_paths(tmp_path: Path) -> None:
    kc = tmp_path / "config"
    kc.write_text("apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts:\n"
                  "- {name: a, context: {cluster: c1, user: u1}}\n"
                  "clusters:\n- {name: c1, cluster: {server: 'https://h:6443', "
                  "certificate-authority: certs/ca.crt}}\n"
                  "users:\n- {name: u1, user: {client-key: k.pem, token: t}}\n")
    data = extract_context(kc, "")
    assert data["current-context"] == "a"
    assert data["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "certs/ca.crt")
    assert data["users"][0]["user"]["client-key"] == str(tmp_path / "k.pem")
    with pytest.raises(LabError, match="one of: a"):
        extract_context(kc, "nope")
    prov = ExistingProvider(Profile(provider="existing", kubeconfig=str(kc)), tmp_path / "lab")
    prov.create(prov.profile, lambda s: None)
    assert stat.S_IMODE(prov.kubeconfig().stat().st_mode) == 0o600
    assert prov.capabilities.provisions_node is False
    rows = doctor_rows.existing_rows(doctor_rows.Needs(provider="existing", kubeconfig=str(kc),
                                             context="zzz"), doctor_rows.Host())
    assert rows[0].status == "fail" and "pick one of: a" in rows[0].advice
