"""The state folder: where local resources, runs, logs and scenario progress live.

Every kflab process (apply, check, solve, a background model server) reads and writes the
same folder, so `kflab check` in one terminal sees what `kflab apply` made in another.
Resolution: `--state DIR` / $KFLAB_STATE, else `~/.kflab`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

ENV_VAR = "KFLAB_STATE"


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Return (and create, mode 0700) the state folder."""
    raw = override or os.environ.get(ENV_VAR) or Path.home() / ".kflab"
    path = Path(raw).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename) so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any | None:
    """Read JSON, or None when the file does not exist."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
