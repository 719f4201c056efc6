"""The local KFP API's records and errors.

Records: pipelines, versions, experiments, the API's runs and recurring runs are small JSON
files under `<state>/kfp-api/<kind>/<id>.json`, written atomically (state.write_json).

Errors are answered as KFP's API server answers them: its `util.UserError` keeps an internal
message (wrapped by each caller: "Failed to ...: ...") and a user-facing one; grpc-gateway
v2 writes a google.rpc.Status whose `message` is the internal one, with the user-facing one
as a google.rpc.Status in `details` (common/util/error.go UserError.GRPCStatus), under the
HTTP status grpc-gateway maps the gRPC code to (runtime.HTTPStatusFromCode).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import state

# grpc-gateway runtime.HTTPStatusFromCode, for the codes KFP uses
HTTP_OF_CODE = {2: 500, 3: 400, 5: 404, 6: 409, 7: 403, 9: 400, 10: 409, 12: 501, 13: 500,
                14: 503, 16: 401}
CODE_OF_HTTP = {400: 3, 403: 7, 404: 5, 405: 12, 409: 6, 413: 8, 501: 12, 500: 13}


class ApiError(Exception):
    """An error answered as google.rpc.Status. `ApiError(http, message)` is kflab's own
    refusal (one message); the constructors below build KFP's."""

    def __init__(self, http: int, message: str, *, external: str | None = None,
                 code: int | None = None) -> None:
        super().__init__(message)
        self.http = http
        self.code = code if code is not None else CODE_OF_HTTP.get(http, 13)
        self.external = external if external is not None else message

    def wrap(self, message: str) -> ApiError:
        """util.Wrap: the caller's words before the internal message."""
        return ApiError(self.http, f"{message}: {self}", external=self.external,
                        code=self.code)

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), "details": [
            {"@type": "type.googleapis.com/google.rpc.Status", "code": self.code,
             "message": self.external}]}


def kfp_error(code: int, internal: str, external: str) -> ApiError:
    return ApiError(HTTP_OF_CODE.get(code, 500), internal, external=external, code=code)


def invalid(message: str) -> ApiError:
    """util.NewInvalidInputError."""
    return kfp_error(3, f"Invalid input error: {message}", message)


def not_found(kind: str, name: str) -> ApiError:
    """util.NewResourceNotFoundError."""
    return kfp_error(5, f"ResourceNotFoundError: {kind} {name} not found",
                     f"{kind} {name} not found")


def already_exists(message: str) -> ApiError:
    """util.NewAlreadyExistError."""
    return kfp_error(6, f"Already exist error: {message}", message)


def failed_precondition(cause: str, message: str) -> ApiError:
    """util.NewFailedPreconditionError(errors.New(cause), message)."""
    return kfp_error(9, f"FailedPreconditionError: {message}: {cause}", message)


def bad_request(cause: ApiError, message: str) -> ApiError:
    """util.NewBadRequestError(cause, message): gRPC Aborted, HTTP 409."""
    return kfp_error(10, f"BadRequestError: {message}: {cause}", message)


def internal(cause: str, message: str) -> ApiError:
    """util.NewInternalServerError."""
    return kfp_error(13, f"InternalServerError: {message}: {cause}", "Internal Server Error")


def unimplemented(message: str) -> ApiError:
    return kfp_error(12, message, message)


def list_error(exc: Any) -> ApiError:
    """A kfp_list.ListError as the API's error."""
    return ApiError(exc.http, str(exc), external=exc.external, code=exc.code)


def listed(key: str, page: list[dict[str, Any]], total: int, token: str) -> dict[str, Any]:
    """A List*Response as grpc-gateway writes it (EmitUnpopulated false: an empty list, a
    zero total and an empty token are left out)."""
    out: dict[str, Any] = {}
    if page:
        out[key] = page
    if total:
        out["total_size"] = total
    if token:
        out["next_page_token"] = token
    return out


def new_id() -> str:
    return str(uuid.uuid4())


# The fields every reader of a record indexes, per record folder.
KEYS = {"runs": ("run_id", "name", "display_name"),
        "experiments": ("experiment_id", "display_name"),
        "pipelines": ("pipeline_id", "name", "display_name"),
        "versions": ("pipeline_version_id", "pipeline_id"),
        "recurringruns": ("recurring_run_id", "display_name")}


def _shape(what: str) -> Callable[[Any], str | None]:
    def problem(data: Any) -> str | None:
        bad = [k for k in KEYS.get(what, ()) if not isinstance(data.get(k), str)]
        return f"{', '.join(bad)}: missing or not text" if bad else None
    return problem


class Records:
    """The JSON records of one kind folder per resource."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder

    def path(self, what: str, rid: str) -> Path:
        return state.path(self.dir, what, f"{rid}.json")

    def get(self, what: str, rid: str) -> dict[str, Any] | None:
        try:
            return state.read_json(self.path(what, rid), check=_shape(what))
        except state.StateError:
            return None  # a damaged record (moved aside as NAME.corrupt) is not there

    def put(self, what: str, record: dict[str, Any], rid: str) -> None:
        state.write_json(self.path(what, rid), record)

    def drop(self, what: str, rid: str) -> bool:
        target = self.path(what, rid)
        return state.remove(self.dir, target) if target.exists() else False

    def all(self, what: str) -> list[dict[str, Any]]:
        folder = self.dir / what
        out = []
        for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:  # a damaged record (moved aside as NAME.corrupt) is left out of the list
                found = state.read_json(p, check=_shape(what))
            except state.StateError:
                continue
            if found:
                out.append(found)
        return sorted(out, key=lambda o: o.get("created_at", ""))
