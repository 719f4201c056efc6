"""kflab installed like any Python CLI: build the sdist and the wheel, install the wheel
(non-editable, `[local]`) into a fresh venv, and use it from an unrelated folder with a fresh
HOME, so nothing can come from the clone or the current directory.

The source tree is copied first (git's tracked and not-ignored files), so a stale build/ in
the clone cannot leak into the wheels. The install uses pip's local cache and the lock (locks/,
with --no-deps as setup.sh does); --no-compile saves a minute of byte-compiling torch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO, need_upstream


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


install_locked = _script("install_locked")
lock = _script("lock")


def locked_pins(group: str) -> dict[str, str]:
    """name -> version of the lock's entries for this platform and Python."""
    path = REPO / "locks" / install_locked.platform_set() / f"{group}.txt"
    pins = {}
    for _, lines in lock.blocks(path.read_text()):
        req = Requirement(lines[0].rstrip(" \\"))
        if req.marker is None or req.marker.evaluate():
            pins[req.name] = next(iter(req.specifier)).version
    return pins

pytestmark = [pytest.mark.slow, pytest.mark.integration]
CONTENT = ("manifests", "playbooks", "scenarios", "vagrant")
FASTEST = "kserve-serving"  # the quickest scenario end to end (about a minute here)


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 900, rc: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == rc, f"{argv} -> {proc.returncode}\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc


def source_files() -> list[str]:
    """What a commit of this clone would hold: tracked plus untracked, not ignored."""
    if not (REPO / ".git").exists() or not shutil.which("git"):
        pytest.skip("needs a git checkout to know the source files")
    out = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
              cwd=REPO).stdout
    return sorted(f for f in out.split("\0") if f and (REPO / f).is_file())


def members(wheel: Path) -> dict[str, str]:
    """Every file in a wheel and the sha256 of its bytes."""
    with zipfile.ZipFile(wheel) as zf:
        return {n: hashlib.sha256(zf.read(n)).hexdigest() for n in zf.namelist()
                if not n.endswith("/")}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    for rel in source_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    # `python -m build`: the sdist, then the wheel built FROM the sdist; --wheel: from the tree.
    run([sys.executable, "-m", "build", "--outdir", str(tmp / "via-sdist"), str(src)], cwd=tmp)
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp / "direct"), str(src)],
        cwd=tmp)
    (sdist,) = (tmp / "via-sdist").glob("kflab-*.tar.gz")
    (from_sdist,) = (tmp / "via-sdist").glob("kflab-*.whl")
    (direct,) = (tmp / "direct").glob("kflab-*.whl")
    return {"sdist": sdist, "from_sdist": from_sdist, "wheel": direct, "src": src}


def test_sdist_rebuilds_the_same_wheel(built: dict[str, Path]) -> None:
    direct, again = members(built["wheel"]), members(built["from_sdist"])
    assert sorted(direct) == sorted(again)
    assert direct == again, [n for n in direct if direct[n] != again.get(n)]


def test_wheel_carries_the_content_and_nothing_else(built: dict[str, Path]) -> None:
    files = members(built["wheel"])
    src = built["src"]
    expected = [rel for rel in source_files() if rel.split("/")[0] in CONTENT]
    assert expected, "no content folders found in the clone"
    for rel in expected:  # same bytes, same layout, under lab/_content/
        assert files.get(f"lab/_content/{rel}") == \
            hashlib.sha256((src / rel).read_bytes()).hexdigest(), rel
    for rel in source_files():  # package data: every file of lab/ (py.typed, JSON...)
        if rel.startswith("lab/"):
            assert rel in files, rel
    strays = [n for n in files if n.startswith(("tests/", "bench/", "docs/"))
              or "__pycache__" in n or n.endswith(".pyc")]
    assert not strays


@pytest.fixture(scope="module")
def installed(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("inst")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
           "--disable-pip-version-check"]
    locked = REPO / "locks" / install_locked.platform_set()
    run([*pip, "--no-deps", "--require-hashes", "-r", str(locked / "base.txt"),
         "-r", str(locked / "local.txt")], cwd=tmp, timeout=1200)
    run([*pip, "--no-deps", str(built["wheel"])], cwd=tmp)
    torch = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["kflab"]["torch"]
    # As scripts/setup.sh installs it: a wheelhouse with the CPU build for torch alone
    # (KFLAB_TORCH_FIND_LINKS, set by scripts/test.sh), never a machine-wide PIP_FIND_LINKS.
    links = os.environ.get("KFLAB_TORCH_FIND_LINKS")
    run([*pip, *(["--find-links", links] if links else []), f"torch=={torch}"], cwd=tmp,
        timeout=1200)
    run([str(venv / "bin" / "python"), "-m", "pip", "check"], cwd=tmp)
    home, elsewhere = tmp / "home", tmp / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    # Nothing of the clone or of this test run: no PYTHONPATH, no KFLAB_* (state in ~/.kflab).
    keep = {k: v for k, v in os.environ.items()
            if k in ("LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE")}
    kubectl = shutil.which("kubectl", path=f"{REPO / '.venv' / 'bin'}{os.pathsep}"
                                           f"{os.environ.get('PATH', '')}")
    path = [str(venv / "bin"), *([str(Path(kubectl).parent)] if kubectl else []),
            "/usr/bin", "/bin"]
    env = {**keep, "HOME": str(home), "PATH": os.pathsep.join(dict.fromkeys(path)),
           "COLUMNS": "200"}
    return {"venv": venv, "kflab": str(venv / "bin" / "kflab"), "env": env, "cwd": elsewhere,
            "home": home, "kubectl": kubectl}


