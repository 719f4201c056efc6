"""The InferenceService try-it form's one write: a V1 or V2 prediction request, sent to the
service's local model server through the backend's own `predict` (what `kflab predict` uses),
so the page sees exactly what the CLI and the labs' `http-predict` checks see.

The server lets this request through only with the token, from its own Origin, with the CSRF
token bound to the page's session (server.py); here the body and the target are checked."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from urllib.parse import urlsplit

from lab.errors import LabError
from lab.kube import inference

MAX_REQUEST = 1024 * 1024  # a form's request; `kflab predict` takes files up to 32 MiB
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def csrf_for(secret: bytes, session: str) -> str:
    """The CSRF token of one browser session: only this server (it alone has `secret`) can
    make it, and it is worthless with another session's cookie."""
    return hmac.new(secret, b"csrf:" + session.encode(), hashlib.sha256).hexdigest()


def csrf_ok(secret: bytes, session: str | None, given: str | None) -> bool:
    return bool(session) and bool(given) and hmac.compare_digest(
        csrf_for(secret, session or ""), given or "")


def predict(backend: Any, name: str, raw: bytes, protocol: str | None
            ) -> tuple[int, dict[str, Any]]:
    """(HTTP status, answer) for one request from the form."""
    if len(raw) > MAX_REQUEST:
        return 413, {"message": "the request is over 1 MiB: use `kflab predict NAME -f FILE`"}
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        return 400, {"message": f"the request is not JSON: {str(exc)[:200]}"}
    except RecursionError:
        return 400, {"message": "the request is nested too deeply"}
    if protocol not in (None, "", *inference.PROTOCOLS):
        return 400, {"message": f"protocol: use one of {', '.join(inference.PROTOCOLS)}"}
    if inference.detect(payload) is None:
        return 400, {"message": 'not a V1 ({"instances": [...]}) or V2 ({"inputs": [...]}) '
                                "request body"}
    try:
        obj = backend.get("InferenceService", name)
    except LabError:  # not a valid name: there is no such InferenceService
        obj = None
    if obj is None:
        return 404, {"message": f"no InferenceService '{name}'"}
    host = urlsplit(str((obj.get("status") or {}).get("url") or "")).hostname
    if host not in LOOPBACK:  # a record edited to point elsewhere: never followed
        return 409, {"message": f"InferenceService '{name}' has no local model server "
                                "(status.url is not on 127.0.0.1)"}
    try:
        response = backend.predict(name, payload, "default", protocol or None)
        return 200, {"response": response, "predictions": inference.predictions(response)}
    except LabError as exc:
        return 502, {"message": str(exc).splitlines()[0]}
