"""docs/fidelity.md: the rules (rules.py) and the upstream examples' sweep, rendered.

The examples' part is rendered from the sweep's stored results (scripts/fidelity_sweep.py:
docs/fidelity/listing.json, every example file of the pinned trees; docs/fidelity/results.json,
what each gave with and without a container engine), never typed: every count the page
quotes is counted here. `scripts/fidelity_sweep.py render` writes the page; a test fails when
the page differs from a re-render.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from lab.backends.local.fidelity.rules import (
    ANNOTATION,
    DIFFERENT,
    KINDS,
    REFUSED,
    RULES,
    SAME,
    UPSTREAM,
)

_LABEL = {SAME: "same", DIFFERENT: "**different**", REFUSED: "refused"}
VERDICTS = ("exact", "differs", "refused", "needs", "wrong")
COLUMNS = {"none": "no container engine", "engine": "with a container engine"}
# How each tree's examples are named in the table: the tree's name and the path inside its
# examples' folder.
_MISSING = "not run"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def render(listing: Mapping[str, Any], results: Mapping[str, Any]) -> str:
    """docs/fidelity.md, from the rules and the sweep's stored listing and results."""
    out = [
        "# Fidelity: what the local backend does like upstream, differently, or not at all",
        "",
        "The local backend runs the same manifests as a cluster. This page lists, per kind, "
        "the upstream fields and behaviours a learner can observe and how the local backend "
        "treats each: **same** (replayed against the upstream rule by a test), "
        "**different** (a deliberate difference, announced by `kflab apply` with a `note:` "
        "line and recorded in the `" + ANNOTATION + "` annotation), or **refused** (an "
        "error naming the field and the fix). Upstream versions are those the lab installs "
        "(kubeflow/manifests 26.03). Then every example of the upstream trees, applied "
        "unchanged, with what it gave.",
        "",
        "Generated: the rules from `lab/backends/local/fidelity/rules.py`, the examples "
        "from the sweep's stored results (`scripts/fidelity_sweep.py render`); a test keeps "
        "the page equal to a re-render, and checks every rule against the code.",
        "",
    ]
    for kind in KINDS:
        out += [f"## {kind} ({UPSTREAM[kind]})", "",
                "| upstream field or behaviour | upstream | local | what the local backend "
                "does | upstream source |",
                "| --- | --- | --- | --- | --- |"]
        for r in RULES:
            if r.kind == kind:
                out.append(f"| {_cell(r.subject)} | {_cell(r.upstream)} | {_LABEL[r.local]} "
                           f"| {_cell(r.detail)} | {_cell(r.source)} |")
        out.append("")
    out += examples(listing, results)
    return "\n".join(out)


def counts(listing: Mapping[str, Any], results: Mapping[str, Any], column: str,
           prefix: str = "") -> Counter[str]:
    """Verdicts of one column over the listed examples (those under `prefix`); an example
    the sweep has not run counts as `not run`."""
    found: Counter[str] = Counter()
    for key in listing.get("files", {}):
        if key.startswith(prefix):
            entry = (results.get("examples") or {}).get(key, {}).get(column)
            found[entry["verdict"] if entry else _MISSING] += 1
    return found


def _phrase(n: Counter[str]) -> str:
    parts = [f"{n[v]} {v}" for v in VERDICTS if n[v]]
    if n[_MISSING]:
        parts.append(f"{n[_MISSING]} {_MISSING}")
    return ", ".join(parts) or "none"


def _verdict(entry: Mapping[str, Any] | None) -> str:
    if not entry:
        return _MISSING
    text = f"**{entry['verdict']}**: {entry['reason']}"
    if entry.get("standin"):
        text += f" (image: {entry['standin']})"
    if entry.get("rules"):
        text += f" [rules: {', '.join(entry['rules'])}]"
    return _cell(text)


def examples(listing: Mapping[str, Any], results: Mapping[str, Any]) -> list[str]:
    """The sweep's section: trees, how it ran, the counts, one row per example."""
    files = listing.get("files", {})
    trees = listing.get("trees", {})
    runs = results.get("runs", {})
    out = ["## Upstream examples, applied unchanged", "",
           "Every example file of the upstream trees below (" + str(len(files)) + " in all) "
           "was applied as a user applies it -- `kflab apply -f FILE` from the example's own "
           "folder, or `kflab pipeline run FILE` for a KFP sample -- with a fresh state "
           "folder, nothing installed for it and nothing changed in it: the same trial "
           "counts and epochs, no files of its image laid out, no dataset made. Each got "
           "one verdict per column:", "",
           "- **exact**: the outcome a cluster gives (a run to the same end, or the same "
           "refusal);",
           "- **differs**: it ran, with the deliberate differences `kflab apply` announced "
           "(its `note:` lines; the rule ids of the `" + ANNOTATION + "` annotation are "
           "listed);",
           "- **refused**: kflab refused it before anything ran; the reason is the error a "
           "user reads, with its fix;",
           "- **needs**: what it needs and this machine lacks, named: its container image "
           "(a program at an image path; no container engine to run it; an image no "
           "registry here serves), the network (a dataset or model downloaded at run time), "
           "a GPU;",
           "- **wrong**: an outcome a cluster would not give.", "",
           "Two columns: with no container engine (none on the PATH), and with one (Podman "
           "here). No registry is reachable from the machine the sweep ran on: "
           "where an image was built here from the example's own Dockerfile, on a local "
           "Debian base with Debian's packages and PyPI wheels, to stand in for the real "
           "one, the row names it. Figures that vary from run to run (best values, "
           "early-stop counts) are not given.", ""]
    out += ["| tree | repository | tag | folder | files |", "| --- | --- | --- | --- | --- |"]
    for name, t in trees.items():
        n = sum(1 for k in files if k.startswith(name + "/"))
        note = f"; {t['note']}" if t.get("note") else ""
        out.append(f"| {name} | {t['repository']} | {t['tag']} | {t['folder']}{note} | {n} |")
    out.append("")
    for column, title in COLUMNS.items():
        run = runs.get(column) or {}
        when = (f"swept {run['date']} with kflab {run['kflab']}" if run else "not swept yet")
        out.append(f"- {title} ({when}): {_phrase(counts(listing, results, column))}.")
    out.append("")
    out += ["| tree | " + " | ".join(COLUMNS.values()) + " |", "| --- | --- | --- |"]
    for name in trees:
        cells = [_phrase(counts(listing, results, c, name + "/")) for c in COLUMNS]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out.append("")
    out += ["Re-run by a developer, niced and in parts (upstream trees checked out at the tags "
            "above, one folder each under DIR):", "",
            "```",
            "python scripts/fidelity_images.py --trees DIR   # the stand-in images (Podman)",
            "python scripts/fidelity_sweep.py list --trees DIR",
            "python scripts/fidelity_sweep.py run --trees DIR [--column none|engine] "
            "[--only katib/] [--timeout 900]",
            "python scripts/fidelity_sweep.py render",
            "```", ""]
    out += ["| example | " + " | ".join(COLUMNS.values()) + " |", "| --- | --- | --- |"]
    for key in files:
        entry = (results.get("examples") or {}).get(key, {})
        out.append(f"| {_cell(key)} | " + " | ".join(_verdict(entry.get(c)) for c in COLUMNS)
                   + " |")
    out.append("")
    return out
