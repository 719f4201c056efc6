"""KServe's data-plane shapes: V1 (`instances` -> `predictions`) and the Open Inference
Protocol V2 (`inputs` tensors -> `outputs` tensors).

Both backends send the same requests, and checks compare predictions without caring which
protocol answered, so the conversions live here, next to the other upstream shapes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.errors import InputError, LabError

PROTOCOLS = ("v1", "v2")


def detect(payload: Any) -> str | None:
    """'v1' or 'v2' from the body's shape, None when it is neither."""
    if isinstance(payload, dict):
        if isinstance(payload.get("instances"), list):
            return "v1"
        inputs = payload.get("inputs")
        if isinstance(inputs, list):
            # V2 tensors are {name, shape, datatype, data}; V1 also has an "inputs" form
            # (columns by name: KServe's lightgbm sample sends {"inputs": [{"col": [..]}]})
            tensors = inputs and all(isinstance(t, dict) and {"name", "datatype"} <= set(t)
                                     for t in inputs)
            return "v2" if tensors or not inputs else "v1"
        if isinstance(inputs, dict):
            return "v1"
    return None


def _shape(value: Any) -> list[int]:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def _flatten(value: Any) -> list[Any]:
    if not isinstance(value, list):
        return [value]
    return [x for item in value for x in _flatten(item)]


def _datatype(flat: list[Any]) -> str:
    if all(isinstance(x, bool) for x in flat):
        return "BOOL"
    if all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        return "INT64"
    if all(isinstance(x, int | float) and not isinstance(x, bool) for x in flat):
        return "FP64"
    if all(isinstance(x, str) for x in flat):
        return "BYTES"
    raise LabError("cannot build a V2 tensor from mixed or nested values",
                   hint='give a V2 body: {"inputs": [{"name", "shape", "datatype", "data"}]}')


def _tensor(t: Any, what: str) -> tuple[list[Any], list[int]]:
    """(data, shape) of a V2 tensor, checked: flat data whose size the shape accounts for."""
    if not isinstance(t, dict):
        raise LabError(f"{what} is not a tensor (a mapping with name, shape, datatype, data)")
    data, shape = t.get("data"), t.get("shape")
    if not isinstance(data, list) or not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise LabError(f"{what} needs 'data' (a flat list) and 'shape' (a list of sizes)")
    size = 1
    for d in shape:
        size *= d
    if shape and size != len(data):
        raise LabError(f"{what}: shape {shape} holds {size} values, data has {len(data)}")
    return data, shape


def _reshape(flat: list[Any], shape: list[int]) -> Any:
    if len(shape) <= 1:
        return list(flat)
    step = len(flat) // shape[0] if shape[0] else 0
    return [_reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def to_v2(instances: list[Any], name: str = "input-0") -> dict[str, Any]:
    """A V2 request holding V1 `instances` as one tensor (rows x features)."""
    flat, shape = _flatten(instances), _shape(instances)
    size = 1
    for d in shape:
        size *= d
    if size != len(flat):
        raise LabError("the instances are not a regular array (rows of different lengths?)",
                       hint="give every row the same number of features")
    return {"inputs": [{"name": name, "shape": shape, "datatype": _datatype(flat),
                        "data": flat}]}


def to_protocol(payload: dict[str, Any], protocol: str) -> dict[str, Any]:
    """The body to send for `protocol`, converting V1 instances <-> a single V2 tensor."""
    have = detect(payload)
    if have is None or not isinstance(payload, dict):
        raise LabError("the request body is neither V1 nor V2",
                       hint='V1: {"instances": [[...], ...]}; '
                            'V2: {"inputs": [{"name": "x", "shape": [1, 4], '
                            '"datatype": "FP32", "data": [...]}]}')
    if have == protocol:
        return payload
    if protocol == "v2":
        if "instances" not in payload:
            raise LabError("a V1 body in the 'inputs' (columns) form has no V2 form here",
                           hint="send it with --protocol v1")
        return to_v2(payload["instances"])
    tensors = payload["inputs"]
    if len(tensors) != 1:
        raise LabError("a V2 request with several input tensors has no V1 form",
                       hint="send it with --protocol v2")
    data, shape = _tensor(tensors[0], "inputs[0]")
    return {"instances": _reshape(data, shape)}


def predictions(response: Any) -> Any:
    """The predictions of a V1 or V2 response (the first output tensor, in its shape)."""
    if isinstance(response, dict) and "predictions" in response:
        return response["predictions"]
    if isinstance(response, dict) and isinstance(response.get("outputs"), list) \
            and response["outputs"]:
        data, shape = _tensor(response["outputs"][0], "outputs[0]")
        return _reshape(data, shape)
    raise LabError("the response has neither 'predictions' (V1) nor 'outputs' (V2)")


def path(protocol: str, model: str) -> str:
    """The REST path for a prediction with KServe's model server."""
    return f"/v1/models/{model}:predict" if protocol == "v1" else f"/v2/models/{model}/infer"


def close(got: Any, want: Any, tolerance: float = 0.0) -> bool:
    """Element-wise equality of nested predictions, numbers within `tolerance`."""
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            close(g, w, tolerance) for g, w in zip(got, want, strict=True))
    if isinstance(want, int | float) and not isinstance(want, bool):
        return (isinstance(got, int | float) and not isinstance(got, bool)
                and abs(got - want) <= tolerance)
    return bool(got == want)


def load_request(path: Path) -> dict[str, Any]:
    """A request body from a JSON (or YAML) file; errors name the file, the line and the fix.
    Read through the one safe loader, bounded by limits.MAX_BODY_BYTES."""
    from lab import limits
    from lab.yamlio import load_data, read_text

    text = read_text(path, limit=limits.MAX_BODY_BYTES, hint="check the path given to -f")
    body = load_data(text, str(path))
    if detect(body) is None:
        field = "inputs" if isinstance(body, dict) and "inputs" in body else "instances"
        raise InputError(str(path), field, "not a V1 or V2 request body",
                         hint='V1: {"instances": [[5.1, 3.5, 1.4, 0.2]]}; V2: {"inputs": '
                              '[{"name": "x", "shape": [1, 4], "datatype": "FP32", '
                              '"data": [5.1, 3.5, 1.4, 0.2]}]}')
    return body
