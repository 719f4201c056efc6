"""Every shell command of the user docs, run as written (issue 33): one bash session per doc, in
document order, as its reader runs them: a fresh HOME (so a fresh state folder, ~/.kflab), an
80-column terminal, nothing of this test run in the environment. tests/doc_commands.py reads
the docs; tests/unit/test_doc_marks.py fails when a command is neither run here nor marked
`<!-- needs: ... -->` in its doc.

A session says who its reader is, which exit codes a command may end with (a `kflab check`
before the step is done answers 1: that is the doc's point, not a failure), and what the
prose says the reader already has before a command (`before`: a folder of hand-ins, a class
roster, the lab server's admin kubeconfig); those snippets are the only thing the reader did
not type. A command another test runs as written is listed in ELSEWHERE with that test.

Commands that need a cluster run against the stand-in cluster (tests/standins/cluster.py: the
real v1.20 kube-apiserver and v1.36 CRD API server, the stand-in controllers)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.doc_commands import Session, failures, run_session

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Commands that a test of their own runs exactly as written: command -> that test (or CI).
ELSEWHERE = {
    "bash scripts/test.sh": ".ci/run",  # README command 2 is CI's whole run
}

SESSIONS: dict[str, Session] = {
    "README.md": Session(
        "README.md", "a newcomer in a fresh clone, python3 from PATH, nothing installed yet",
        activated=False, clone=True,
        before={
            # The pipx block above it is marked (no pipx here); its reader then has kflab on
            # PATH, as pipx puts it: here the clone's venv, which README command 1 made.
            r"^kflab completion bash": 'export PATH="$PWD/.venv/bin:$PATH"',
        },
        timeout=3600),
    "docs/cli.md": Session(
        "docs/cli.md", "a learner with kflab installed (the venv activated), in their HOME",
        may_exit={
            "kflab check": ({1}, "nothing done yet: the check says what is missing"),
            "kflab skip": ({2}, "katib-hpo's steps all run here: skip refuses"),
        }),
    "docs/grading.md": Session(
        "docs/grading.md", "a student who did pipeline-classifiers, then their instructor",
        before={
            # the student's lab, done with `kflab solve` at each step (Cy in the example)
            r"^kflab progress export": "(kflab scenario start pipeline-classifiers && cd "
                                       "pipeline-classifiers && kflab solve && kflab solve && "
                                       "kflab solve) >/dev/null",
            r"^for h in handins/\*; do": "mkdir -p handins && cp ada.tar.gz handins/",
        }),
    "docs/teaching.md": Session(
        "docs/teaching.md", "an instructor with kflab installed and the lab server's admin "
        "kubeconfig (the stand-in cluster), then a student with theirs",
        before={
            # the unpacked kubeflow/manifests release the instructor names with --upstream
            r"^kflab class plan": 'ln -s "$KFLAB_DOC_UPSTREAM/kubeflow-manifests-26.03" .',
            # the roster the doc shows, and the admin kubeconfig `kflab up` left on the server
            r"^cat roster\.csv": "printf 'student,name,email\\ns1042,Ada Lovelace,"
                                 "ada@example.org\\nJosé Núñez,,jose@example.org\\n' > "
                                 "roster.csv; mkdir -p ~/.kube && install -m 600 "
                                 '"$KFLAB_DOC_KUBECONFIG" ~/.kube/config',
            # the student's file, handed over; the server's address is the stand-in's here
            r"^export KUBECONFIG=~/ml-101-s1042": 'sed "s#https://10.0.0.5:6443#'
                                                 '$KFLAB_DOC_SERVER#" '
                                                 "~/kubeconfigs-ml-101/s1042.kubeconfig > "
                                                 "~/ml-101-s1042.kubeconfig",
            # back at the instructor's terminal
            r"^kflab class status": "unset KUBECONFIG KFLAB_BACKEND KFLAB_NAMESPACE; cd ~",
        },
        answers={"kflab class delete --class ml-101": "y"}),
    "docs/troubleshooting.md": Session(
        "docs/troubleshooting.md", "a user with kflab installed"),
}


def _check(session: Session, tmp_path: Path, extra_env: dict[str, str] | None = None) -> None:
    results = run_session(session, tmp_path, set(ELSEWHERE), extra_env)
    bad = failures(session, results)
    ran = sum(1 for r in results if r.rc is not None)
    print(f"{session.doc}: {ran}/{len(results)} command(s) ran as {session.reader}")
    for r in results:
        print(f"  {r.seconds:7.1f} s  rc={r.rc}  {r.command}")
    assert not bad, f"{len(bad)} command(s) of {session.doc} failed as written " \
                    "(fix the doc or the product, or mark the block <!-- needs: ... -->):\n\n" \
                    + "\n\n".join(bad)


@pytest.mark.parametrize("doc", ["docs/cli.md", "docs/grading.md",
                                 "docs/troubleshooting.md"])
def test_doc_commands_run_as_written(doc: str, tmp_path: Path) -> None:
    _check(SESSIONS[doc], tmp_path)


def test_readme_commands_run_as_written_in_a_fresh_clone(tmp_path: Path) -> None:
    """README command 1 installs into the clone from the package index (pip's cache is kept in
    .cache/pip between runs) and runs every lab; then the tour, as a newcomer types it."""
    import urllib.request

    if not shutil.which("python3"):
        pytest.skip("no python3 on PATH: README command 1 needs one")
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/")
    try:
        with urllib.request.urlopen(f"{index}/pip/", timeout=20):
            pass
    except OSError as exc:
        pytest.skip(f"README command 1 installs from the package index, which this machine "
                    f"cannot reach ({index}: {exc})")
    _check(SESSIONS["README.md"], tmp_path)


def test_teaching_commands_run_as_written_against_the_standin_cluster(world,
                                                                      tmp_path: Path) -> None:
    import yaml

    from tests.conftest import SHARED

    config = yaml.safe_load(world.kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    _check(SESSIONS["docs/teaching.md"], tmp_path, {
        "KFLAB_DOC_UPSTREAM": str(SHARED / "upstream"), "KFLAB_DOC_KUBECONFIG":
        str(world.kubeconfig), "KFLAB_DOC_SERVER": server})
