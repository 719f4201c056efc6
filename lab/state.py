"""The state folder: where local resources, runs, logs and scenario progress live.

Every kflab process (apply, check, solve, a background model server) reads and writes the
same folder, so `kflab check` in one terminal sees what `kflab apply` made in another.
Resolution: `--state DIR` / $KFLAB_STATE, else `~/.kflab` (created mode 0700).

Safety: every path inside the folder is built by `path()` from parts that are checked one by
one (no separators, no '.' or '..', no control characters) and refused when it resolves
outside the folder -- a symlink planted inside it included. Every delete goes through
`remove()`, which applies the same check. Reads and writes turn the operating system's
errors (a corrupt file, a full disk, a read-only mount) into errors that name the file and
say what to do.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lab import limits
from lab.errors import LabError

ENV_VAR = "KFLAB_STATE"
MAX_STATE_FILE_BYTES = limits.MAX_RECORD_BYTES  # one record; bigger is refused as corrupt
# A path part: what kflab itself names things (validated object names, plurals, file names).
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_NAME_MAX = 255  # bytes in one path component (Linux NAME_MAX)
MOVE_HINT = ("use another folder with --state DIR (or $KFLAB_STATE), or fix this one")


class StateError(LabError):
    """The state folder cannot be used as asked (unsafe path, corrupt file, disk full...)."""


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Return (and create, mode 0700) the state folder."""
    raw = override or os.environ.get(ENV_VAR) or Path.home() / ".kflab"
    path = Path(raw).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise io_error(exc, path, "create the state folder") from None
    if not path.is_dir():
        raise StateError(f"the state folder {path} is not a folder", hint=MOVE_HINT)
    return path


def check_part(part: object) -> str:
    """One path component built from kflab's own names; anything else is refused."""
    if not isinstance(part, str) or not _PART.match(part) or \
            len(part.encode()) > _NAME_MAX:
        raise StateError(f"refusing to use {part!r} as a file name in the state folder",
                         hint="names must be letters, digits, '.', '_' or '-' (at most "
                              "255 bytes) and not start with '.' or '-'")
    return part


def confine(root: Path, target: Path) -> Path:
    """`target` if it lies inside `root` both as written and once symlinks are resolved."""
    real_root = root.resolve()
    lexical = Path(os.path.normpath(target if target.is_absolute() else real_root / target))
    if not (lexical == real_root or lexical.is_relative_to(real_root)
            or lexical.is_relative_to(root)):
        raise StateError(f"refusing to touch {target}: it is outside the state folder {root}")
    real = target.resolve()
    if not real.is_relative_to(real_root):
        link = _first_link(root, target) or target
        raise StateError(
            f"refusing to touch {target}: it resolves to {real}, outside the state folder "
            f"{real_root} (through the symlink {link})",
            hint=f"kflab never follows links out of its state folder; if you did not make "
                 f"that link, remove it (rm {link}) and look at who did")
    return target


def _first_link(root: Path, target: Path) -> Path | None:
    rel = target.relative_to(root) if target.is_relative_to(root) else None
    if rel is None:
        return None
    cur = root
    for part in rel.parts:
        cur = cur / part
        if cur.is_symlink():
            return cur
    return None


def path(root: Path, *parts: str) -> Path:
    """The path `root/part/part/...`: each part checked, the result confined to `root`."""
    for part in parts:
        check_part(part)
    return confine(root, root.joinpath(*parts))


def remove(root: Path, target: Path) -> bool:
    """Delete a file, link or folder inside `root` (a link is removed, never followed).
    Returns whether something was there."""
    confine(root, target)
    if target.resolve() == root.resolve():
        raise StateError(f"refusing to delete the state folder itself ({root})")
    try:
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)  # fd-based on Linux: never follows links inside
        else:
            return False
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise io_error(exc, target, "delete") from None
    return True


def io_error(exc: OSError, target: Path | str | None, doing: str = "write") -> StateError:
    """A clear error for a failed read or write in the state folder."""
    where = f" {target}" if target else ""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return StateError(f"no space left to {doing}{where} (the disk or quota holding the "
                          "state folder is full)",
                          hint="free some space, or " + MOVE_HINT)
    if code == errno.EROFS:
        return StateError(f"cannot {doing}{where}: the state folder is on a read-only file "
                          "system", hint=MOVE_HINT)
    if code in (errno.EACCES, errno.EPERM):
        return StateError(f"permission denied to {doing}{where}",
                          hint="the state folder must be writable by you (kflab creates it "
                               "mode 0700); " + MOVE_HINT)
    return StateError(f"cannot {doing}{where}: {exc.strerror or exc}", hint=MOVE_HINT)


def write_json(target: Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename) so a reader never sees half a file."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".part")
    except OSError as exc:
        raise io_error(exc, target) from None
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise io_error(exc, target) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(target: Path, *, expect: type | None = dict,
              fix: str = "re-create it (apply or run again)",
              check: Callable[[Any], str | None] | None = None) -> Any | None:
    """Read JSON, or None when the file does not exist.

    A corrupt or truncated file (not JSON, not UTF-8, or not a `expect`) is moved aside to
    `NAME.corrupt` and reported with a StateError naming both paths, so the next command
    works again; `fix` says how to get the lost object back.
    """
    try:
        raw = _read_capped(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise io_error(exc, target, "read") from None
    try:
        if raw is None:
            raise ValueError(f"not a regular file, or over {MAX_STATE_FILE_BYTES} bytes")
        data = json.loads(raw.decode("utf-8"))
        if expect is not None and not isinstance(data, expect):
            raise ValueError(f"expected a JSON {expect.__name__}, got {type(data).__name__}")
        problem = check(data) if check is not None else None
        if problem:  # valid JSON of the wrong shape (a hand edit): as corrupt as a truncation
            raise ValueError(problem)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        detail = str(exc).splitlines()[0][:200] or "empty file"
        if raw is not None and not raw.strip():
            detail = "the file is empty (truncated)"
        aside = _aside(target)
        try:
            os.replace(target, aside)
            where = f"kflab moved it to {aside} for inspection"
        except OSError:
            return _corrupt(target, detail, f"delete or repair it (rm {target}), then {fix}")
        return _corrupt(target, detail, f"{where}; {fix}")
    return data


def _read_capped(target: Path) -> bytes | None:
    """A state file's bytes; None when it is not a regular file (a FIFO would block a read
    forever) or is over MAX_STATE_FILE_BYTES (a grading sandbox holds a student's files)."""
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_STATE_FILE_BYTES:
            return None
        chunks, left = [], MAX_STATE_FILE_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1024 * 1024))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    return raw if len(raw) <= MAX_STATE_FILE_BYTES else None


def _corrupt(target: Path, detail: str, hint: str) -> Any:
    raise StateError(f"corrupt state file {target}: {detail}", hint=hint)


def _aside(target: Path) -> Path:
    n = 1
    while (cand := target.with_name(f"{target.name}.corrupt{'' if n == 1 else n}")).exists():
        n += 1
    return cand


@contextlib.contextmanager
def held(lock: Path) -> Iterator[None]:
    """Hold an exclusive flock on `lock` (created 0600) for the block; waits for others.
    The kernel drops it if this process dies, however it dies."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise io_error(exc, lock, "lock") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def try_hold(lock: Path) -> int | None:
    """The descriptor of an exclusive flock on `lock` (created 0600) when no other process
    holds it, else None; for a role one process takes until it exits (closing the
    descriptor, or the process's death, gives it up)."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise io_error(exc, lock, "lock") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def in_use(lock: Path) -> bool:
    """Whether a live process holds the flock on `lock` (False when there is no such file)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)
