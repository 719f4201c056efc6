"""The backend seam: one small interface, the same inputs and status shape on every backend.

Inputs are Kubernetes manifests (Katib Experiment, PyTorchJob, InferenceService) and KFP
pipeline runs; outputs are the objects with the upstream controller's own `status`. Checks
read only that shape, so scenarios never know which backend they run on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol


class Backend(Protocol):
    name: str
    root: Path  # the state folder: every file the backend writes (records, artifacts) is in it

    def apply(self, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict[str, Any]:
        """Create or replace the resource and run it; return the object with its status.

        `base_dir` resolves relative paths in the manifest (e.g. a pipeline file).
        """
        ...

    def validate(self, obj: dict[str, Any], *, base_dir: Path) -> Any:
        """Check the resource as `apply` would, with no side effect; raise InputError or
        LabError naming the field. Called on every document before any is applied."""
        ...

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        ...

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        ...

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        """Delete the resource and stop whatever runs for it; False if it did not exist."""
        ...

    def logs(
        self, kind: str, name: str, namespace: str = "default", replica: str | None = None
    ) -> Iterator[str]:
        ...

    def predict(
        self, name: str, payload: dict[str, Any], namespace: str = "default", protocol: str = "v1"
    ) -> dict[str, Any]:
        ...

    def gpus(self) -> list[str]:
        """GPU ids that workloads on this backend can be given (empty without a GPU)."""
        ...

    def down(self) -> list[str]:
        """Stop every long-lived process the backend started; return what was stopped."""
        ...

