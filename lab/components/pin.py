"""`kflab components pin NAME=VERSION...`: move a pinned version in manifests/versions.yaml.

A maintainer's tool, for a machine with network. Every value it writes is computed from the
real downloads AND cross-checked with a second source, before anything is written:
- release files (k3s, its airgap images): the sha256 of each downloaded file must be the one
  the release's own checksum file lists for it (every architecture);
- git sources (kubeflow/manifests, argo-workflows): the commit the tag archive names (pax
  header) must be the commit the tag points at (GitHub API), the by-commit archive the roles
  fetch must carry the same commit, and the tree id computed from its content must be the
  commit's tree (GitHub API). That last check also catches a repository whose archives do not
  reproduce its tree (export-ignore, export-subst), which the roles could never verify.
Any disagreement refuses and writes nothing. The file is rewritten in place, value by value,
so comments and layout stay as they are.

Sources default to https://github.com and https://api.github.com; both can be pointed at a
mirror or a loopback test server (KFLAB_GITHUB_URL, KFLAB_GITHUB_API_URL).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab.components import catalog, gittree
from lab.errors import InputError, LabError

API = "https://api.github.com"
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
RELEASE_URL = re.compile(r"^https://github\.com/([\w.-]+)/([\w.-]+)/releases/download/([^/]+)/"
                         r"([^/]+)$")
ARCHIVE_URL = re.compile(r"^https://github\.com/([\w.-]+)/([\w.-]+)/archive/")
MAX_BYTES = 4 << 30  # the largest download accepted (airgap image archives are ~0.2 GiB)
Say = Callable[[str], None]


class PinMismatch(LabError):
    """Two sources disagree about a value: nothing is written."""


@dataclass(frozen=True)
class Sources:
    github: str = catalog.GITHUB
    api: str = API

    @classmethod
    def from_env(cls) -> Sources:
        return cls(catalog.github_url(), _checked_base(
            os.environ.get("KFLAB_GITHUB_API_URL", API), "KFLAB_GITHUB_API_URL"))

    def mirror(self, url: str) -> str:
        """Where to download URL from (the pins always name github.com)."""
        if url.startswith(catalog.GITHUB + "/"):
            return self.github + url[len(catalog.GITHUB):]
        return url


@dataclass
class Change:
    artifact: str
    path: tuple[str, ...]  # key path below artifacts.<name>
    old: Any
    new: Any


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)

    def set(self, name: str, path: tuple[str, ...], old: Any, new: Any) -> None:
        self.changes.append(Change(name, path, old, new))

    @property
    def changed(self) -> list[Change]:
        return [c for c in self.changes if c.old != c.new]


def _checked_base(url: str, where: str) -> str:
    url = url.rstrip("/")
    if not url.startswith(catalog.URL_OK) or any(c.isspace() for c in url):
        raise InputError(where, None, f"refusing {url!r}",
                         hint="an https:// URL, or http://127.0.0.1:PORT for a loopback server")
    return url


# --- downloads ------------------------------------------------------------------------------

class _SafeRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects (GitHub sends release assets elsewhere) but never to plain http."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[override]
        if not newurl.startswith(catalog.URL_OK):
            raise LabError(f"{req.full_url} redirects to {newurl}: refusing a non-TLS download")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _open(url: str):
    if not url.startswith(catalog.URL_OK):
        raise LabError(f"refusing to download {url}: not https:// or loopback http")
    handlers: list[Any] = [_SafeRedirect()]
    if url.startswith("http://127.0.0.1"):
        handlers.append(urllib.request.ProxyHandler({}))  # loopback never goes via a proxy
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(  # noqa: S310 - scheme checked above: https or loopback http
        url, headers={"User-Agent": "kflab-components-pin"})
    try:
        return opener.open(req, timeout=60)
    except urllib.error.HTTPError as exc:
        raise LabError(f"download failed: {url}: HTTP {exc.code} {exc.reason}",
                       hint="check the version exists upstream (tags and release assets)") \
            from exc
    except (urllib.error.URLError, OSError) as exc:
        raise LabError(f"download failed: {url}: {exc}",
                       hint="this command needs a network that reaches GitHub") from exc


def _chunks(url: str) -> Iterator[bytes]:
    total = 0
    with _open(url) as resp:
        while chunk := resp.read(1 << 20):
            total += len(chunk)
            if total > MAX_BYTES:
                raise LabError(f"{url}: larger than {MAX_BYTES >> 30} GiB, refusing")
            yield chunk


def fetch_text(url: str) -> str:
    return b"".join(_chunks(url)).decode("utf-8", "replace")


def fetch_sha256(url: str) -> str:
    h = hashlib.sha256()
    for chunk in _chunks(url):
        h.update(chunk)
    return h.hexdigest()


def fetch_archive_ids(url: str) -> tuple[str | None, str]:
    with tempfile.TemporaryFile() as tmp:
        for chunk in _chunks(url):
            tmp.write(chunk)
        tmp.seek(0)
        try:
            return gittree.stream_ids(tmp, url)
        except gittree.TreeError as exc:
            raise LabError(f"{exc}") from exc


def parse_sums(text: str) -> dict[str, str]:
    """`SHA256  NAME` lines (sha256sum's format, `*NAME` for binary mode) -> {name: sha}."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]{64}) [ *](\S+)\s*$", line)
        if m:
            out[m.group(2)] = m.group(1)
    return out


# --- computing the pins ---------------------------------------------------------------------

def _quote_tag(version: str) -> str:
    return urllib.parse.quote(version, safe="")


def pin_release(name: str, entry: dict, version: str, src: Sources, plan: Plan, say: Say,
                sums_cache: dict[str, dict[str, str]]) -> None:
    plan.set(name, ("version",), entry.get("version"), version)
    for arch, f in entry["arch"].items():
        m = RELEASE_URL.match(f["url"])
        ms = RELEASE_URL.match(f["checksums"])
        if not m or not ms:
            raise InputError(None, f"artifacts.{name}.arch.{arch}.url",
                             "not a GitHub release download URL: cannot move its version",
                             hint="https://github.com/OWNER/REPO/releases/download/TAG/FILE")
        owner, repo, _, asset = m.groups()
        base = f"https://github.com/{owner}/{repo}/releases/download/{_quote_tag(version)}"
        url, sums_url = f"{base}/{asset}", f"{base}/{ms.group(4)}"
        if sums_url not in sums_cache:
            say(f"  fetch {sums_url}")
            sums_cache[sums_url] = parse_sums(fetch_text(src.mirror(sums_url)))
        listed = sums_cache[sums_url].get(asset)
        if listed is None:
            raise PinMismatch(f"{name} {version} ({arch}): {sums_url} lists no {asset}",
                              hint="check the asset name and the release")
        say(f"  fetch {url}")
        got = fetch_sha256(src.mirror(url))
        if got != listed:
            raise PinMismatch(
                f"{name} {version} ({arch}): {asset} downloaded with sha256 {got}, but the "
                f"release's {ms.group(4)} lists {listed}; nothing was written",
                hint="a corrupted download or a changed release: retry, then ask upstream")
        plan.set(name, ("arch", arch, "url"), f["url"], url)
        plan.set(name, ("arch", arch, "checksums"), f["checksums"], sums_url)
        plan.set(name, ("arch", arch, "sha256"), f.get("sha256"), got)
        say(f"  {name} {arch}: sha256 {got} (listed in {ms.group(4)})")


def _api_json(url: str) -> dict:
    try:
        doc = json.loads(fetch_text(url))
    except json.JSONDecodeError as exc:
        raise LabError(f"{url}: not JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise LabError(f"{url}: unexpected answer")
    return doc


def _sha_of(doc: dict, *keys: str) -> str:
    cur: Any = doc
    for k in keys:
        cur = cur.get(k) if isinstance(cur, dict) else None
    if not (isinstance(cur, str) and catalog.GIT_ID.match(cur)):
        raise LabError(f"GitHub API answer lacks {'.'.join(keys)}")
    return cur


def tag_commit(owner: str, repo: str, tag: str, src: Sources) -> str:
    """The commit a tag names, from the API (annotated tags are followed to their commit)."""
    doc = _api_json(f"{src.api}/repos/{owner}/{repo}/git/ref/tags/{_quote_tag(tag)}")
    obj_type, sha = (doc.get("object") or {}).get("type"), _sha_of(doc, "object", "sha")
    for _ in range(5):
        if obj_type == "commit":
            return sha
        if obj_type != "tag":
            raise LabError(f"{owner}/{repo} tag {tag} points at a {obj_type}, not a commit")
        doc = _api_json(f"{src.api}/repos/{owner}/{repo}/git/tags/{sha}")
        obj_type, sha = (doc.get("object") or {}).get("type"), _sha_of(doc, "object", "sha")
    raise LabError(f"{owner}/{repo} tag {tag}: too many nested tags")


def pin_git(name: str, entry: dict, version: str, src: Sources, plan: Plan, say: Say) -> None:
    m = ARCHIVE_URL.match(entry["url"])
    if not m:
        raise InputError(None, f"artifacts.{name}.url",
                         "not a GitHub archive URL: cannot move its version",
                         hint="https://github.com/OWNER/REPO/archive/COMMIT.tar.gz")
    owner, repo = m.groups()
    tag_url = f"https://github.com/{owner}/{repo}/archive/refs/tags/{_quote_tag(version)}.tar.gz"
    say(f"  fetch {tag_url}")
    commit, tag_tree = fetch_archive_ids(src.mirror(tag_url))
    if commit is None:
        raise PinMismatch(f"{name} {version}: {tag_url} carries no commit id (pax header)",
                          hint="not an archive made by git archive")
    api_commit = tag_commit(owner, repo, version, src)
    if api_commit != commit:
        raise PinMismatch(f"{name} {version}: the tag archive is commit {commit}, but the tag "
                          f"points at {api_commit} (GitHub API); nothing was written")
    url = f"https://github.com/{owner}/{repo}/archive/{commit}.tar.gz"
    say(f"  fetch {url}")
    by_commit, tree = fetch_archive_ids(src.mirror(url))
    if (by_commit, tree) != (commit, tag_tree):
        raise PinMismatch(f"{name} {version}: the archive of commit {commit} has commit "
                          f"{by_commit} tree {tree}, the tag archive commit {commit} tree "
                          f"{tag_tree}; nothing was written")
    api_tree = _sha_of(_api_json(f"{src.api}/repos/{owner}/{repo}/git/commits/{commit}"),
                       "tree", "sha")
    if api_tree != tree:
        raise PinMismatch(
            f"{name} {version}: the archive's content has tree {tree}, but commit {commit} "
            f"has tree {api_tree} (GitHub API); nothing was written",
            hint="the archive does not reproduce the repository (export-ignore or "
                 "export-subst in .gitattributes?): the roles could not verify it either")
    plan.set(name, ("version",), entry.get("version"), version)
    plan.set(name, ("url",), entry.get("url"), url)
    plan.set(name, ("file",), entry.get("file"), f"{name}-{version}.tar.gz")
    plan.set(name, ("commit",), entry.get("commit"), commit)
    plan.set(name, ("tree",), entry.get("tree"), tree)
    say(f"  {name} {version}: commit {commit} tree {tree}")


def _requests(doc: dict, specs: list[str], file: str) -> dict[str, str]:
    """NAME=VERSION (or NAME: its current version; none: every release and git artifact)
    -> {artifact: version}, with the artifacts of one release moved together."""
    arts = doc["artifacts"]
    movable = [n for n, a in arts.items() if a.get("kind") in ("release", "git")]
    wanted: dict[str, str] = {}
    for spec in specs or movable:
        name, _, version = spec.partition("=")
        if name not in arts:
            raise InputError(file, f"artifacts.{name}", "no such artifact",
                             hint=f"choose from: {', '.join(movable)}")
        if name not in movable:
            raise InputError(file, f"artifacts.{name}", f"a {arts[name].get('kind')} pin is "
                             "set by hand (a key's fingerprint comes from its publisher)",
                             hint=f"pin one of: {', '.join(movable)}")
        version = version or str(arts[name].get("version", ""))
        if not VERSION_RE.match(version):
            raise InputError("command line", spec, f"not a version: {version!r}",
                             hint="NAME=VERSION, e.g. k3s=v1.34.2+k3s1")
        if wanted.get(name, version) != version:
            raise InputError("command line", spec, f"{name} asked at two versions")
        wanted[name] = version
    # One release, one version: k3s moves its airgap images along.
    for name, version in list(wanted.items()):
        if arts[name]["kind"] != "release":
            continue
        key = _release_key(arts[name])
        for other, a in arts.items():
            if a.get("kind") == "release" and other != name and _release_key(a) == key:
                if wanted.get(other, version) != version:
                    raise InputError("command line", other, f"{other} belongs to the release "
                                     f"of {name}: they move together",
                                     hint="give one version for both")
                wanted[other] = version
    return {n: wanted[n] for n in arts if n in wanted}  # in the file's order


def _release_key(a: dict) -> tuple[str, ...]:
    m = RELEASE_URL.match(next(iter(a["arch"].values()))["url"])
    return m.groups()[:3] if m else ("?",)


def compute(path: Path, specs: list[str], src: Sources, say: Say) -> Plan:
    """Download, compute and cross-check every value; nothing is written here."""
    catalog.load(path)  # the file is valid as it stands
    doc = yaml.safe_load(path.read_text())
    wanted = _requests(doc, specs, str(path))
    plan = Plan()
    sums_cache: dict[str, dict[str, str]] = {}
    for name, version in wanted.items():
        entry = doc["artifacts"][name]
        say(f"{name} {version}")
        if entry["kind"] == "release":
            pin_release(name, entry, version, src, plan, say, sums_cache)
        else:
            pin_git(name, entry, version, src, plan, say)
    return plan


# --- rewriting the file in place ------------------------------------------------------------

def _scalar_nodes(text: str) -> dict[tuple[str, ...], yaml.ScalarNode]:
    """Every scalar value in the `artifacts` mapping by key path, with its position."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    out: dict[tuple[str, ...], yaml.ScalarNode] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                walk(v, (*path, str(k.value)))
        elif isinstance(node, yaml.ScalarNode):
            out[path] = node

    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            if k.value == "artifacts":
                walk(v, ())
    return out


def _render(value: Any, style: str | None) -> str:
    text = str(value)
    plain_ok = (style is None and yaml.safe_load(text) == text
                and not re.search(r"(^[\s\-?:,\[\]{}#&*!|>'\"%@`])|(: )|( #)|\s$", text))
    return text if plain_ok else json.dumps(text)


def rewrite(text: str, plan: Plan) -> str:
    """TEXT with each changed value replaced where it stands (comments and layout kept)."""
    nodes = _scalar_nodes(text)
    edits = []
    for c in plan.changed:
        node = nodes.get((c.artifact, *c.path))
        if node is None:
            raise LabError(f"versions.yaml has no artifacts.{c.artifact}.{'.'.join(c.path)} "
                           "to rewrite", hint="add the key (null is fine), then run it again")
        edits.append((node.start_mark.index, node.end_mark.index, _render(c.new, node.style)))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def pin(path: Path, specs: list[str], src: Sources, say: Say, *,
        dry_run: bool = False) -> Plan:
    """Compute and cross-check, then rewrite PATH atomically (unless dry_run)."""
    plan = compute(path, specs, src, say)
    if dry_run or not plan.changed:
        return plan
    new_text = rewrite(path.read_text(), plan)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(new_text)
        catalog.load(tmp)  # what is written must load, or nothing is
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return plan
