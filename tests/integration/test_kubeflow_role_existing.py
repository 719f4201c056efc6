"""Provider `existing` with the real kubeflow and verify roles, run on this machine as an
unprivileged user (no become) against a real API server: a v1.20 kube-apiserver + etcd from
Debian's packages (scripts/standins/41-kube-apiserver.sh), loopback only.

- defect 6: the roles call `kubectl --kubeconfig <kflab's private copy>` and write only in
  the lab's own folder (nothing in /var/lib/kflab, every file the user's);
- defect 2: the shared namespaces are applied once by their own field manager and a
  component with its own (`kflab-install-katib`); `kubeflow` keeps its labels and is not
  labelled for Katib's collector; the lab namespace is;
- the verify role's plumbing end to end: its program runs, creates the verify Experiment
  (accepted by the real Katib CRD on a real API server), verify.json lands in the lab folder
  on the controller, and the role fails naming the row that failed.

STAND-INS: the unpacked kubeflow/manifests release is ../shared/upstream (the verified download
of sources.yml needs GitHub). v1.20 refuses parts of the real Katib render (grpc probes), so
the component `katib` is Katib's upstream CRDs plus a plain `katib-controller` Deployment. No
controller-manager, Katib or kubelet runs: the test plays the Deployment controller (marks
Deployments Available) and a Ready node; the Experiment never runs, which its row must say.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lab.backends.local.procs import free_port
from lab.config import Profile
from lab.providers.existing import ExistingProvider
from lab.provision import runner
from tests.conftest import SHARED, need_upstream
from tests.integration.ansible_helpers import PLAYBOOKS, REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CACHE = Path(os.environ.get("KFLAB_STANDIN_CACHE", "/var/cache/kflab-standins"))
BIN = CACHE / "kube-apiserver" / "current" / "bin"
UPSTREAM = SHARED / "upstream" / "kubeflow-manifests-26.03"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    """A server process with its output in `log` (the child keeps its own descriptor)."""
    with open(log, "wb") as fh:
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def apiserver() -> Iterator[Path]:
    """etcd + kube-apiserver v1.20 on 127.0.0.1; yields a user's kubeconfig for it."""
    for need in (BIN / "kube-apiserver", BIN / "etcd"):
        if not need.exists():
            pytest.skip(f"{need} not built (scripts/standins/41-kube-apiserver.sh)")
    need_upstream("kubeflow-manifests-26.03")
    if os.geteuid() != 0:
        pytest.skip("needs root (runs the roles as the unprivileged user nobody)")
    root = Path(tempfile.mkdtemp(prefix="kflab-existing-api-"))
    procs: list[subprocess.Popen] = []
    try:
        client, peer, port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{client}"
        procs.append(_start(
            [str(BIN / "etcd"), "--data-dir", str(root / "etcd"), "--listen-client-urls",
             etcd_url, "--advertise-client-urls", etcd_url, "--listen-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
            root / "etcd.log"))
        subprocess.run(["openssl", "genrsa", "-out", str(root / "sa.key"), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(root / "sa.key"), "-pubout", "-out",
                        str(root / "sa.pub")], check=True, capture_output=True)
        token = secrets.token_hex(16)
        (root / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
        procs.append(_start(
            [str(BIN / "kube-apiserver"), f"--etcd-servers={etcd_url}",
             "--bind-address=127.0.0.1", f"--secure-port={port}", "--insecure-port=0",
             f"--cert-dir={root / 'certs'}", f"--token-auth-file={root / 'tokens.csv'}",
             "--authorization-mode=RBAC", f"--service-account-key-file={root / 'sa.pub'}",
             f"--service-account-signing-key-file={root / 'sa.key'}",
             "--service-account-issuer=https://kubernetes.default.svc",
             "--service-cluster-ip-range=10.96.0.0/24",
             "--disable-admission-plugins=ServiceAccount"],
            root / "apiserver.log"))
        kubeconfig = root / "user-kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "lab",
            "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                   "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "lab", "context": {"cluster": "c", "user": "u"}}]}))
        deadline = time.monotonic() + 90
        while subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw",
                              "/readyz"], capture_output=True, check=False).returncode != 0:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("kube-apiserver did not start: " +
                            (root / "apiserver.log").read_text(errors="replace")[-1500:])
            time.sleep(1)
        yield kubeconfig
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, check=True, timeout=60).stdout


