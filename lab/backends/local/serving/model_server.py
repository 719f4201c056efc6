"""The local model server process: KServe's own ModelServer, bound to loopback.

    python -m lab.backends.local.serving.model_server --name NAME --format sklearn \
        --runtime kserve-sklearnserver --model-dir DIR --ready-file FILE [--grpc]

kserve 0.21 hard-codes the all-interfaces address for REST and the IPv6 wildcard for
gRPC. `LoopbackModelServer` keeps
KServe's data plane, endpoints, model repository and signal handling, and differs in one
thing: the listeners it builds bind 127.0.0.1. The REST port is 0, so the kernel hands out a
free one (a busy port can never be picked, and there is no window between choosing a port
and binding it); the bound port is written to the ready file once uvicorn listens.
A model that fails to load is reported in the same file ({"state": "FailedToLoad",
"error": ...}) before the process exits 1, so the status can carry the server's own error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from lab.backends.local.procs import LOOPBACK
from lab.backends.local.serving.runtimes import LOCAL


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m lab.backends.local.serving.model_server")
    p.add_argument("--name", required=True, help="model name (the InferenceService name)")
    p.add_argument("--format", required=True, choices=("sklearn", "xgboost", "lightgbm"))
    p.add_argument("--model-dir", required=True, type=Path)
    p.add_argument("--runtime", required=True, choices=tuple(LOCAL),
                   help="the KServe runtime whose file rule applies")
    p.add_argument("--ready-file", required=True, type=Path)
    p.add_argument("--port", type=int, default=0, help="REST port (0: any free port)")
    p.add_argument("--grpc", action="store_true", help="also serve gRPC (V2) on loopback")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = _args(sys.argv[1:] if argv is None else argv)
    # kserve parses sys.argv when imported (parse_known_args, with prefix matching): give it
    # nothing of ours to misread.
    sys.argv = sys.argv[:1]
    from lab.backends.local.serving.models import MODEL_CLASSES

    model = MODEL_CLASSES[opts.format](opts.name, opts.model_dir, opts.runtime)
    try:
        model.load()
    except Exception as exc:
        traceback.print_exc()
        _write(opts.ready_file, {"state": "FailedToLoad", "pid": os.getpid(), "error": (
            f"failed to load the {opts.format} model from {opts.model_dir}: "
            f"{type(exc).__name__}: {load_error(exc)}")})
        return 1
    server_cls, _ = server_classes()
    server = server_cls(opts.ready_file, http_port=opts.port, enable_grpc=opts.grpc,
                        grpc_port=0, grace_period=3)
    server.start([model])
    return 0


def load_error(exc: BaseException) -> str:
    """The reason a model did not load, without a native library's stack: xgboost's
    errors carry `[time] src/file.cc:line: ... Stack trace: [bt] ...` frames that mean
    nothing to a learner (the full text stays in the server's log)."""
    text = str(exc).split("\nStack trace:", 1)[0].strip()
    text = re.sub(r"^\[[0-9:]+\] \S+:\d+: ", "", text)
    return text.splitlines()[-1] if text else type(exc).__name__


def _exit_now(code: int) -> None:
    """Leave without interpreter finalization: garbage-collecting kserve's large module
    graph at exit takes seconds, which every `kflab delete` and re-apply would wait for."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def server_classes() -> tuple[type, type]:
    """(LoopbackModelServer, LoopbackGRPCServer), built lazily: kserve is slow to import."""
    from kserve import ModelServer
    from kserve.constants.constants import FASTAPI_APP_IMPORT_STRING
    from kserve.protocol.grpc.server import GRPCServer
    from kserve.protocol.rest.server import RESTServer

    class LoopbackGRPCServer(GRPCServer):
        """KServe's gRPC inference service (V2), listening on 127.0.0.1, not the IPv6 wildcard."""

        bound_port = 0

        async def start(self, max_workers: int) -> None:
            from concurrent.futures import ThreadPoolExecutor

            from grpc import aio
            from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc
            from kserve.protocol.grpc.interceptors import (
                ExceptionToStatusInterceptor,
                LoggingInterceptor,
            )
            from kserve.protocol.grpc.servicer import InferenceServicer

            self._server = aio.server(
                ThreadPoolExecutor(max_workers=max_workers),
                interceptors=(LoggingInterceptor(), ExceptionToStatusInterceptor()))
            grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(
                InferenceServicer(self._data_plane, self._model_repository_extension),
                self._server)
            self.bound_port = self._server.add_insecure_port(f"{LOOPBACK}:{self._port}")
            await self._server.start()
            await self._server.wait_for_termination()

    class LoopbackModelServer(ModelServer):
        """ModelServer whose REST (and optional gRPC) listeners bind loopback only."""

        def __init__(self, ready_file: Path, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.ready_file = ready_file

        def start(self, models: list[Any]) -> None:
            self._register_and_check_atleast_one_model_is_ready(models)
            self._rest_server = RESTServer(
                FASTAPI_APP_IMPORT_STRING, self.dataplane, self.model_repository_extension,
                self.http_port, access_log_format=self.access_log_format, workers=1,
                grace_period=self.grace_period, event_loop=self.event_loop,
                timeout_keep_alive=self.timeout_keep_alive,
            )
            self._rest_server.config.host = LOOPBACK
            self.servers.append(self._rest_server.start())
            if self.enable_grpc:
                self._grpc_server = LoopbackGRPCServer(
                    self.grpc_port, self.dataplane, self.model_repository_extension,
                    kwargs={}, grace_period=self.grace_period)
                self.servers.append(self._grpc_server.start(self.max_threads))
            self.servers.append(self._announce())
            self.setup_event_loop()
            self.register_signal_handler()
            asyncio.run(self._serve())

        async def _announce(self) -> None:
            """Write the bound ports once uvicorn (and gRPC) listen. kserve keeps the uvicorn
            server in `_server` (pinned kserve==0.21.0)."""
            uv = self._rest_server._server
            while not uv.started or (self._grpc_server and not self._grpc_server.bound_port):
                if uv.should_exit:
                    return
                await asyncio.sleep(0.02)
            port = uv.servers[0].sockets[0].getsockname()[1]
            info: dict[str, Any] = {"state": "Loaded", "pid": os.getpid(), "host": LOOPBACK,
                                    "port": port}
            if self._grpc_server:
                info["grpc_port"] = self._grpc_server.bound_port
            _write(self.ready_file, info)

    return LoopbackModelServer, LoopbackGRPCServer


if __name__ == "__main__":
    _exit_now(main())
