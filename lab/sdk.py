"""The Kubeflow SDK (`pip install 'kflab[sdk]'`) on kflab's local backend.

`trainer_client()` is a `kubeflow.trainer.TrainerClient` whose TrainJobs run locally, multi-
node, as `kflab apply` runs them; against the lab's cluster use the SDK's own
`TrainerClient()` with the lab's kubeconfig, unchanged.
"""

from lab.backends.local.training.sdk import trainer_client

__all__ = ["trainer_client"]
