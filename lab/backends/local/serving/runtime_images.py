"""KServe's serving runtimes as images: a model format the local servers do not load runs
in a container of the image of the runtime KServe would pick.

IMAGES is each ClusterServingRuntime's `kserve-container` as kubeflow/manifests 26.03 ships
it (KServe v0.16.0, kserve-cluster-resources.yaml; tests/unit/test_container_runner.py
compares it with the upstream copy when ../shared is there). The predictor's container is
that container with the model's own fields merged in, as KServe merges them
(pkg/controller/v1beta1/inferenceservice/components/predictor.go `reconcileModel` ->
`utils.MergeRuntimeContainers`: the model's args after the runtime's, env added, resources
and image overriding) and `{{.Name}}` replaced by the service's name
(pkg/controller/v1beta1/inferenceservice/utils/utils.go `ReplacePlaceholders`); the model
is where the storage initializer puts it, /mnt/models.
"""

from __future__ import annotations

import copy
from typing import Any

IMAGES: dict[str, dict[str, Any]] = {
    "kserve-huggingfaceserver": {"image": "kserve/huggingfaceserver:v0.16.0",
                                 "args": ["--model_name={{.Name}}"]},
    "kserve-lgbserver": {"image": "kserve/lgbserver:v0.16.0",
                         "args": ["--model_name={{.Name}}", "--model_dir=/mnt/models",
                                  "--http_port=8080", "--nthread=1"]},
    "kserve-mlserver": {"image": "docker.io/seldonio/mlserver:1.5.0"},
    "kserve-paddleserver": {"image": "kserve/paddleserver:v0.16.0",
                            "args": ["--model_name={{.Name}}", "--model_dir=/mnt/models",
                                     "--http_port=8080"]},
    "kserve-pmmlserver": {"image": "kserve/pmmlserver:v0.16.0",
                          "args": ["--model_name={{.Name}}", "--model_dir=/mnt/models",
                                   "--http_port=8080"]},
    "kserve-sklearnserver": {"image": "kserve/sklearnserver:v0.16.0",
                             "args": ["--model_name={{.Name}}", "--model_dir=/mnt/models",
                                      "--http_port=8080"]},
    "kserve-tensorflow-serving": {"image": "tensorflow/serving:2.6.2",
                                  "command": ["/usr/bin/tensorflow_model_server"],
                                  "args": ["--model_name={{.Name}}", "--port=9000",
                                           "--rest_api_port=8080",
                                           "--model_base_path=/mnt/models",
                                           "--rest_api_timeout_in_ms=60000"]},
    "kserve-torchserve": {"image": "pytorch/torchserve-kfs:0.9.0",
                          "args": ["torchserve", "--start",
                                   "--model-store=/mnt/models/model-store",
                                   "--ts-config=/mnt/models/config/config.properties"]},
    "kserve-tritonserver": {"image": "nvcr.io/nvidia/tritonserver:23.05-py3",
                            "args": ["tritonserver", "--model-store=/mnt/models",
                                     "--grpc-port=9000", "--http-port=8080",
                                     "--allow-grpc=true", "--allow-http=true"]},
    "kserve-xgbserver": {"image": "kserve/xgbserver:v0.16.0",
                         "args": ["--model_name={{.Name}}", "--model_dir=/mnt/models",
                                  "--http_port=8080", "--nthread=1"]},
}
PORT = 8080  # every runtime's REST port (constants.InferenceServiceDefaultHttpPort)


def container(runtime: str, name: str, model: dict[str, Any]) -> dict[str, Any]:
    """The predictor's `kserve-container`: the runtime's, with the model's fields merged."""
    base = copy.deepcopy(IMAGES[runtime])
    out: dict[str, Any] = {"name": "kserve-container", "image": base["image"]}
    if base.get("command"):
        out["command"] = base["command"]
    args = [*base.get("args", []), *[str(a) for a in model.get("args") or []]]
    if args:
        out["args"] = [a.replace("{{.Name}}", name) for a in args]
    env = [e for e in model.get("env") or [] if isinstance(e, dict)]
    if env:
        out["env"] = env
    for key in ("image", "imagePullPolicy", "resources", "command"):
        if model.get(key):
            out[key] = model[key]
    out["ports"] = [{"containerPort": PORT, "protocol": "TCP"}]
    return out


def readiness(name: str, protocol: str) -> dict[str, Any]:
    """KServe's model readiness path for the protocol (what its servers answer)."""
    path = f"/v2/models/{name}/ready" if protocol == "v2" else f"/v1/models/{name}"
    return {"httpGet": {"path": path, "port": PORT}}
