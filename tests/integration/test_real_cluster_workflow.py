"""The real-cluster workflow (.github/workflows/real-cluster.yml), its steps run here in order
as GitHub's runner runs them, so a broken step is seen before GitHub sees it.

Each `run:` step is executed with GitHub's shell (`bash --noprofile --norc -eo pipefail`),
the job's environment and $GITHUB_PATH, in a fresh Debian 12 machine (the systemd
container, root, host network: PyPI and Debian are reachable as from a runner); `if:`
conditions (success, failure(), always()) decide which steps run, as on GitHub. The `uses:`
steps are played: checkout copies this checkout's files, setup-python is Debian's python3
(3.11) with venv, a cache restores nothing (a first run), upload-artifact collects the
artifacts folder.

STAND-INS, and only these: the k3s release (GitHub is out of reach here): a loopback server
serves the k3s stand-in (tests/fixtures/standin-k3s: answers like k3s, runs no cluster) with
a versions.yaml pinning it (KFLAB_VERSIONS_FILE, KFLAB_GITHUB_URL added to the job's env);
and, with it, every image pull (the stand-in pulls nothing). Two of the job's settings are
this machine's: DISK is 20 (GiB for doctor's free-disk check: this machine has less free
than a runner after the freeing step, and the stand-in pulls no image), EXTRAS is `sdk` (the
workflow installs `local,notebooks,sdk`: torch and the model servers, gigabytes this test
would download for steps that cannot run here; with no torch, PyTorch's CPU wheel index, out
of reach here, is not named). So the run goes as far as a machine without a cluster allows:
the install, the disk step, the bundle, the profile, doctor, and `kflab up` through the node
and k3s roles and the kubeflow role's sources; the first task that needs the real release
tree or an API server fails, and the failure path (the verify table, the debug bundle and the
upload) is what the test then checks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.artifact_server import K3S_RELEASE, serve, sha256, sums
from tests.gitrepo import archive, commit_all
from tests.integration.conftest import IMAGE, podman
from tests.integration.test_k3s_download import ARCH

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "real-cluster.yml"
STANDIN_K3S = REPO / "tests" / "fixtures" / "standin-k3s" / "k3s"
WORKSPACE = "/home/runner/work/kflab/kflab"
SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
STEP_TIMEOUT = 1500


def _expand(value: str, env: dict[str, str]) -> str:
    """The few ${{ }} expressions the job's env and paths use."""
    subs = {"github.workspace": WORKSPACE, "github.event.inputs.components": "",
            "github.run_id": "4242", "runner.os": "Linux"}
    subs |= {f"env.{k}": v for k, v in env.items()}
    for key, val in subs.items():
        value = value.replace("${{ " + key + " }}", val)
    return value


def _passes(cond: str | None, failed: bool) -> bool:
    """GitHub's step conditions: success() by default, failure(), always()."""
    cond = (cond or "success()").strip()
    return {"success()": not failed, "failure()": failed, "always()": True}[cond]


def _files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.split("\0") if f and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def github(tmp_path_factory) -> Iterator[dict]:
    """The k3s release as GitHub serves it, with the k3s stand-in, and pins for it."""
    root = tmp_path_factory.mktemp("github")
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    arts = versions["artifacts"]
    standin = STANDIN_K3S.read_bytes()  # starts under systemd as k3s does, serves nothing
    airgap = b"kflab test STAND-IN for the k3s airgap images\n"
    with serve(root / "www") as srv:
        k3s, air = arts["k3s"]["arch"][ARCH], arts["k3s-airgap-images"]["arch"][ARCH]
        srv.put(f"{K3S_RELEASE}/{k3s['file']}", standin)
        srv.put(f"{K3S_RELEASE}/{air['file']}", airgap)
        srv.put(f"{K3S_RELEASE}/sha256sum-{ARCH}.txt",
                sums({k3s["file"]: sha256(standin), air["file"]: sha256(airgap)}))
        k3s["sha256"], air["sha256"] = sha256(standin), sha256(airgap)
        for name in [n for n, a in arts.items() if "tree" in a]:
            repo = root / name
            repo.mkdir()
            (repo / "README.md").write_text(f"kflab test STAND-IN for {name}\n")
            commit, tree = commit_all(repo)
            owner = arts[name]["url"].split("github.com/")[1].split("/archive/")[0]
            archive(repo, f"{name}-{commit}", root / "a.tar.gz")
            srv.put(f"{owner}/archive/{commit}.tar.gz", (root / "a.tar.gz").read_bytes())
            arts[name].update(url=f"https://github.com/{owner}/archive/{commit}.tar.gz",
                              commit=commit, tree=tree)
        key = arts["nvidia-container-toolkit-key"]
        key["url"] = "https://github.com/kflab-test/keys/raw/main/gpgkey"
        srv.put("kflab-test/keys/raw/main/gpgkey", b"kflab test STAND-IN for an apt key\n")
        (root / "versions.yaml").write_text(yaml.safe_dump(versions))
        yield {"server": srv, "versions": root / "versions.yaml"}


