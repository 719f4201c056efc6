"""Read a KFP run's task outputs from ML Metadata (MLMD's gRPC MetadataStoreService).

KFP keeps what a task produced in MLMD, not in its REST API (KFP 2.16's run task_details are
Argo nodes with no execution id and no outputs): the run's executions are found through its
context (type system.PipelineRun, named by the run id), as KFP's UI finds them; each carries
its output parameters in the custom property `outputs` (a Struct) and its name in
`display_name`/`task_name`; each output artifact hangs off the execution by an OUTPUT event
whose path's first step key is the output's name; an artifact has its `uri` (in the object
store), its type name (system.Model, system.Metrics...) and its metadata as custom properties
(a Metrics artifact's metric values among them).

The messages below are kflab's own minimal definitions of the few MLMD messages it reads,
with the field numbers of ml-metadata's metadata_store.proto / metadata_store_service.proto
(package ml_metadata, as vendored in kubeflow/pipelines 2.16.0 third_party/ml-metadata); the
`ml-metadata` package is not used: its newest release (1.17.1) has no wheel for CPython
3.12 or later and pins protobuf<5. Unknown fields are skipped by protobuf, so the real
server's fuller messages decode. Built at runtime: no generated code, no extra package.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from lab.errors import LabError

SERVICE = "ml_metadata.MetadataStoreService"
RUN_CONTEXT_TYPE = "system.PipelineRun"  # backend/src/v2/metadata/client.go, KFP 2.16.0
OUTPUT_EVENT = 4  # Event.Type OUTPUT

_I64, _DBL, _STR, _BOOL, _MSG, _ENUMISH, _I32 = 3, 1, 9, 8, 11, 5, 5  # FieldDescriptorProto types
_OPT, _REP = 1, 3


def _fields(msg: Any, spec: list[tuple[str, int, int, int, str | None, int | None]]) -> None:
    for name, number, ftype, label, type_name, oneof in spec:
        f = msg.field.add(name=name, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof


def _map_entry(parent: Any, name: str, value_type: str) -> str:
    entry = parent.nested_type.add(name=name)
    entry.options.map_entry = True
    _fields(entry, [("key", 1, _STR, _OPT, None, None),
                    ("value", 2, _MSG, _OPT, value_type, None)])
    return name


@functools.cache
def messages() -> dict[str, Any]:
    """name -> message class for the MLMD messages kflab reads (and its stand-in serves)."""
    from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, struct_pb2
    from google.protobuf.message_factory import GetMessageClass

    pool = descriptor_pool.DescriptorPool()
    for dep in (struct_pb2, any_pb2):
        pool.AddSerializedFile(dep.DESCRIPTOR.serialized_pb)
    f = descriptor_pb2.FileDescriptorProto(name="kflab/mlmd_min.proto", package="ml_metadata",
                                           syntax="proto2",
                                           dependency=["google/protobuf/struct.proto",
                                                       "google/protobuf/any.proto"])
    value = f.message_type.add(name="Value")
    value.oneof_decl.add(name="value")
    _fields(value, [("int_value", 1, _I64, _OPT, None, 0), ("double_value", 2, _DBL, _OPT,
                                                             None, 0),
                    ("string_value", 3, _STR, _OPT, None, 0),
                    ("struct_value", 4, _MSG, _OPT, ".google.protobuf.Struct", 0),
                    ("proto_value", 5, _MSG, _OPT, ".google.protobuf.Any", 0),
                    ("bool_value", 6, _BOOL, _OPT, None, 0)])
    art = f.message_type.add(name="Artifact")
    props = _map_entry(art, "PropertiesEntry", ".ml_metadata.Value")
    custom = _map_entry(art, "CustomPropertiesEntry", ".ml_metadata.Value")
    _fields(art, [("id", 1, _I64, _OPT, None, None), ("type_id", 2, _I64, _OPT, None, None),
                  ("uri", 3, _STR, _OPT, None, None),
                  ("properties", 4, _MSG, _REP, f".ml_metadata.Artifact.{props}", None),
                  ("custom_properties", 5, _MSG, _REP,
                   f".ml_metadata.Artifact.{custom}", None),
                  ("state", 6, _ENUMISH, _OPT, None, None), ("name", 7, _STR, _OPT, None, None),
                  ("type", 8, _STR, _OPT, None, None)])
    exe = f.message_type.add(name="Execution")
    props = _map_entry(exe, "PropertiesEntry", ".ml_metadata.Value")
    custom = _map_entry(exe, "CustomPropertiesEntry", ".ml_metadata.Value")
    _fields(exe, [("id", 1, _I64, _OPT, None, None), ("type_id", 2, _I64, _OPT, None, None),
                  ("last_known_state", 3, _ENUMISH, _OPT, None, None),
                  ("properties", 4, _MSG, _REP, f".ml_metadata.Execution.{props}", None),
                  ("custom_properties", 5, _MSG, _REP,
                   f".ml_metadata.Execution.{custom}", None),
                  ("name", 6, _STR, _OPT, None, None), ("type", 7, _STR, _OPT, None, None)])
    event = f.message_type.add(name="Event")
    path = event.nested_type.add(name="Path")
    step = path.nested_type.add(name="Step")
    step.oneof_decl.add(name="value")
    _fields(step, [("index", 1, _I64, _OPT, None, 0), ("key", 2, _STR, _OPT, None, 0)])
    _fields(path, [("steps", 1, _MSG, _REP, ".ml_metadata.Event.Path.Step", None)])
    _fields(event, [("artifact_id", 1, _I64, _OPT, None, None),
                    ("execution_id", 2, _I64, _OPT, None, None),
                    ("path", 3, _MSG, _OPT, ".ml_metadata.Event.Path", None),
                    ("type", 4, _ENUMISH, _OPT, None, None),
                    ("milliseconds_since_epoch", 5, _I64, _OPT, None, None)])
    ctx = f.message_type.add(name="Context")
    props = _map_entry(ctx, "PropertiesEntry", ".ml_metadata.Value")
    custom = _map_entry(ctx, "CustomPropertiesEntry", ".ml_metadata.Value")
    _fields(ctx, [("id", 1, _I64, _OPT, None, None), ("type_id", 2, _I64, _OPT, None, None),
                  ("name", 3, _STR, _OPT, None, None),
                  ("properties", 4, _MSG, _REP, f".ml_metadata.Context.{props}", None),
                  ("custom_properties", 5, _MSG, _REP, f".ml_metadata.Context.{custom}",
                   None),
                  ("type", 6, _STR, _OPT, None, None)])
    _fields(f.message_type.add(name="ListOperationOptions"),
            [("max_result_size", 1, _I32, _OPT, None, None),
             ("next_page_token", 3, _STR, _OPT, None, None)])
    _fields(f.message_type.add(name="GetContextByTypeAndNameRequest"),
            [("type_name", 1, _STR, _OPT, None, None),
             ("context_name", 2, _STR, _OPT, None, None)])
    _fields(f.message_type.add(name="GetContextByTypeAndNameResponse"),
            [("context", 1, _MSG, _OPT, ".ml_metadata.Context", None)])
    _fields(f.message_type.add(name="GetExecutionsByContextRequest"),
            [("context_id", 1, _I64, _OPT, None, None),
             ("options", 2, _MSG, _OPT, ".ml_metadata.ListOperationOptions", None)])
    _fields(f.message_type.add(name="GetExecutionsByContextResponse"),
            [("executions", 1, _MSG, _REP, ".ml_metadata.Execution", None),
             ("next_page_token", 2, _STR, _OPT, None, None)])
    for req, resp, ids, items, item in (
            ("GetExecutionsByIDRequest", "GetExecutionsByIDResponse", "execution_ids",
             "executions", "Execution"),
            ("GetArtifactsByIDRequest", "GetArtifactsByIDResponse", "artifact_ids",
             "artifacts", "Artifact"),
            ("GetEventsByExecutionIDsRequest", "GetEventsByExecutionIDsResponse",
             "execution_ids", "events", "Event")):
        _fields(f.message_type.add(name=req), [(ids, 1, _I64, _REP, None, None)])
        _fields(f.message_type.add(name=resp),
                [(items, 1, _MSG, _REP, f".ml_metadata.{item}", None)])
    pool.Add(f)
    return {m.name: GetMessageClass(pool.FindMessageTypeByName(f"ml_metadata.{m.name}"))
            for m in f.message_type}


RPCS = {"GetContextByTypeAndName": ("GetContextByTypeAndNameRequest",
                                    "GetContextByTypeAndNameResponse"),
        "GetExecutionsByContext": ("GetExecutionsByContextRequest",
                                   "GetExecutionsByContextResponse"),
        "GetExecutionsByID": ("GetExecutionsByIDRequest", "GetExecutionsByIDResponse"),
        "GetArtifactsByID": ("GetArtifactsByIDRequest", "GetArtifactsByIDResponse"),
        "GetEventsByExecutionIDs": ("GetEventsByExecutionIDsRequest",
                                    "GetEventsByExecutionIDsResponse")}


def plain(value: Any) -> Any:
    """An MLMD Value as a Python value."""
    from google.protobuf.json_format import MessageToDict

    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "struct_value":
        return MessageToDict(value.struct_value)
    if kind == "proto_value":
        return MessageToDict(value.proto_value)
    return getattr(value, kind)


def artifact_value(value: Any) -> Any:
    """An artifact's metadata value as the component wrote it: the launcher stores a list
    as the struct {"list": [...]} and an object as the struct {"struct": {...}} (KFP 2.16.0
    backend/src/v2/metadata/converter.go:153-166 StructValueToMLMDValue), which kflab
    unwraps so that a run's artifact metadata reads the same on both backends. Booleans stay
    0/1 and numbers floats: MLMD keeps no more than that (:149-152)."""
    out = plain(value)
    if value.WhichOneof("value") == "struct_value" and isinstance(out, dict) and \
            len(out) == 1:
        (key, inner), = out.items()
        if (key == "list" and isinstance(inner, list)) or \
                (key == "struct" and isinstance(inner, dict)):
            return inner
    return out


@dataclass
class TaskOutputs:
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> type/uri/meta


class Mlmd:
    """A MetadataStoreService client on `target` (host:port, a port-forward here)."""

    def __init__(self, target: str, timeout: float = 20.0) -> None:
        import grpc

        self.channel = grpc.insecure_channel(target)
        self.timeout = timeout
        self.msgs = messages()

    def close(self) -> None:
        self.channel.close()

    def _call(self, rpc: str, **fields: Any) -> Any:
        import grpc

        req_name, resp_name = RPCS[rpc]
        stub = self.channel.unary_unary(
            f"/{SERVICE}/{rpc}", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=self.msgs[resp_name].FromString)
        try:
            return stub(self.msgs[req_name](**fields), timeout=self.timeout)
        except grpc.RpcError as exc:
            raise LabError(f"ML Metadata {rpc}: {exc.code().name}: {exc.details()}",
                           hint="is metadata-grpc-deployment running? `kflab status`") from None

    def run_executions(self, run_id: str) -> dict[str, int]:
        """task name -> execution id of the run's tasks, found as KFP's UI finds them
        (frontend/src/mlmd/MlmdUtils.ts getKfpV2RunContext, getExecutionsFromContext; the
        task's execution by its `task_name`, lib/v2/DynamicFlow.ts): the driver puts every
        execution in the context of type system.PipelineRun named by the run id
        (backend/src/v2/metadata/client.go GetPipeline, CreateExecution). A sub-DAG has a
        DAG execution under its task name too; a container task's execution is the one with a
        `pod_name` (CreateExecution sets it for system.ContainerExecution only)."""
        found = self._call("GetContextByTypeAndName", type_name=RUN_CONTEXT_TYPE,
                           context_name=run_id)
        if not found.HasField("context") or not found.context.id:
            return {}
        executions, token = [], ""
        while True:
            opts = self.msgs["ListOperationOptions"](max_result_size=100)
            if token:
                opts.next_page_token = token
            page = self._call("GetExecutionsByContext", context_id=found.context.id,
                              options=opts)
            executions += list(page.executions)
            token = page.next_page_token
            if not token:
                break
        out: dict[str, int] = {}
        container: set[str] = set()
        for exe in sorted(executions, key=lambda e: e.id):
            name = plain(exe.custom_properties["task_name"]) \
                if "task_name" in exe.custom_properties else None
            if not name:  # the root DAG's execution has no task name
                continue
            is_container = "pod_name" in exe.custom_properties
            if name not in out or (is_container and name not in container):
                out[str(name)] = exe.id
            if is_container:
                container.add(str(name))
        return out

    def outputs(self, execution_ids: list[int]) -> dict[int, TaskOutputs]:
        """execution id -> its output parameters and output artifacts."""
        ids = [int(i) for i in execution_ids if int(i)]
        if not ids:
            return {}
        out = {i: TaskOutputs() for i in ids}
        for exe in self._call("GetExecutionsByID", execution_ids=ids).executions:
            params = exe.custom_properties.get("outputs")
            if params is not None and exe.id in out:
                value = plain(params)
                out[exe.id].parameters = dict(value) if isinstance(value, dict) else {}
        events = [e for e in self._call("GetEventsByExecutionIDs", execution_ids=ids).events
                  if e.type == OUTPUT_EVENT and e.path.steps]
        arts = {}
        if events:
            found = self._call("GetArtifactsByID",
                               artifact_ids=sorted({e.artifact_id for e in events}))
            arts = {a.id: a for a in found.artifacts}
        for e in events:
            art = arts.get(e.artifact_id)
            if art is None or e.execution_id not in out:
                continue
            meta = {k: artifact_value(v) for k, v in art.custom_properties.items()}
            out[e.execution_id].artifacts[e.path.steps[0].key] = {
                "type": art.type or "system.Artifact", "uri": art.uri, "metadata": meta}
        return out
