"""The KFP v2beta1 REST API on the local backend: what `kfp.Client(host=...)` and the KFP UI
call, answered as KFP 2.16's API server answers them (kubeflow/pipelines 2.16.0,
backend/src/apiserver; the files and functions are cited beside each rule).

Pipelines, versions, experiments and recurring runs are small JSON records under
`<state>/kfp-api/` (kfp_store.py); a run is a `PipelineRun` started by `kflab pipeline run`
in a process of its own (the same engine, record and lease as the CLI's, so it shows in
`kflab get runs` and outlives a closed UI), read back in the API's `V2beta1Run` shape.
Lists filter, sort and page as KFP does (kfp_list.py); recurring runs trigger while the
server runs (kfp_recurring.py). Field names and enums follow the 2.16 swagger files; the
tests validate every exchange against them.

One module per resource: kfp_pipelines.py (pipelines, versions, uploads), kfp_runs.py
(experiments and runs), kfp_recurring.py (recurring runs and their scheduler).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import state
from lab.webui.jsonlimit import BodyTooDeep, loads
from lab.webui.kfp_store import ApiError, Records

__all__ = ["PREFIX", "ApiError", "KfpApi"]

PREFIX = "/apis/v2beta1"
ID = r"[\w-]+"


class KfpApi:
    """Answers one request at a time: `handle(method, path, query, content_type, body)`.
    `start()` starts the recurring runs' scheduler, `close()` stops it."""

    def __init__(self, root: Path, backend: Any, namespace: str = "default") -> None:
        from lab.webui.kfp_pipelines import Pipelines
        from lab.webui.kfp_recurring import RecurringRuns
        from lab.webui.kfp_runs import Experiments, Runs

        self.root = Path(root)
        self.backend = backend
        self.namespace = namespace
        self.dir = state.path(self.root, "kfp-api")
        self.records = Records(self.dir)
        self.lock = threading.RLock()  # one write at a time: names stay unique
        self.pipelines = Pipelines(self)
        self.experiments = Experiments(self)
        self.runs = Runs(self)
        self.recurring = RecurringRuns(self)
        p, e, r, rr = self.pipelines, self.experiments, self.runs, self.recurring
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
            (verb, re.compile(pattern), fn) for verb, pattern, fn in [
                ("GET", r"/healthz", self.healthz),
                ("POST", r"/pipelines/upload", p.upload),
                ("POST", r"/pipelines/upload_version", p.upload_version),
                ("POST", r"/pipelines/create", p.create_with_version),
                ("GET", r"/pipelines", p.list),
                ("POST", r"/pipelines", p.create),
                ("GET", r"/pipelines/names/(?P<name>[^/]+)", p.get_by_name),
                ("GET", rf"/pipelines/(?P<pid>{ID})", p.get),
                ("DELETE", rf"/pipelines/(?P<pid>{ID})", p.delete),
                ("GET", rf"/pipelines/(?P<pid>{ID})/versions", p.list_versions),
                ("POST", rf"/pipelines/(?P<pid>{ID})/versions", p.create_version),
                ("GET", rf"/pipelines/(?P<pid>{ID})/versions/(?P<vid>{ID})", p.get_version),
                ("DELETE", rf"/pipelines/(?P<pid>{ID})/versions/(?P<vid>{ID})",
                 p.delete_version),
                ("POST", r"/experiments", e.create),
                ("GET", r"/experiments", e.list),
                ("GET", rf"/experiments/(?P<eid>{ID})", e.get),
                ("DELETE", rf"/experiments/(?P<eid>{ID})", e.delete),
                ("POST", rf"/experiments/(?P<eid>{ID}):archive", e.archive),
                ("POST", rf"/experiments/(?P<eid>{ID}):unarchive", e.unarchive),
                ("POST", r"/runs", r.create),
                ("GET", r"/runs", r.list),
                ("GET", rf"/runs/(?P<rid>{ID})", r.get),
                ("DELETE", rf"/runs/(?P<rid>{ID})", r.delete),
                ("POST", rf"/runs/(?P<rid>{ID}):archive", r.archive),
                ("POST", rf"/runs/(?P<rid>{ID}):unarchive", r.unarchive),
                ("POST", rf"/runs/(?P<rid>{ID}):terminate", r.terminate),
                ("POST", rf"/runs/(?P<rid>{ID}):retry", r.retry),
                ("POST", r"/recurringruns", rr.create),
                ("GET", r"/recurringruns", rr.list),
                ("GET", rf"/recurringruns/(?P<jid>{ID})", rr.get),
                ("DELETE", rf"/recurringruns/(?P<jid>{ID})", rr.delete),
                ("POST", rf"/recurringruns/(?P<jid>{ID}):enable", rr.enable),
                ("POST", rf"/recurringruns/(?P<jid>{ID}):disable", rr.disable),
            ]]

    def start(self) -> KfpApi:
        self.recurring.start()
        return self

    def close(self) -> None:
        self.recurring.stop()

    # -- dispatch ---------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], content_type: str,
               body: bytes) -> tuple[int, dict[str, Any]]:
        sub = path[len(PREFIX):] if path.startswith(PREFIX) else None
        known = False
        for verb, pattern, fn in self.routes if sub is not None else []:
            m = pattern.fullmatch(sub.rstrip("/") or "/")
            if not m:
                continue
            known = True
            if verb != method:
                continue
            try:
                if method == "GET":
                    return 200, fn(query=query, content_type=content_type, body=body,
                                   **m.groupdict())
                with self.lock:
                    return 200, fn(query=query, content_type=content_type, body=body,
                                   **m.groupdict())
            except ApiError as exc:
                return exc.http, exc.body()
        err = ApiError(405 if known else 404,
                       f"{method} {path}: not served by kflab's local KFP API"
                       if not known else f"{method} not allowed on {path}")
        return err.http, err.body()

    # -- shared helpers ---------------------------------------------------------------------

    @staticmethod
    def json_body(body: bytes, allowed: tuple[str, ...] = ()) -> dict[str, Any]:
        """A request's JSON object: depth and size checked before it is parsed (jsonlimit),
        fields checked as grpc-gateway's protojson checks them (DiscardUnknown: false,
        apiserver/common/utils.go CustomMarshaler); camelCase names are read as the proto
        names they stand for."""
        try:
            data = loads(body or b"{}")
        except BodyTooDeep as exc:
            raise ApiError(400, f"the request body is not JSON kflab reads: {exc}") from None
        except ValueError as exc:
            raise ApiError(400, f"the request body is not JSON: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object")
        data = {_snake(k): v for k, v in data.items()}
        for name in data:
            if allowed and name not in allowed:
                raise ApiError(400, f'proto: unknown field "{name}"')
        return data

    # -- health -----------------------------------------------------------------------------

    def healthz(self, **_: Any) -> dict[str, Any]:
        """apiserver/main.go's healthz handler writes these four fields (commit_sha and
        tag_name from its build's env, "unknown" without; the swagger lists the last two):
        the tag is the KFP API version answered here."""
        return {"commit_sha": "unknown", "tag_name": "2.16.0", "multi_user": False,
                "pipeline_store": "database"}

    # -- what the UI's views read -----------------------------------------------------------

    def dag_of(self, name: str) -> dict[str, list[str]] | None:
        """{task: [upstream tasks]} of the root DAG of the spec a run of this API ran."""
        return self.runs.dag_of(name)

    def run_name(self, rid: str) -> str | None:
        """The PipelineRun behind a KFP run id (the UI's `#/runs/details/ID` links)."""
        return self.runs.name_of(rid)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), name)
