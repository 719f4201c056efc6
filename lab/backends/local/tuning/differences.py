"""Which deliberate local differences (fidelity/rules.py) an Experiment runs into.

Pure: the handler announces what this returns, and the fidelity tests call it on the
same manifests, so a difference is never silent and never claimed without cause.
"""

from __future__ import annotations

from lab.backends.local.tuning import grid
from lab.backends.local.tuning.search import restart_note
from lab.backends.local.tuning.spec import Spec

# Katib v0.19's suggestion service per algorithm (its katib-config), where locally the
# pinned Optuna stands in for another library.
ENGINES = {"random": "katib.algorithm.hyperopt", "tpe": "katib.algorithm.hyperopt",
           "cmaes": "katib.algorithm.goptuna", "sobol": "katib.algorithm.goptuna",
           "bayesianoptimization": "katib.algorithm.skopt"}


def differences(spec: Spec) -> list[tuple[str, dict[str, str]]]:
    """(rule id, values for its announcement) for every difference this spec meets."""
    out: list[tuple[str, dict[str, str]]] = []
    if spec.algorithm in ENGINES:
        out.append((ENGINES[spec.algorithm], {"algorithm": spec.algorithm}))
    if spec.algorithm == "cmaes" and (rule := restart_note(spec.settings)):
        out.append((rule, {"value": spec.settings["restart_strategy"]}))
    if spec.algorithm == "grid" and spec.max_trials is None:
        out.append(("katib.grid.end", {"size": str(grid.size(spec.params))}))
    if spec.collector.kind == "File" and spec.parallel > 1:
        out.append(("katib.collector.file-parallel", {"parallel": str(spec.parallel)}))
    if spec.collector.kind == "TensorFlowEvent" and spec.parallel > 1:
        out.append(("katib.collector.tfevent-parallel", {"parallel": str(spec.parallel)}))
    if spec.warnings:  # fields only a cluster acts on, and settings without an equivalent
        out.append(("katib.trialTemplate.cluster-fields", {"fields": "; ".join(spec.warnings)}))
    return out
