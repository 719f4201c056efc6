"""WSL 2 GPUs: the device plugin through CDI (NVIDIA/k8s-device-plugin issue 646: legacy mode
finds "No devices found" on k3s in WSL 2), and a hint from `kflab up` when nvidia.com/gpu
never appears. No WSL here: the spec completion runs on a spec of the shape `nvidia-ctk cdi
generate --mode=wsl --format=json` writes (one `all` device: /dev/dxg, the driver store's
libraries, the ldcache hook), and the hint through Ansible itself on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

ROLES = REPO / "playbooks" / "roles"
SCRIPT = ROLES / "gpu" / "files" / "cdi_wsl.py"
STORE = "/usr/lib/wsl/drivers/nvlti.inf_amd64_0123456789abcdef"
GENERATED = {
    "cdiVersion": "0.3.0", "kind": "nvidia.com/gpu",
    "devices": [{"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/dxg"}]}}],
    "containerEdits": {
        "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
                   "args": ["nvidia-ctk", "hook", "update-ldcache", "--folder", STORE]}],
        "mounts": [{"hostPath": f"{STORE}/libcuda.so.1.1",
                    "containerPath": f"{STORE}/libcuda.so.1.1",
                    "options": ["ro", "nosuid", "nodev", "bind"]}]}}
UUIDS = ["GPU-11111111-2222-3333-4444-555555555555", "GPU-66666666-7777-8888-9999-000000000000"]


def _run(tmp_path: Path, spec: dict) -> tuple[dict, str]:
    gen, out = tmp_path / "gen.json", tmp_path / "nvidia.json"
    gen.write_text(json.dumps(spec))
    res = subprocess.run([sys.executable, str(SCRIPT), str(gen), str(out),
                          "/usr/lib/wsl/lib/libdxcore.so", *UUIDS], capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.read_text()), res.stdout.strip()


def test_every_gpu_gets_a_device_and_libdxcore_is_mounted(tmp_path: Path) -> None:
    spec, said = _run(tmp_path, GENERATED)
    assert said == "changed"
    names = [d["name"] for d in spec["devices"]]
    assert names == ["all", UUIDS[0], "0", UUIDS[1], "1"]
    assert all(d["containerEdits"] == GENERATED["devices"][0]["containerEdits"]
               for d in spec["devices"])
    dx = [m for m in spec["containerEdits"]["mounts"] if m["hostPath"].endswith("libdxcore.so")]
    assert dx == [{"hostPath": "/usr/lib/wsl/lib/libdxcore.so",
                   "containerPath": "/usr/lib/wsl/lib/libdxcore.so",
                   "options": ["ro", "nosuid", "nodev", "bind"]}]
    assert spec["cdiVersion"] == "0.5.0"  # device names starting with a digit
    assert _run(tmp_path, GENERATED)[1] == "unchanged"  # idempotent: no k3s restart


def test_a_spec_that_already_mounts_libdxcore_gets_no_second_mount(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(GENERATED))
    spec["containerEdits"]["mounts"].append({"hostPath": "/usr/lib/wsl/lib/libdxcore.so",
                                             "containerPath": "/usr/lib/wsl/lib/libdxcore.so"})
    out, _ = _run(tmp_path, spec)
    assert sum(m["hostPath"].endswith("libdxcore.so")
               for m in out["containerEdits"]["mounts"]) == 1


def test_the_device_plugin_runs_through_cdi_on_wsl_only() -> None:
    enable = yaml.safe_load((ROLES / "gpu" / "tasks" / "enable.yml").read_text())
    cdi = next(t for t in enable if "cdi_wsl.yml" in str(t.get("ansible.builtin.include_tasks")))
    assert cdi["when"] == "gpu_platform == 'wsl2'"
    tasks = yaml.safe_load((ROLES / "gpu" / "tasks" / "cdi_wsl.yml").read_text())
    argv = [a for t in tasks for a in (t.get("ansible.builtin.command") or {}).get("argv", [])]
    assert "--mode=wsl" in argv and "nvidia-container-runtime.mode=cdi" in argv


def _advertised(tmp_path: Path, platform: str) -> subprocess.CompletedProcess[str]:
    book = tmp_path / "adv.yml"
    book.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "vars": {"gpu_platform": platform, "gpu_allocatable": {"stdout": ""},
                 "ansible_python_interpreter": sys.executable},
        "tasks": [{"ansible.builtin.include_role": {"name": "gpu",
                                                    "tasks_from": "advertised"}}]}]))
    exe = Path(sys.executable).with_name("ansible-playbook")
    return subprocess.run([str(exe), "-i", "localhost,", str(book)], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={"ANSIBLE_ROLES_PATH": str(ROLES), "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path), "ANSIBLE_NOCOLOR": "1",
                               "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")})


def test_up_gives_a_wsl_hint_when_nvidia_gpu_never_appears(tmp_path: Path) -> None:
    wsl = _advertised(tmp_path, "wsl2")
    assert wsl.returncode != 0
    assert "never advertised nvidia.com/gpu" in wsl.stdout
    assert "wsl --update" in wsl.stdout and "libdxcore.so" in wsl.stdout
    native = _advertised(tmp_path, "pci")
    assert native.returncode != 0 and "wsl --update" not in native.stdout
