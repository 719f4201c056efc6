"""Conditions as knative.dev/pkg writes them, for the kinds whose controllers use it (KServe's
InferenceService).

KServe v0.16.0 (go.mod: knative.dev/pkg v0.0.0-20250117084104-c43477f0052b) keeps its status
conditions in knative's `apis.Condition`: `type`, `status`, then `severity`,
`lastTransitionTime`, `reason` and `message`, each `omitempty` (apis/condition_types.go,
Condition) -- no `lastUpdateTime`, and no empty `reason`. They are set through a living
condition set (apis/condition_set.go): SetCondition leaves a condition alone when nothing
but its time would change, else stamps a new lastTransitionTime and keeps the list sorted by
type; MarkTrue / MarkFalse / MarkUnknown set a dependent and recompute the happy condition
(`Ready`) from the dependents (recomputeHappiness, findUnhappyDependent: a False dependent
wins over an Unknown one); a condition outside the set gets severity Info (severity).
KServe's set: `NewLivingConditionSet(PredictorReady, IngressReady)` in
pkg/apis/serving/v1beta1/inference_service_status.go (conditionSet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.kube.conditions import now

INFO = "Info"  # ConditionSeverityInfo; ConditionSeverityError is "" (omitted)


@dataclass(frozen=True)
class LivingSet:
    happy: str
    dependents: tuple[str, ...]

    def _severity(self, ctype: str) -> str:
        return "" if ctype == self.happy or ctype in self.dependents else INFO

    def set(self, status: dict[str, Any], ctype: str, value: str, reason: str = "",
            message: str = "") -> None:
        """SetCondition: the time moves only when something else in the condition does."""
        cond = {"type": ctype, "status": value}
        for key, text in (("severity", self._severity(ctype)), ("reason", reason),
                          ("message", message)):
            if text:
                cond[key] = text
        others = []
        for old in status.get("conditions") or []:
            if old.get("type") != ctype:
                others.append(old)
            elif {k: v for k, v in old.items() if k != "lastTransitionTime"} == cond:
                return
        cond["lastTransitionTime"] = now()
        status["conditions"] = sorted([*others, cond], key=lambda c: str(c.get("type")))

    def get(self, status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
        return next((c for c in status.get("conditions") or [] if c.get("type") == ctype),
                    None)

    def mark(self, status: dict[str, Any], ctype: str, value: bool | str, reason: str = "",
             message: str = "") -> None:
        """MarkTrue (reason and message dropped, as knative's MarkTrue sets neither),
        MarkFalse or MarkUnknown, then the happy condition as knative recomputes it."""
        state = value if isinstance(value, str) else ("True" if value else "False")
        if state == "True":
            self.set(status, ctype, "True")
        else:
            self.set(status, ctype, state, reason, message)
        if ctype == self.happy or ctype not in self.dependents:
            return
        unhappy = self._unhappy(status)
        if unhappy is None:
            self.set(status, self.happy, "True")
        else:
            self.set(status, self.happy, unhappy.get("status", "Unknown"),
                     unhappy.get("reason", ""), unhappy.get("message", ""))

    def _unhappy(self, status: dict[str, Any]) -> dict[str, Any] | None:
        """findUnhappyDependent: the newest False dependent, else the newest Unknown one,
        else an Unknown stand-in while a dependent has never been set."""
        found = [c for c in status.get("conditions") or []
                 if c.get("type") in self.dependents]
        found.sort(key=lambda c: str(c.get("lastTransitionTime") or ""), reverse=True)
        for want in ("False", "Unknown"):
            for c in found:
                if c.get("status") == want:
                    return c
        if len(found) < len(self.dependents):
            return {"status": "Unknown"}
        return None


# KServe v0.16.0 pkg/apis/serving/v1beta1/inference_service_status.go: conditionSet
INFERENCE_SERVICE = LivingSet("Ready", ("PredictorReady", "IngressReady"))
