"""The Kubeflow SDK (kflab's `sdk` extra) with kflab's labs.

`trainer_client()` is a `kubeflow.trainer.TrainerClient` whose TrainJobs run locally, multi-
node, as `kflab apply` runs them; against the lab's cluster use the SDK's own
`TrainerClient()` with the lab's kubeconfig, unchanged. `pip_env()` is what a TrainJob's
nodes need in their environment for a `pip install` inside them to use the lab's package
index (an offline class has no PyPI): give it as `CustomTrainer(env=...)`.
"""

from __future__ import annotations

import os
from pathlib import Path

from lab.backends.local.training.sdk import trainer_client

__all__ = ["pip_env", "trainer_client"]


def pip_env(kubeconfig: str | None = None, context: str | None = None) -> dict[str, str]:
    """PIP_INDEX_URL and PIP_TRUSTED_HOST (pip reads both from the environment) naming the
    index the lab's pipeline steps install from -- $KFLAB_PIP_INDEX_URL, else the class index
    `kflab up --bundle` installed (lab/backends/cluster/pipelines/index.py class_index) --;
    empty when there is none (pip uses PyPI, as on any cluster)."""
    from lab.backends.cluster.pipelines.index import class_index
    from lab.kube.client import connect

    config = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube/config")
    index = class_index(connect(Path(config), context))
    if index is None:
        return {}
    env = {"PIP_INDEX_URL": index.url}
    if index.trusted_hosts:
        env["PIP_TRUSTED_HOST"] = " ".join(index.trusted_hosts)
    return env