@pytest.fixture(scope="module")
def runner(github, tmp_path_factory) -> Iterator[dict]:
    """A fresh Debian 12 machine for the job (the systemd container, host network)."""
    if not shutil.which("podman") or os.geteuid() != 0:
        pytest.skip("needs root and podman (scripts/standins/20-systemd-target.sh)")
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        pytest.skip(f"{IMAGE} not built: run scripts/standins/20-systemd-target.sh")
    tmp = tmp_path_factory.mktemp("runner")
    free = shutil.disk_usage(tmp).free / 2**30
    if free < 21:  # lab.yaml's disk is at least 20: doctor would refuse, rightly
        pytest.skip(f"{free:.0f} GiB free here: doctor refuses a lab below the 20 GiB "
                    "the job's DISK asks for")
    name = f"kflab-runner-{uuid.uuid4().hex[:8]}"
    podman("run", "-d", "--name", name, "--hostname", "kflab-runner", "--network", "host",
           IMAGE)
    try:
        # a booted machine, as a runner is: systemd has mounted /tmp and started its units
        podman("exec", name, "systemctl", "is-system-running", "--wait", check=False,
               timeout=180)
        yield {"name": name, "tmp": tmp, "github": github}
    finally:
        podman("rm", "-f", name, check=False, timeout=120)


def _exec(runner: dict, script: str, env: dict[str, str], timeout: float = STEP_TIMEOUT
          ) -> subprocess.CompletedProcess:
    args = ["exec", "-w", WORKSPACE]
    for k, v in env.items():
        args += ["-e", f"{k}={v}"]
    return podman(*args, runner["name"], *SHELL, "-c", script, check=False, timeout=timeout)


