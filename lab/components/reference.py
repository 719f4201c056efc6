"""Container image references, normalised as the kubelet's runtime will look them up.

A manifest says `alpine:3.10` or `kserve/sklearnserver:v0.16.0`; containerd's CRI plugin (the
runtime k3s runs) turns that into `docker.io/library/alpine:3.10` before it looks for the
image in its store (containerd `reference/docker` ParseDockerRef, the same code as
distribution/reference v0.6.0 normalize.go `ParseDockerRef`, which `ParseNormalizedNamed` and
`splitDockerDomain` implement, plus helpers.go `TagNameOnly`). An image imported from an
offline bundle under the short name would not be found and the kubelet would try to pull
it, with no network. So the bundle names every archive by this normalised form.

The rules (normalize.go at v0.6.0):
- one path element ("alpine") is `docker.io/library/<name>`;
- the first element is a registry when it is `localhost`, contains `.` or `:`, or has an
  upper-case letter; `index.docker.io` is `docker.io`; otherwise the registry is docker.io;
- on docker.io a path with no `/` gets `library/`;
- the repository must be lower case;
- no tag and no digest: `:latest`; both a tag and a digest: the digest only (the runtime
  resolves by digest and drops the tag).
"""

from __future__ import annotations

import re

from lab.errors import LabError

DEFAULT_DOMAIN = "docker.io"
LEGACY_DOMAIN = "index.docker.io"
OFFICIAL_PREFIX = "library/"
DEFAULT_TAG = "latest"
_HEX64 = re.compile(r"^[a-f0-9]{64}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_DOMAIN = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                     r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                     r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?$")


def split_domain(name: str) -> tuple[str, str]:
    """splitDockerDomain: (registry, repository path) of a name without tag or digest."""
    first, sep, rest = name.partition("/")
    if not sep:
        return DEFAULT_DOMAIN, OFFICIAL_PREFIX + name
    if first == "localhost":
        domain, remote = first, rest
    elif first == LEGACY_DOMAIN:
        domain, remote = DEFAULT_DOMAIN, rest
    elif "." in first or ":" in first or first.lower() != first:
        domain, remote = first, rest
    else:
        domain, remote = DEFAULT_DOMAIN, name
    if domain == DEFAULT_DOMAIN and "/" not in remote:
        remote = OFFICIAL_PREFIX + remote
    return domain, remote


def normalize(ref: str) -> str:
    """The fully qualified reference the runtime looks up (ParseDockerRef); raises LabError
    naming the reference when it is not one."""
    text = ref.strip()
    if _HEX64.match(text):
        raise LabError(f"{ref!r}: a 64-hex identifier, not an image name",
                       hint="write [registry/]name:tag or name@sha256:<digest>")
    name, at, digest = text.partition("@")
    if at and not _DIGEST.match(digest):
        raise LabError(f"{ref!r}: {digest!r} is not a sha256 digest",
                       hint="write name@sha256:<64 hex>")
    tag = ""
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > last_slash:  # a colon in the last element is the tag (not host:port)
        name, tag = name[:colon], name[colon + 1:]
        if not _TAG.match(tag):
            raise LabError(f"{ref!r}: {tag!r} is not a valid tag",
                           hint="a tag is up to 128 letters, digits, '_', '.' and '-'")
    domain, remote = split_domain(name)
    if remote.lower() != remote:
        raise LabError(f"{ref!r}: repository name ({remote}) must be lowercase",
                       hint="registries accept lower-case repository names only")
    if not _DOMAIN.match(domain) or not remote or \
            not all(_COMPONENT.match(part) for part in remote.split("/")):
        raise LabError(f"not an image reference: {ref!r}",
                       hint="write [registry/]name:tag or name@sha256:<digest>")
    out = f"{domain}/{remote}"
    if digest:
        return f"{out}@{digest}"  # tag and digest: the digest only (ParseDockerRef)
    return f"{out}:{tag or DEFAULT_TAG}"


def repository(ref: str) -> str:
    """The normalised reference without its tag or digest (registry/path)."""
    norm = normalize(ref)
    if "@" in norm:
        return norm.split("@", 1)[0]
    return norm.rsplit(":", 1)[0]
