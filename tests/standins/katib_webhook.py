"""STAND-IN for Katib's pod mutating webhook (katib v0.19.0), the part that rewrites the
trial's primary container so the metrics collector can read its output.

Upstream: pkg/webhook/v1beta1/pod/utils.go, wrapWorkerContainer (with getContainerCommand,
getEarlyStoppingCommand, getMarkCompletedCommand), called from inject_webhook.go Mutate for the
collectors in const.go NeedWrapWorkerMetricsCollectorList (StdOut, TfEvent, File). It:
- takes the container's command then its args (the image's ENTRYPOINT/CMD when empty: this
  stand-in has no registry, so a container without a command is an error here);
- keeps a leading `sh -c` / `bash -c` as the new command only when those are the first two
  tokens, else the new command is `sh -c`;
- appends `1>FILE 2>&1` for the StdOut collector, `|| <early-stop check>` when the trial has
  early stopping rules, and `&& echo completed > DIR/$$$$.pid`;
- joins everything with single spaces, unquoted (strings.Join), as the one argument.
Expected values: inject_webhook_test.go TestWrapWorkerContainer (tests/unit/test_katib_webhook.py).
"""

from __future__ import annotations

import posixpath
from typing import Any

DEFAULT_METRICS_FILE = "/var/log/katib/metrics.log"  # common_types.go DefaultFilePath
NEED_WRAP = ("StdOut", "TfEvent", "File")  # const.go NeedWrapWorkerMetricsCollectorList


def early_stopping_command(metrics_dir: str) -> str:
    """utils.go getEarlyStoppingCommand."""
    pid_file = posixpath.join(metrics_dir, "$$$$.pid")
    pid_cond = posixpath.join(metrics_dir, "$$.pid")
    return (f"if test -f {pid_file} && [ $(head -n 1 {pid_cond}) = early-stopped ]; then "
            "echo Training Container was Early Stopped; else echo Training Container was "
            "Failed; exit 1; fi")


def mark_completed_command(metrics_dir: str) -> str:
    """utils.go getMarkCompletedCommand."""
    return f"echo completed > {posixpath.join(metrics_dir, '$$$$.pid')}"


def wrap_worker_container(container: dict[str, Any], *, collector: str, metrics_file: str,
                          path_kind: str = "File", early_stopping: bool = False) -> None:
    """utils.go wrapWorkerContainer, on one (primary) container, in place."""
    tokens = [str(t) for t in (container.get("command") or [])] + \
        [str(t) for t in (container.get("args") or [])]
    if not tokens:
        raise ValueError("the stand-in webhook cannot read an image's entrypoint: "
                         "give the primary container a command")
    command = ["sh", "-c"]
    if tokens[0] in ("sh", "bash") and len(tokens) > 1 and tokens[1] == "-c":
        command, tokens = tokens[:2], tokens[2:]
    if collector == "StdOut":
        tokens.append(f"1>{metrics_file} 2>&1")
    metrics_dir = posixpath.dirname(metrics_file) if path_kind == "File" else metrics_file
    if early_stopping:
        tokens += ["||", early_stopping_command(metrics_dir)]
    tokens += ["&&", mark_completed_command(metrics_dir)]
    container["command"] = command
    container["args"] = [" ".join(tokens)]


def kubelet_expand(value: str) -> str:
    """The kubelet's expansion of a container's command and args (k8s.io/kubernetes
    third_party/forked/golang/expansion, Expand): `$$` is an escaped `$`; a `$(NAME)`
    reference is kept as written when NAME is not defined (this stand-in defines none)."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            nxt = value[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = value.find(")", i + 2)
                if end < 0:
                    out.append(value[i:])
                    break
                out.append(value[i:end + 1])
                i = end + 1
                continue
        out.append(value[i])
        i += 1
    return "".join(out)