def _play(runner: dict, step: dict, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The `uses:` steps, as the actions do them (see the module docstring)."""
    uses, name = step["uses"].split("@")[0], runner["name"]
    if uses == "actions/checkout":
        tar = runner["tmp"] / "checkout.tar"
        with tarfile.open(tar, "w") as out:
            for f in _files():
                out.add(REPO / f, arcname=f)
        podman("exec", name, "mkdir", "-p", WORKSPACE)
        podman("cp", str(tar), f"{name}:/root/checkout.tar")
        return _exec(runner, f"tar -xf /root/checkout.tar -C {WORKSPACE} && "
                             "rm /root/checkout.tar", {})
    if uses == "actions/setup-python":  # the image's python3 is 3.11: add what a runner has
        proc = _exec(runner, "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive "
                     "apt-get install -y -q --no-install-recommends python3-venv git "
                     "ca-certificates >/dev/null && python3 --version", {}, timeout=900)
        # this machine reaches PyPI through a TLS proxy whose CA only its own bundle holds:
        # the runner-to-be trusts the same CAs (a GitHub runner needs none of this)
        bundle = os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
        podman("cp", bundle, f"{name}:/etc/ssl/certs/ca-certificates.crt")
        return proc
    if uses == "actions/cache":  # a first run: nothing to restore
        return subprocess.CompletedProcess([], 0, "cache miss", "")
    if uses == "actions/upload-artifact":
        out = runner["tmp"] / "artifact"
        podman("cp", f"{name}:{_expand(step['with']['path'], env)}", str(out))
        return subprocess.CompletedProcess([], 0, f"uploaded {out}", "")
    raise AssertionError(f"a step uses {uses}, which this test does not play: add it here")


@pytest.fixture(scope="module")
def job(runner) -> dict:
    """Every step of the job, in order; per step: ran or skipped, exit code, output."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    lab = doc["jobs"]["lab"]
    env: dict[str, str] = {}
    for k, v in lab["env"].items():
        env[k] = _expand(str(v), env)
    env |= {"EXTRAS": "sdk",  # see the module docstring
            # no torch with these extras, and PyTorch's index is out of reach here
            "PIP_EXTRA_INDEX_URL": "",
            # this machine has less free disk than a runner after its freeing step (the
            # stand-in k3s pulls no image): doctor's check asks for what this run needs
            "DISK": "20",
            "KFLAB_VERSIONS_FILE": f"{WORKSPACE}/.standin-versions.yaml",
            "KFLAB_GITHUB_URL": runner["github"]["server"].url,
            "GITHUB_PATH": "/tmp/github_path", "GITHUB_ENV": "/tmp/github_env",
            "GITHUB_ACTIONS": "true", "CI": "true", "HOME": "/root",
            # Python's and pip's CA bundle: Debian's (with this machine's CAs, above)
            "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
            "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt"}
    failed = False
    results = []
    for step in lab["steps"]:
        label = step.get("name") or step["uses"].split("@")[0]
        if not _passes(step.get("if"), failed):
            results.append({"name": label, "ran": False})
            continue
        if "uses" in step:
            proc = _play(runner, step, env)
            if step["uses"].startswith("actions/checkout"):
                podman("cp", str(runner["github"]["versions"]),
                       f"{runner['name']}:{env['KFLAB_VERSIONS_FILE']}")
        else:
            path = _exec(runner, "cat $GITHUB_PATH 2>/dev/null || true", env).stdout.split()
            step_env = {**env, "PATH": ":".join([*reversed(path), "/usr/local/sbin",
                                                 "/usr/local/bin", "/usr/sbin", "/usr/bin",
                                                 "/sbin", "/bin"])}
            proc = _exec(runner, step["run"], step_env)
        results.append({"name": label, "ran": True, "rc": proc.returncode,
                        "out": proc.stdout + proc.stderr})
        failed = failed or proc.returncode != 0
        print(f"--- {label}: exit {proc.returncode}\n{(proc.stdout + proc.stderr)[-4000:]}")
    return {"steps": results, "env": env, "runner": runner}


def _step(job: dict, name: str) -> dict:
    return next(s for s in job["steps"] if s["name"] == name)


def test_the_steps_before_the_cluster_pass(job):
    for name in ("actions/checkout", "actions/setup-python",
                 "Free the runner's disk for the images", "Cache pip downloads (keyed by the lock)",
                 "Install kflab (scripts/setup.sh, the lock)",
                 "Cache the pinned k3s files (keyed by versions.yaml)",
                 "Offline bundle of k3s and its airgap images", "Lab profile", "Doctor"):
        step = _step(job, name)
        assert step["ran"] and step["rc"] == 0, (name, step.get("out", "")[-3000:])
    assert "installed: kflab" in _step(job, "Install kflab (scripts/setup.sh, the lock)")["out"]
    bundle = _step(job, "Offline bundle of k3s and its airgap images")["out"]
    assert "bundle.json sha256:" in bundle and "parts: artifacts" in bundle


def test_kflab_up_converges_the_node_and_k3s_from_the_bundle(job):
    """`kflab up` installs from the bundle: the node and k3s roles converge (k3s is the
    stand-in, active under systemd), the kubeflow role takes its three source archives from
    the bundle (verified by commit and tree); the first task that needs the real
    kubeflow/manifests tree or a cluster fails here (the stand-in archives hold a README)."""
    up = _step(job, "kflab up")
    assert up["ran"], job["steps"]
    status = _exec(job["runner"], "systemctl is-active k3s; /usr/local/bin/k3s --version", {})
    assert status.stdout.split()[0] == "active" and "v1.34.2+k3s1" in status.stdout
    assert "role k3s" in up["out"] and "Start k3s" in up["out"]
    if up["rc"] != 0:  # only a role that needs the cluster may fail here
        failed = re.search(r"error: task '(\w+) : .*' failed on ", up["out"])
        assert failed and failed.group(1) in ("kubeflow", "verify"), up["out"][-4000:]


def test_the_failure_path_keeps_the_reports_and_a_debug_bundle(job):
    up = _step(job, "kflab up")
    if up["rc"] == 0:
        pytest.skip("kflab up succeeded: there was no failure path to run")
    assert not _step(job, "Every scenario on the cluster backend")["ran"]
    assert _step(job, "Verify table")["ran"]
    debug = _step(job, "Debug bundle")
    assert debug["ran"] and debug["rc"] == 0, debug["out"][-3000:]
    upload = _step(job, "Upload the verify table, the reports and the debug bundle")
    assert upload["ran"]
    got = job["runner"]["tmp"] / "artifact"
    names = {p.name for p in got.iterdir()}
    assert {"disk.txt", "doctor.txt", "up.log", "kflab-debug.tar.gz"} <= names, names
    with tarfile.open(got / "kflab-debug.tar.gz") as tar:
        assert tar.getnames()