def play_controllers(kubeconfig: Path, stop: threading.Event) -> None:
    """The test plays the Deployment controller: every Deployment becomes Available."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = json.dumps({"status": {"conditions": [
        {"type": "Available", "status": "True", "reason": "StandIn", "lastUpdateTime": now,
         "lastTransitionTime": now, "message": "the test plays the deployment controller"}]}})
    while not stop.is_set():
        try:
            items = json.loads(kubectl(kubeconfig, "get", "deployments", "-A", "-o",
                                       "json"))["items"]
            for dep in items:
                if not any(c["type"] == "Available" for c in
                           (dep.get("status") or {}).get("conditions") or []):
                    kubectl(kubeconfig, "patch", "deployment", dep["metadata"]["name"], "-n",
                            dep["metadata"]["namespace"], "--subresource=status",
                            "--type=merge", "-p", status)
        except subprocess.CalledProcessError:
            pass
        stop.wait(1)


def standin_katib(home: Path) -> tuple[Path, Path]:
    """The lab's overlays plus `katib-standin` (Katib's upstream CRDs and a plain Deployment),
    and a versions.yaml whose katib component uses it."""
    overlays = home / "overlays"
    shutil.copytree(REPO / "manifests" / "overlays", overlays)
    (overlays / "katib-standin").mkdir()
    (overlays / "katib-standin" / "kustomization.yaml").write_text(
        "resources:\n- ../upstream/applications/katib/upstream/components/crd\n"
        "- controller.yaml\n")
    (overlays / "katib-standin" / "controller.yaml").write_text(json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "katib-controller", "namespace": "kubeflow"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "standin"}},
                 "template": {"metadata": {"labels": {"app": "standin"}},
                              "spec": {"containers": [{"name": "c", "image": "standin:1"}]}}}}))
    doc = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    katib = next(c for c in doc["components"] if c["name"] == "katib")
    katib.update(overlay="katib-standin", ready=["kubeflow/katib-controller"])
    versions = home / "versions.yaml"
    versions.write_text(yaml.safe_dump(doc))
    return overlays, versions


PLAY = """
- name: kubeflow + verify roles for provider existing (after sources.yml)
  hosts: lab
  gather_facts: true
  vars_files: ["{group_vars}"]
  tasks:
    - name: Read the catalog, as sources.yml does
      ansible.builtin.include_vars:
        file: "{{{{ kflab_versions_file }}}}"
        name: kflab_versions
    - name: Select the components, as sources.yml does
      ansible.builtin.set_fact:
        kubeflow_selected: >-
          {{{{ kflab_versions.components | selectattr('name', 'in', kflab_components) | list }}}}
    - name: The overlays rooted at the release (STAND-IN for the verified download)
      ansible.builtin.copy:
        src: "{{{{ kflab_overlays_dir }}}}/"
        dest: "{{{{ kflab_state_dir }}}}/overlays/"
        mode: "0644"
        directory_mode: "0755"
    - name: Link the release tree
      ansible.builtin.file:
        src: "{upstream}"
        dest: "{{{{ kflab_state_dir }}}}/overlays/upstream"
        state: link
    - name: The render folder
      ansible.builtin.file:
        path: "{{{{ kflab_state_dir }}}}/render"
        state: directory
        mode: "0750"
    - name: The kubeflow role's namespaces
      ansible.builtin.include_role:
        name: kubeflow
        tasks_from: namespaces
    - name: The kubeflow role's components
      ansible.builtin.include_role:
        name: kubeflow
        tasks_from: component
      loop: "{{{{ kubeflow_selected }}}}"
      loop_control:
        loop_var: kubeflow_component
    - name: The verify role
      ansible.builtin.include_role:
        name: verify
"""


@pytest.fixture(scope="module")
def user_ansible() -> Path:
    """ansible-core (the venv's version) for Debian's /usr/bin/python3, readable by any user:
    this venv's interpreter lives under /root, which `nobody` cannot enter. Cached."""
    from importlib.metadata import version

    want = version("ansible-core")
    target = CACHE / f"ansible-core-{want}-system-python"
    if not (target / ".ok").exists():
        if not Path("/usr/bin/python3").exists():
            pytest.skip("no /usr/bin/python3 to run ansible as another user")
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                               str(target), f"ansible-core=={want}"], capture_output=True,
                              text=True, timeout=600, check=False)
        if proc.returncode != 0:
            pytest.skip(f"cannot install ansible-core for /usr/bin/python3: {proc.stderr[-300:]}")
        subprocess.run(["chmod", "-R", "a+rX", str(target)], check=True)
        (target / ".ok").write_text(want)
    return target


def run_as_nobody(ansible: Path, book: Path, inventory: Path, extra: Path,
                  home: Path) -> tuple[int, str]:
    """ansible-playbook as the unprivileged user nobody (no become anywhere)."""
    nobody = pwd.getpwnam("nobody")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(ansible),
           "ANSIBLE_ROLES_PATH": str(PLAYBOOKS / "roles"),
           "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCAL_TEMP": str(home / "ansible-local"),
           "ANSIBLE_REMOTE_TEMP": str(home / "ansible-remote")}
    proc = subprocess.run(["/usr/bin/python3", str(ansible / "bin" / "ansible-playbook"),
                           "-i", str(inventory), str(book), "-e", f"@{extra}",
                           "-e", "ansible_python_interpreter=/usr/bin/python3"],
                          env=env, user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                          capture_output=True, text=True, timeout=900, check=False, cwd=home)
    return proc.returncode, proc.stdout + proc.stderr


