"""Image references normalised as containerd's CRI plugin looks them up.

Expected values: distribution/reference v0.6.0 normalize_test.go `TestParseDockerRef` (the
cases carried over as data) and the references of the lab's own manifests."""

from __future__ import annotations

import pytest

from lab.components.reference import normalize, repository
from lab.errors import LabError

DIGEST = "sha256:e6693c20186f837fc393390135d8a598a96a833917917789d63766cab6c59582"

# normalize_test.go TestParseDockerRef: input -> expected
UPSTREAM = [
    ("busybox", "docker.io/library/busybox:latest"),
    ("busybox:latest", "docker.io/library/busybox:latest"),
    (f"busybox@{DIGEST}", f"docker.io/library/busybox@{DIGEST}"),
    ("library/busybox", "docker.io/library/busybox:latest"),
    ("docker.io/busybox", "docker.io/library/busybox:latest"),
    ("docker.io/library/busybox", "docker.io/library/busybox:latest"),
    ("docker.io/busybox:latest", "docker.io/library/busybox:latest"),
    ("library/busybox:latest", "docker.io/library/busybox:latest"),
    ("docker.io/library/busybox:latest", "docker.io/library/busybox:latest"),
    ("gcr.io/library/busybox", "gcr.io/library/busybox:latest"),
    (f"gcr.io/library/busybox:latest@{DIGEST}", f"gcr.io/library/busybox@{DIGEST}"),
]


@pytest.mark.parametrize("given,want", UPSTREAM)
def test_parse_docker_ref_cases(given: str, want: str) -> None:
    assert normalize(given) == want


@pytest.mark.parametrize("given,want", [
    ("alpine:3.10", "docker.io/library/alpine:3.10"),  # the training operator's init image
    ("kserve/sklearnserver:v0.16.0", "docker.io/kserve/sklearnserver:v0.16.0"),
    ("mysql:8.0", "docker.io/library/mysql:8.0"),
    ("ghcr.io/containerd/busybox", "ghcr.io/containerd/busybox:latest"),
    ("index.docker.io/library/python:3.11-slim", "docker.io/library/python:3.11-slim"),
    ("localhost/kflab/pip-index:1", "localhost/kflab/pip-index:1"),
    ("localhost:5000/a/b:1", "localhost:5000/a/b:1"),
    ("127.0.0.1:5000/kflab-test/hello:1", "127.0.0.1:5000/kflab-test/hello:1"),
    ("Registry/x:1", "Registry/x:1"),  # an upper-case first element is a host
])
def test_the_labs_references(given: str, want: str) -> None:
    assert normalize(given) == want


@pytest.mark.parametrize("bad", ["docker.io/Upper/x:1", "a" * 64, "x@sha256:12", "x:-bad",
                                 "x//y", ""])
def test_bad_references_are_one_line_errors(bad: str) -> None:
    with pytest.raises(LabError) as err:
        normalize(bad)
    assert "\n" not in str(err.value).split("\n  fix:")[0]


def test_repository_drops_tag_and_digest() -> None:
    assert repository("alpine:3.10") == "docker.io/library/alpine"
    assert repository(f"busybox@{DIGEST}") == "docker.io/library/busybox"
