"""The ClusterTrainingRuntimes kubeflow/manifests 26.03 ships (Kubeflow Trainer v2.1.0), as facts.

A TrainJob names its runtime (`spec.runtimeRef`); on a cluster the runtime is an object the
manifests install. Locally there is no such object, so this table says what each shipped
runtime is -- its ML policy defaults (mlPolicy.numNodes, mlPolicy.torch.numProcPerNode), its
replicated Jobs in order (what jobsStatus lists) and the container that runs the trainer --
or why kflab's local backend cannot run it. Facts read from the manifests'
applications/trainer/upstream/base/runtimes/*.yaml (tests/unit/test_trainjob_local.py checks
them against the upstream copy when it is present).
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "trainer.kubeflow.org"
CLUSTER_RUNTIME = "ClusterTrainingRuntime"


@dataclass(frozen=True)
class Runtime:
    name: str
    framework: str  # the trainer.kubeflow.org/framework label
    num_nodes: int  # mlPolicy.numNodes
    nproc_per_node: str | None  # mlPolicy.torch.numProcPerNode (None: not a torch policy)
    replicated_jobs: tuple[str, ...]  # spec.template.spec.replicatedJobs[].name, in order
    refused: str | None = None  # why the local backend cannot run it
    image: str | None = None  # the `node` container's image (what the SDK shows)


_MPI = ("it is an MPI runtime: its launcher starts the nodes' processes with mpirun over "
        "SSH (an sshd in each node's container, keys in a Secret), which the local backend "
        "does not provide")
_TUNE = ("it is a torchtune LLM fine-tuning runtime: its dataset and model initializers "
         "download from Hugging Face into a shared volume and the trainer runs the "
         "torchtune image's `tune run` recipe on GPUs, none of which the local backend has")

SHIPPED: dict[str, Runtime] = {r.name: r for r in (
    Runtime("torch-distributed", "torch", 1, "auto", ("node",),
            image="pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"),
    Runtime("deepspeed-distributed", "deepspeed", 1, None, ("launcher", "node"), _MPI),
    Runtime("mlx-distributed", "mlx", 1, None, ("launcher", "node"), _MPI),
    Runtime("torchtune-llama3.2-1b", "torchtune", 1, "auto",
            ("dataset-initializer", "model-initializer", "node"), _TUNE),
    Runtime("torchtune-llama3.2-3b", "torchtune", 1, "auto",
            ("dataset-initializer", "model-initializer", "node"), _TUNE),
    Runtime("torchtune-qwen2.5-1.5b", "torchtune", 1, "auto",
            ("dataset-initializer", "model-initializer", "node"), _TUNE),
)}
