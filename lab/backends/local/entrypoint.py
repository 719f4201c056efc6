"""The one thing a container image knows that a manifest does not say: its entrypoint.

A Kubernetes container without `command` runs the image's ENTRYPOINT (with `args` as its
arguments). The local backend runs no image, so it cannot know what that is; it says so
and shows the line to add, keeping the manifest's own args.
"""

from __future__ import annotations

import json
from typing import Any


def problem(container: dict[str, Any]) -> str:
    image = container.get("image")
    what = f"what image '{image}' starts" if isinstance(image, str) and image \
        else "the image's entrypoint"
    return (f"missing: without command a cluster runs {what}, and that entrypoint is "
            "unknown locally (no image is pulled or run)")


def hint(container: dict[str, Any], program: str, script: str) -> str:
    """The command line to add, in the manifest's own list style."""
    line = f"command: {json.dumps([program, script])}"
    args = container.get("args")
    if isinstance(args, list) and args:
        return (f"add `{line}` (the program the image runs, as a path on this machine) "
                "next to the existing args, which stay as they are")
    return f"add `{line}` (the program the image runs, as a path on this machine)"
