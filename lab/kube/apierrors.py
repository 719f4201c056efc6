"""Kubernetes API failures as one-line LabErrors with a hint, never a traceback.

Every call that lab.kube makes to an API server runs inside `translated(verb, what)`, so a
caller sees one of the classes below (all LabError) whatever went wrong: the HTTP status the
server answered (401, 403, 404, 409, 422...), a connection that never opened, or a TLS failure.
The subclasses let the backend branch (a NotFound is often fine) without parsing messages.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

from lab.errors import LabError


class KubeError(LabError):
    """An API call failed; `status` is the HTTP status (0 when no answer came)."""

    def __init__(self, message: str, *, hint: str | None = None, status: int = 0,
                 reason: str = "") -> None:
        super().__init__(message, hint=hint)
        self.status, self.reason = status, reason


class NotFound(KubeError):
    """404: the object (or its namespace) does not exist."""


class Forbidden(KubeError):
    """403: authenticated, but RBAC does not allow this verb on this resource."""


class Unauthorized(KubeError):
    """401: the credentials (token, client certificate) are invalid or expired."""


class Conflict(KubeError):
    """409: server-side apply found fields owned by another field manager, or a stale write.

    `fields` lists (manager, field path) pairs, e.g. ("katib-controller", ".spec.maxTrialCount").
    """

    def __init__(self, message: str, *, hint: str | None = None, status: int = 409,
                 reason: str = "Conflict", fields: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message, hint=hint, status=status, reason=reason)
        self.fields = fields or []


class Invalid(KubeError):
    """422 (or 400): the server rejected the object: schema, CEL rule, immutable field."""


class Unreachable(KubeError):
    """No HTTP answer at all: connection refused, DNS, timeout, or a TLS handshake failure."""


class NotServed(KubeError):
    """The server does not serve this apiVersion/kind (a CRD not installed)."""


WRITE_VERBS = ("apply", "create", "update", "patch", "replace")


def _status_body(exc: Any) -> dict[str, Any]:
    """The Status object an ApiException carries (empty when the body is not one)."""
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _conflicts(status: dict[str, Any]) -> list[tuple[str, str]]:
    """(manager, field) pairs of a server-side apply conflict, from the Status causes.

    The server words each cause as `conflict with "MANAGER"[ using GV]: .field.path`."""
    out = []
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") != "FieldManagerConflict":
            continue
        msg, field = str(cause.get("message", "")), str(cause.get("field", ""))
        manager = msg.split('"')[1] if msg.count('"') >= 2 else "another manager"
        out.append((manager, field))
    return out


def _server(exc: Any) -> str:
    """The server URL a urllib3 error was about, when it says."""
    pool = getattr(exc, "pool", None)
    if pool is not None and getattr(pool, "host", None):
        return f"{getattr(pool, 'scheme', 'https')}://{pool.host}:{pool.port}"
    return "(the kubeconfig's server)"


def from_http(exc: Any, verb: str, what: str) -> KubeError:
    """A KubeError for an HTTP answer (ApiException or a dynamic-client error)."""
    status = int(getattr(exc, "status", 0) or 0)
    body = _status_body(exc)
    message = str(body.get("message") or getattr(exc, "reason", "") or "").strip()
    reason = str(body.get("reason") or getattr(exc, "reason", "") or "")
    details = body.get("details") or {}
    if status == 401:
        return Unauthorized(
            f"the API server rejected the credentials (401 Unauthorized) while trying to "
            f"{verb} {what}",
            hint="the kubeconfig's token or client certificate is invalid or expired: get a "
                 "fresh kubeconfig (`kflab kubeconfig` for the lab) or log in again",
            status=status, reason=reason)
    if status == 403:
        resource = details.get("kind") or what
        group = details.get("group")
        scope = f"{resource}.{group}" if group else resource
        return Forbidden(
            f"forbidden: cannot {verb} {scope} ({what}): {message}",
            hint=f"ask a cluster admin for RBAC permission to {verb} {scope}, "
                 "or use a context with more rights (--context)",
            status=status, reason=reason)
    if status == 404:
        return NotFound(f"{what} not found" + (f" ({message})" if message else ""),
                        hint="check the name and namespace (`kflab get`)",
                        status=status, reason=reason)
    if status == 409:
        fields = _conflicts(body)
        if fields:
            owned = "; ".join(f"{f} is owned by {m!r}" for m, f in fields)
            return Conflict(f"conflict applying {what}: {owned}",
                            hint="leave those fields to their manager, or re-apply with "
                                 "force (--force) to take them over",
                            status=status, reason=reason, fields=fields)
        return Conflict(f"conflict while trying to {verb} {what}: {message}",
                        hint="the object changed meanwhile: read it again and retry",
                        status=status, reason=reason)
    if status == 422 or (status == 400 and verb in WRITE_VERBS):
        causes = [f"{c.get('field', '')}: {c.get('message', '')}".strip(": ")
                  for c in details.get("causes") or []]
        detail = "; ".join(causes) if causes else message
        return Invalid(f"the API server rejected {what}: {detail}",
                       hint="fix the manifest: the field names and values must match the "
                            "resource's schema (`kubectl explain` shows it)",
                       status=status, reason=reason)
    if status == 500 and "failed to create typed patch object" in message:
        # Server-side apply reports a manifest that does not fit the schema this way.
        detail = re.sub(r"^.*failed to create typed patch object( \(.*?\))?: ", "", message)
        return Invalid(f"the API server rejected {what}: {detail}",
                       hint="fix the manifest: the field names and values must match the "
                            "resource's schema (`kubectl explain` shows it)",
                       status=status, reason=reason)
    if status == 410:
        return KubeError(f"{what}: resource version too old (410 Gone)", status=status,
                         reason=reason, hint="list again; the watch history was compacted")
    return KubeError(f"cannot {verb} {what}: {status} {reason}: {message}".rstrip(": "),
                     hint="retry; if it persists, check the API server's health",
                     status=status, reason=reason)


def from_transport(exc: BaseException, verb: str, what: str) -> Unreachable:
    """An Unreachable for an error below HTTP: refused, timed out, TLS, name resolution."""
    from urllib3.exceptions import MaxRetryError, SSLError

    inner: BaseException = exc
    if isinstance(exc, MaxRetryError) and exc.reason is not None:
        inner = exc.reason
    server = _server(exc)
    text = str(inner)
    certificate = any(k in text for k in ("CERTIFICATE", "certificate", "hostname",
                                          "WRONG_VERSION_NUMBER", "self-signed"))
    if (isinstance(inner, SSLError) or "SSL" in type(inner).__name__) and certificate:
        short = re.sub(r"^.*?\[SSL: [A-Z_]+\] ", "", text)
        short = re.sub(r"\s*\(_ssl\.c:\d+\)", "", short).strip(" ')\"")
        return Unreachable(
            f"TLS error talking to {server} while trying to {verb} {what}: {short[:200]}",
            hint="the kubeconfig's certificate-authority does not match the server "
                 "(a recreated cluster?): get a fresh kubeconfig (`kflab kubeconfig`)")
    if "refused" in text.lower():
        cause = "connection refused"
    elif "EOF" in text or "reset" in text.lower() or "aborted" in text.lower():
        cause = "the connection was closed (is the API server restarting?)"
    elif "timed out" in text.lower() or "timeout" in type(inner).__name__.lower():
        cause = "timed out"
    else:
        cause = text.split(":")[-1].strip()[:200] or type(inner).__name__
    return Unreachable(f"cannot reach the Kubernetes API at {server} to {verb} {what}: {cause}",
                       hint="is the cluster running? (`kflab status`); check the kubeconfig's "
                            "server address and context")


@contextlib.contextmanager
def translated(verb: str, what: str) -> Iterator[None]:
    """Turn any failure of the Kubernetes client inside the block into a KubeError.

    `verb` and `what` name the attempt for the message, e.g. ("apply", "Experiment lab/hpo")."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError
    from urllib3.exceptions import HTTPError

    try:
        yield
    except KubeError:
        raise
    except ResourceNotFoundError as exc:
        raise NotServed(f"the API server does not serve {what}: {exc}",
                        hint="install the component that defines it (its CRD), "
                             "or check apiVersion and kind") from None
    except DynamicApiError as exc:
        raise from_http(exc, verb, what) from None
    except ApiException as exc:
        raise from_http(exc, verb, what) from None
    except (HTTPError, OSError) as exc:
        raise from_transport(exc, verb, what) from None
