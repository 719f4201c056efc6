"""Git object ids of a source tree, computed the way git does, with nothing but the stdlib.

Why: a GitHub archive's bytes are not a stable pin (GitHub changed its compression once, in
2023, and reverted), but its content is: the tree id that `git rev-parse COMMIT^{tree}` prints
is a hash of exactly the files, modes and symlinks in the archive. Blobs are hashed byte for
byte, with no line-ending filter (kubeflow/manifests stores a README.md with CRLF).

Also a script: the kubeflow role runs this file on the node, where only Python exists
(`python3 gittree.py ARCHIVE` prints {"commit": ..., "tree": ...} as JSON). So it must stay
stdlib-only and run on the Python of Ubuntu 22.04 (3.10).

An archive is read member by member, never extracted: anything git archive would not write
(hard links, devices, `..`, absolute paths, a second top folder, a path twice) is refused,
so the tree that is hashed is exactly what unpacking it gives.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tarfile
from typing import BinaryIO

FILE, EXEC, LINK, TREE = b"100644", b"100755", b"120000", b"40000"


class TreeError(ValueError):
    """The input is not something git could have produced."""


def blob_id(data: bytes) -> str:
    """`git hash-object` of these bytes (no filters)."""
    return _blob_stream(len(data), [data])


def _blob_stream(size: int, chunks) -> str:
    h = hashlib.sha1(b"blob %d\0" % size)  # noqa: S324 - git's object id, not a security hash
    got = 0
    for chunk in chunks:
        got += len(chunk)
        h.update(chunk)
    if got != size:
        raise TreeError(f"short read: {got} of {size} bytes")
    return h.hexdigest()


def _tree_id(entries: dict) -> str | None:
    """Id of one folder; None for a folder with no file below it (git does not track it)."""
    rows = []
    for name, node in entries.items():
        if isinstance(node, dict):
            sub = _tree_id(node)
            if sub is None:
                continue
            mode, sha, key = TREE, sub, name + b"/"
        else:
            mode, sha = node
            key = name
        rows.append((key, mode, name, sha))
    if not rows:
        return None
    body = b"".join(b"%s %s\0%s" % (mode, name, bytes.fromhex(sha))
                    for _, mode, name, sha in sorted(rows))  # git sorts folders as "name/"
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()  # noqa: S324


def tree_id(root: dict) -> str:
    """Id of a nested {name: node} mapping; the empty tree when nothing is in it."""
    return _tree_id(root) or hashlib.sha1(b"tree 0\0").hexdigest()  # noqa: S324


def _check_name(name: bytes, where: str) -> None:
    if name in (b"", b".", b"..", b".git") or b"/" in name or b"\0" in name:
        raise TreeError(f"{where}: a path git cannot hold ({name!r})")


def dir_tree(path: str | os.PathLike) -> str:
    """Tree id of a folder as `git add -A && git write-tree` would give (a `.git` folder is
    skipped, symlinks are not followed, empty folders do not count)."""

    def walk(folder: str) -> dict:
        out: dict = {}
        with os.scandir(folder) as it:
            for entry in it:
                name = os.fsencode(entry.name)
                if name == b".git":
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    out[name] = (LINK, blob_id(os.fsencode(os.readlink(entry.path))))
                elif stat.S_ISDIR(st.st_mode):
                    out[name] = walk(entry.path)
                elif stat.S_ISREG(st.st_mode):
                    with open(entry.path, "rb") as fh:
                        sha = _blob_stream(st.st_size, iter(lambda fh=fh: fh.read(1 << 20), b""))
                    out[name] = (EXEC if st.st_mode & stat.S_IXUSR else FILE, sha)
                else:
                    raise TreeError(f"{entry.path}: not a file, folder or symlink")
        return out

    if not os.path.isdir(path):
        raise TreeError(f"{path}: not a folder")
    return tree_id(walk(os.fspath(path)))


def archive_ids(path: str | os.PathLike) -> tuple[str | None, str]:
    """(commit, tree) of a git archive (tar, gzip or not) with one top folder, as GitHub
    serves them: the commit is the pax global header's comment (`git get-tar-commit-id`),
    the tree is computed from the members below the top folder."""
    with open(path, "rb") as fh:
        return stream_ids(fh, str(path))


def stream_ids(fh: BinaryIO, where: str = "<archive>") -> tuple[str | None, str]:
    root: dict = {}
    top: bytes | None = None
    seen: set[bytes] = set()
    try:
        tar = tarfile.open(fileobj=fh, mode="r|*")  # noqa: SIM115 - closed by the with below
    except tarfile.TarError as exc:
        raise TreeError(f"{where}: not a tar archive ({exc})") from exc
    with tar:
        try:
            for member in tar:
                raw = member.name.encode("utf-8", "surrogateescape").rstrip(b"/")
                parts = raw.split(b"/")
                if raw.startswith(b"/") or not raw:
                    raise TreeError(f"{where}: absolute or empty path {member.name!r}")
                for part in parts:
                    _check_name(part, f"{where}: {member.name!r}")
                if top is None:
                    top = parts[0]
                if parts[0] != top:
                    raise TreeError(f"{where}: more than one top folder ({top!r}, "
                                    f"{parts[0]!r})")
                if raw in seen:
                    raise TreeError(f"{where}: {member.name!r} appears twice")
                seen.add(raw)
                if len(parts) == 1:
                    if not member.isdir():
                        raise TreeError(f"{where}: top entry {member.name!r} is not a folder")
                    continue
                *dirs, name = parts[1:]
                folder = root
                for d in dirs:
                    nxt = folder.setdefault(d, {})
                    if not isinstance(nxt, dict):
                        raise TreeError(f"{where}: {member.name!r} is below a file")
                    folder = nxt
                if member.isdir():
                    if not isinstance(folder.setdefault(name, {}), dict):
                        raise TreeError(f"{where}: {member.name!r} is a file and a folder")
                    continue
                if name in folder:
                    raise TreeError(f"{where}: {member.name!r} appears twice")
                if member.issym():
                    folder[name] = (LINK, blob_id(member.linkname.encode("utf-8",
                                                                         "surrogateescape")))
                elif member.isreg():
                    data = tar.extractfile(member)
                    assert data is not None  # a regular member always has data
                    sha = _blob_stream(member.size,
                                       iter(lambda d=data: d.read(1 << 20), b""))
                    folder[name] = (EXEC if member.mode & 0o100 else FILE, sha)
                else:
                    raise TreeError(f"{where}: {member.name!r} is a hard link or special "
                                    "file, which git archive never writes")
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise TreeError(f"{where}: broken archive ({exc})") from exc
        comment = tar.pax_headers.get("comment")
    if top is None:
        raise TreeError(f"{where}: empty archive")
    commit = comment if comment and _is_hex(comment, 40) else None
    return commit, tree_id(root)


def _is_hex(s: str, n: int) -> bool:
    return len(s) == n and all(c in "0123456789abcdef" for c in s)


def main(argv: list[str]) -> int:
    """`gittree.py PATH`: JSON {"commit", "tree"} of an archive, or {"tree"} of a folder."""
    if len(argv) != 1:
        print("usage: gittree.py ARCHIVE_OR_FOLDER", file=sys.stderr)
        return 2
    try:
        if os.path.isdir(argv[0]):
            out = {"commit": None, "tree": dir_tree(argv[0])}
        else:
            commit, tree = archive_ids(argv[0])
            out = {"commit": commit, "tree": tree}
    except (TreeError, OSError) as exc:
        print(f"gittree: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
