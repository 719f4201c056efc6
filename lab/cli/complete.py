"""Shell completion of the words a learner types most: scenario ids, resource types and the
names of resources in the state folder.

Called on every Tab, so it reads only folder listings -- the scenario folders (no YAML
parsed) and `<state>/resources/<plural>/<namespace>/` (no backend built, nothing created;
on a cluster backend the names would need the API server, so only types complete there).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from click.shell_completion import CompletionItem

SCENARIO_FILE = "scenario.yaml"


def _scenario_folders() -> list[Path]:
    """The search path of lab.scenarios.loader.search_path, without importing the loader."""
    from lab import content

    paths = [Path(p) for p in os.environ.get("KFLAB_SCENARIOS", "").split(os.pathsep) if p]
    with contextlib.suppress(Exception):  # no content installed: $KFLAB_SCENARIOS only
        paths.append(content.scenarios_dir())
    return paths


def scenario_ids(ctx: Any, param: Any, incomplete: str) -> list[CompletionItem]:
    found: set[str] = set()
    for base in _scenario_folders():
        try:
            found.update(e.name for e in os.scandir(base)
                         if e.name.startswith(incomplete) and e.is_dir()
                         and os.path.isfile(os.path.join(e.path, SCENARIO_FILE)))
        except OSError:
            continue
    return [CompletionItem(name) for name in sorted(found)]


def _state_root(ctx: Any) -> Path:
    """The state folder the command would use (`--state`, $KFLAB_STATE, ~/.kflab), not
    created when missing."""
    given = ctx.find_root().params.get("state") or os.environ.get("KFLAB_STATE")
    return Path(given).expanduser() if given else Path.home() / ".kflab"


def _names(ctx: Any, plural: str) -> list[str]:
    namespace = ctx.params.get("namespace") or "default"
    folder = _state_root(ctx) / "resources" / plural / str(namespace)
    try:
        return sorted(e.name[:-5] for e in os.scandir(folder)
                      if e.name.endswith(".json") and not e.name.startswith("."))
    except OSError:
        return []


def resources(ctx: Any, param: Any, incomplete: str) -> list[CompletionItem]:
    """kubectl's forms: a type first (plural, kind or short name), then names of that type
    (`get run NAME`), or TYPE/NAME in one word."""
    from lab.kube.kinds import KINDS, lookup

    words = list(ctx.params.get(param.name) or ())
    if "/" in incomplete:
        typed, _, start = incomplete.partition("/")
        try:
            kind = lookup(typed)
        except Exception:
            return []
        return [CompletionItem(f"{typed}/{n}") for n in _names(ctx, kind.plural)
                if n.startswith(start)]
    if not words:
        types = {name for k in KINDS for name in (k.plural, *k.short) if name}
        return [CompletionItem(t) for t in sorted(types) if t.startswith(incomplete.lower())]
    try:
        kind = lookup(words[0])
    except Exception:
        return []
    return [CompletionItem(n) for n in _names(ctx, kind.plural)
            if n.startswith(incomplete) and n not in words[1:]]