def kflab(inst: dict, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run([inst["kflab"], *args], cwd=inst["cwd"], env=inst["env"], timeout=timeout)


def test_installed_kflab_imports_itself_from_the_venv(installed: dict) -> None:
    out = run([str(installed["venv"] / "bin" / "python"), "-c",
               "import lab, lab.content as c; print(lab.__file__); print(c.root())"],
              cwd=installed["cwd"], env=installed["env"]).stdout.split()
    site = str(installed["venv"])
    assert out[0].startswith(site) and out[1].startswith(site), out
    assert out[1].endswith("lab/_content")


def test_installed_version_names_kflab_engines_and_pins(installed: dict) -> None:
    info = json.loads(kflab(installed, "version", "--json").stdout)
    from lab import __version__

    assert info["kflab"] == __version__
    pins = locked_pins("local")
    for engine in ("kfp", "optuna", "kserve"):
        assert info["engines"][engine] == pins[engine]
    assert info["engines"]["torch"].startswith("2.13.0")
    assert info["components"]["k3s"].startswith("v1.")
    assert kflab(installed, "--version").stdout.startswith(f"kflab {__version__}")


def test_installed_scenarios_list_and_test_from_anywhere(installed: dict) -> None:
    listed = json.loads(kflab(installed, "scenario", "list", "--json").stdout)
    bundled = sorted(p.parent.name for p in (REPO / "scenarios").glob("*/scenario.yaml"))
    assert sorted(s["id"] for s in listed) == bundled
    res = kflab(installed, "scenario", "test", FASTEST, timeout=900)
    assert "passed" in res.stdout, res.stdout[-2000:]
    # The state went to the fresh HOME, not the current folder or the clone.
    assert (installed["home"] / ".kflab").is_dir()
    assert not list(installed["cwd"].iterdir())


def test_installed_wheel_finds_the_installer_content(installed: dict, tmp_path: Path) -> None:
    """What `kflab up` reads before it touches a machine: the playbook (roles, group_vars,
    ansible.cfg, versions.yaml through ../manifests) and the Vagrantfile template."""
    code = f"""
from pathlib import Path
from lab.config import Profile
from lab.providers.base import Inventory
from lab.providers import vagrant
from lab.provision import runner
profile = Profile(provider="vagrant-virtualbox")
plan = runner.Plan(inventory=Inventory(connection="local"),
                   extra_vars=runner.extra_vars(profile, Path({str(tmp_path)!r}) / "kc", False),
                   tags=list(runner.ROLES), workdir=Path({str(tmp_path)!r}) / "work")
print(plan.playbook)
print(len(runner.list_tasks(plan)))
print("Vagrant.configure" in vagrant.render(profile))
"""
    out = run([str(installed["venv"] / "bin" / "python"), "-c", code], cwd=installed["cwd"],
              env=installed["env"], timeout=300).stdout.split()
    assert out[0].startswith(str(installed["venv"])) and out[0].endswith("playbooks/site.yml")
    assert int(out[1]) > 20
    assert out[2] == "True"


def test_installed_up_dry_run_reads_its_roles(installed: dict) -> None:
    """`kflab up --dry-run` from elsewhere: the profile validated, the roles' tasks and
    defaults read from the packaged playbooks; no vagrant on PATH, so it stops there, and
    says so with exit code 2."""
    (installed["cwd"] / "lab.yaml").write_text("provider: vagrant-virtualbox\nname: wheel\n"
                                               "gpu: off\n")
    env = {**installed["env"], "PATH": str(installed["venv"] / "bin")}
    try:
        res = run([installed["kflab"], "up", "--dry-run"], cwd=installed["cwd"], env=env,
                  timeout=300, rc=2)  # a plan that would stop exits 2
    finally:
        (installed["cwd"] / "lab.yaml").unlink()
    assert "kflab up would stop here: vagrant is not installed" in res.stdout
    assert "/etc/sysctl.d/" in res.stdout  # from the node role's own task files
    assert "nothing was changed (dry run)" in res.stdout


def test_installed_components_images(installed: dict) -> None:
    upstream = need_upstream("kubeflow-manifests-26.03")
    assert installed["kubectl"], "kubectl not found (scripts/standins/21-kubectl.sh installs it)"
    images = kflab(installed, "components", "images", "--upstream", str(upstream),
                   timeout=600).stdout.split()
    assert any("katib-controller" in i for i in images)
    assert any("kserve-controller" in i for i in images)
