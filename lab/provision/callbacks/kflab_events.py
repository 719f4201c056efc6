"""Ansible callback: one JSON line per event, for kflab's live progress display.

Loaded by ansible-playbook through ANSIBLE_CALLBACK_PLUGINS; writes to $KFLAB_EVENTS.
It must not import kflab: it runs inside Ansible's own process.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: kflab_events
type: notification
short_description: JSON lines of task events for kflab
description: Writes play, task and result events to the file named by $KFLAB_EVENTS.
requirements: [enable in callbacks_enabled]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "kflab_events"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        path = os.environ.get("KFLAB_EVENTS")
        self._fh = open(path, "a", buffering=1) if path else None  # noqa: SIM115

    def _emit(self, event: str, **fields: object) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps({"event": event, "t": time.time(), **fields},
                                      default=str) + "\n")

    @staticmethod
    def _task(task: object) -> dict[str, object]:
        role = getattr(task, "_role", None)
        name = getattr(task, "name", "") or task.get_name()  # type: ignore[attr-defined]
        return {"task": name, "role": role.get_name() if role else "",
                "uuid": getattr(task, "_uuid", "")}

    def v2_playbook_on_play_start(self, play: object) -> None:
        self._emit("play", name=play.get_name())  # type: ignore[attr-defined]

    def v2_playbook_on_task_start(self, task: object, is_conditional: bool) -> None:
        self._emit("task", **self._task(task))

    def v2_playbook_on_handler_task_start(self, task: object) -> None:
        self._emit("task", handler=True, **self._task(task))

    def _result(self, status: str, result: object) -> None:
        res = result._result  # type: ignore[attr-defined]
        fields: dict[str, object] = {"status": status, "host": result._host.get_name(),  # type: ignore[attr-defined]
                                     "changed": bool(res.get("changed")),
                                     **self._task(result._task)}  # type: ignore[attr-defined]
        if status in ("failed", "unreachable"):
            fields["msg"] = str(res.get("msg") or "")[:2000]
            for key in ("stderr", "stdout"):
                if res.get(key):
                    fields[key] = str(res[key])[-2000:]
        elif status == "skipped":  # "Command would have run if not in check mode", a condition
            fields["msg"] = str(res.get("msg") or res.get("skip_reason") or "")[:500]
        if "_ansible_item_label" in res or "item" in res:
            fields["item"] = str(res.get("_ansible_item_label", res.get("item")))[:200]
        diffs: list[object] = []
        for one in [res, *(r for r in res.get("results") or [] if isinstance(r, dict))]:
            d = one.get("diff")
            if d and not one.get("_ansible_no_log"):  # --diff: what a change would do
                diffs += d if isinstance(d, list) else [d]
        if diffs:
            fields["diff"] = [self._diff(d) for d in diffs[:8]]
        self._emit("result", **fields)

    @staticmethod
    def _diff(d: object) -> dict[str, str]:
        if not isinstance(d, dict):
            return {"prepared": str(d)[:4000]}
        return {k: str(d[k])[:4000] for k in ("before_header", "after_header", "before",
                                               "after", "prepared") if d.get(k) is not None}

    def v2_runner_on_ok(self, result: object) -> None:
        self._result("ok", result)

    def v2_runner_on_failed(self, result: object, ignore_errors: bool = False) -> None:
        self._result("ignored" if ignore_errors else "failed", result)

    def v2_runner_on_skipped(self, result: object) -> None:
        self._result("skipped", result)

    def v2_runner_on_unreachable(self, result: object) -> None:
        self._result("unreachable", result)

    def v2_playbook_on_stats(self, stats: object) -> None:
        hosts = sorted(stats.processed.keys())  # type: ignore[attr-defined]
        self._emit("stats", hosts={h: stats.summarize(h) for h in hosts})  # type: ignore[attr-defined]