def test_existing_cluster_roles_as_the_user(apiserver: Path, user_ansible: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="kflab-existing-user-"))
    os.chmod(home, 0o755)
    stop = threading.Event()
    controllers = threading.Thread(target=play_controllers, args=(apiserver, stop),
                                   daemon=True)
    var_lib_before = Path("/var/lib/kflab").exists()
    try:
        kubectl(apiserver, "create", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "standin-node"}}))
        kubectl(apiserver, "patch", "node", "standin-node", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {"conditions": [
                    {"type": "Ready", "status": "True", "reason": "StandIn"}]}}))
        controllers.start()
        lab = home / "state" / "labs" / "far"
        profile = Profile(provider="existing", name="far", kubeconfig=str(apiserver),
                          components=("katib",))
        provider = ExistingProvider(profile, lab)
        provider.create(profile, lambda line: None)
        overlays, versions = standin_katib(home)
        extra = {**runner.extra_vars(profile, provider.kubeconfig(), False),
                 "kflab_overlays_dir": str(overlays), "kflab_versions_file": str(versions),
                 "verify_timeouts": {"node": 20, "controllers": 60, "katib": 20}}
        (home / "vars.json").write_text(json.dumps(extra))
        (home / "inventory.ini").write_text(provider.inventory().render("far"))
        book = home / "play.yml"
        book.write_text(PLAY.format(group_vars=PLAYBOOKS / "group_vars" / "all" / "kflab.yml",
                                    upstream=UPSTREAM))
        subprocess.run(["chown", "-R", "nobody:nogroup", str(home)], check=True)

        rc, out = run_as_nobody(user_ansible, book, home / "inventory.ini", home / "vars.json",
                                home)
        # verify fails by design (no Katib runs here) and says so
        assert rc != 0, out[-4000:]
        assert "1 verify check(s) failed: katib: not done after 20s: no trials yet" in out, \
            out[-4000:]
        results = json.loads((lab / "verify.json").read_text())
        rows = {r["name"]: r for r in results["rows"]}
        assert [r["name"] for r in results["rows"]] == ["node", "controllers", "katib"]
        assert rows["node"]["ok"] and rows["controllers"]["ok"], results
        experiment = json.loads(kubectl(apiserver, "get", "experiment", "kflab-verify-hpo",
                                        "-n", "kflab-lab", "-o", "json"))
        assert experiment["spec"]["maxTrialCount"] == 2  # kept for inspection
        assert "kubectl -n kflab-lab describe experiment kflab-verify-hpo" in \
            rows["katib"]["hint"]

        # defect 6: the user's own folder, the user's files, nothing of root's
        assert Path("/var/lib/kflab").exists() == var_lib_before
        owners = {p.lstat().st_uid for p in lab.rglob("*")}
        assert owners == {pwd.getpwnam("nobody").pw_uid}, owners
        assert (lab / "work" / "render" / "katib.yaml").exists()
        assert {m["manager"] for m in json.loads(kubectl(
            apiserver, "get", "crd", "experiments.kubeflow.org", "-o", "json",
            "--show-managed-fields"))["metadata"]["managedFields"]
            if m["operation"] == "Apply"} == {"kflab-install-katib"}

        # defect 2: one manager per purpose; kubeflow unlabelled for Katib, the lab labelled
        ns = {n: json.loads(kubectl(apiserver, "get", "namespace", n, "-o", "json",
                                    "--show-managed-fields"))
              for n in ("kubeflow", "kflab-lab")}
        labels = ns["kubeflow"]["metadata"]["labels"]
        assert "katib.kubeflow.org/metrics-collector-injection" not in labels
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
        assert ns["kflab-lab"]["metadata"]["labels"][
            "katib.kubeflow.org/metrics-collector-injection"] == "enabled"
        for n in ns.values():
            appliers = {m["manager"] for m in n["metadata"]["managedFields"]
                        if m["operation"] == "Apply"}
            assert appliers == {"kflab-install-namespaces"}, appliers
        dep = json.loads(kubectl(apiserver, "get", "deployment", "katib-controller", "-n",
                                 "kubeflow", "-o", "json", "--show-managed-fields"))
        assert {m["manager"] for m in dep["metadata"]["managedFields"]
                if m["operation"] == "Apply"} == {"kflab-install-katib"}

        # converged: a second run changes nothing on the cluster or on disk
        rc2, out2 = run_as_nobody(user_ansible, book, home / "inventory.ini",
                                  home / "vars.json", home)
        assert rc2 != 0 and "changed=0" in out2, out2[-3000:]
    finally:
        stop.set()
        controllers.join(10) if controllers.is_alive() else None
        shutil.rmtree(home, ignore_errors=True)
