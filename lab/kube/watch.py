"""Waiting for an object to reach a state: a watch, resumed when it drops, with periodic relists.

`wait_for` lists the object (one GET of the collection, filtered by name) and checks the
predicate; then watches from that list's resourceVersion. A watch that ends (the server's
timeoutSeconds, a closed connection, a restarted API server) is resumed from the last
resourceVersion seen; `410 Gone` (history compacted) and every `resync` seconds cause a fresh
list instead, so a missed event can never leave a waiter stuck. The overall `timeout` ends
the wait with a WaitTimeout whose message shows the last status seen.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from lab.errors import LabError
from lab.kube.apierrors import (
    Forbidden,
    KubeError,
    NotFound,
    Unauthorized,
    Unreachable,
    from_http,
    from_transport,
    translated,
)
from lab.kube.objects import Ref, _resolve

log = logging.getLogger(__name__)
Predicate = Callable[[dict[str, Any] | None], bool]


class WaitTimeout(LabError):
    """The wait ran out of time; `last` is the object as last seen (None: absent)."""

    def __init__(self, message: str, *, hint: str | None = None,
                 last: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.last = last


class WaitFailed(LabError):
    """The object reached a state that `fail` says will never satisfy the wait."""

    def __init__(self, message: str, *, hint: str | None = None,
                 last: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.last = last


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class _Dropped(Exception):
    """The watch stream broke mid-way: resume from the last resourceVersion."""


def status_summary(obj: dict[str, Any] | None, limit: int = 300) -> str:
    """One line: the object's conditions (type=status reason: message), else its status."""
    if obj is None:
        return "absent"
    status = obj.get("status")
    if not status:
        deleting = (obj.get("metadata") or {}).get("deletionTimestamp")
        return "being deleted" if deleting else "no status yet"
    if not isinstance(status, dict):
        line = json.dumps(status, default=str)
        return line if len(line) <= limit else line[: limit - 3] + "..."
    parts = []
    for c in status.get("conditions") or []:
        text = f"{c.get('type')}={c.get('status')}"
        if c.get("reason"):
            text += f" {c['reason']}"
        if c.get("message"):
            text += f": {c['message']}"
        parts.append(text)
    scalars = ", ".join(f"{k}={v}" for k, v in status.items()
                        if k != "conditions" and not isinstance(v, dict | list))
    if parts:
        line = "; ".join(parts) + (f" ({scalars})" if scalars else "")
    elif scalars:
        line = scalars
    else:
        line = json.dumps(status, sort_keys=True, default=str)
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        line += "; being deleted"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _events(kube: Any, path: str, name: str, rv: str, seconds: int) -> Iterator[dict[str, Any]]:
    """Raw watch events for one object from `rv`, ending after `seconds` (server-side)."""
    from kubernetes.watch.watch import iter_resp_lines

    query = [("watch", "true"), ("fieldSelector", f"metadata.name={name}"),
             ("resourceVersion", rv), ("allowWatchBookmarks", "true"),
             ("timeoutSeconds", str(seconds))]
    # The read timeout outlives the server's own end of the watch: a silent hang still ends.
    resp = kube.api.call_api(path, "GET", {}, query, {"Accept": "application/json"},
                             auth_settings=["BearerToken"], _preload_content=False,
                             _return_http_data_only=True,
                             _request_timeout=(kube.timeout, seconds + 15))
    try:
        for line in iter_resp_lines(resp):
            try:
                event = json.loads(line)
            except ValueError:
                raise _Dropped("a cut event line") from None
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                if status.get("code") == 410:
                    raise _Gone(status.get("message", "410 Gone"))
                raise KubeError(f"watch failed: {status.get('message', status)}",
                                status=int(status.get("code") or 0))
            yield event
    finally:
        resp.release_conn()


def wait_for(kube: Any, ref: Ref, predicate: Predicate, *, timeout: float,
             fail: Callable[[dict[str, Any] | None], str | None] | None = None,
             resync: float = 30.0, describe: str = "be ready") -> dict[str, Any] | None:
    """Wait until `predicate(obj)` is true; returns that object (None: it is absent).

    `predicate` and `fail` get the object as a dict, or None while it does not exist.
    `fail` returns a reason when the wait can never succeed (e.g. a Failed condition):
    that raises WaitFailed at once. `describe` completes "waiting for <ref> to ...".
    Raises WaitTimeout after `timeout` seconds, showing the last status seen; an
    unreachable server is retried until then (the timeout message says so)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError, MaxRetryError

    res, ns = _resolve(kube, ref)
    ref = Ref(ref.api_version, ref.kind, ref.name, ns)
    path = res.path(namespace=ns)
    deadline = time.monotonic() + timeout
    last: dict[str, Any] | None = None
    seen = False  # whether any list succeeded
    problem = ""  # the latest connection trouble, for the timeout message
    rv: str | None = None  # resume point; None means list first
    next_list = 0.0
    backoff = 0.2

    def check(obj: dict[str, Any] | None) -> bool:
        if fail is not None:
            why = fail(obj)
            if why:
                raise WaitFailed(f"{ref} will not {describe}: {why}",
                                 hint=f"last status: {status_summary(obj)}", last=obj)
        return bool(predicate(obj))

    def pause() -> None:
        nonlocal backoff
        time.sleep(min(backoff, max(deadline - time.monotonic(), 0)))
        backoff = min(backoff * 2, 5.0)

    def recovered(how: str) -> None:
        nonlocal problem, backoff
        if problem:
            log.info("watch on %s %s after: %s", ref, how, problem)
            problem, backoff = "", 0.2

    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            since = f"; last error: {problem}" if problem else ""
            shown = status_summary(last) if seen else "never read (server unreachable)"
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {ref} to {describe}; "
                              f"last status: {shown}{since}",
                              hint="check it with `kflab get` / `kflab logs`, or wait longer",
                              last=last)
        try:
            if rv is None or time.monotonic() >= next_list:
                with translated("list", str(ref)):
                    data = kube.dynamic.request(
                        "get", path, field_selector=f"metadata.name={ref.name}",
                        _request_timeout=min(kube.timeout, max(left, 1.0)))
                data = data.to_dict() if hasattr(data, "to_dict") else data
                items = data.get("items") or []
                last, seen = (items[0] if items else None), True
                rv = data["metadata"]["resourceVersion"]
                next_list = time.monotonic() + resync
                recovered("listed again")
                if check(last):
                    return last
            seconds = max(1, int(min(next_list - time.monotonic(), left)))
            for event in _events(kube, path, ref.name, rv, seconds):
                recovered("resumed")
                obj = event.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if event.get("type") == "BOOKMARK":
                    continue
                last = None if event.get("type") == "DELETED" else obj
                if check(last):
                    return last
            # The server ended the watch (its timeoutSeconds): resume, or relist when due.
            recovered("resumed")
        except _Gone as exc:
            log.info("watch on %s: %s (410 Gone); listing again", ref, exc)
            rv = None
        except (Unauthorized, Forbidden):
            raise  # waiting will not grant rights
        except KubeError as exc:
            # From the list: no connection, or a restarted server that does not serve the
            # kind yet (404) or is still starting (5xx). Retry until the deadline.
            problem = (f"the server does not serve {ref.kind} right now (404)"
                       if isinstance(exc, NotFound) else str(exc).splitlines()[0])
            log.info("watch on %s: %s; retrying", ref, problem)
            if not isinstance(exc, Unreachable):
                rv = None
            pause()
        except ApiException as exc:  # the watch request itself got an HTTP error
            err = from_http(exc, "watch", str(ref))
            if err.status in (401, 403):
                raise err from None
            problem = str(err).splitlines()[0]
            log.info("watch on %s: %s; listing again", ref, problem)
            rv = None
            pause()
        except (HTTPError, OSError, _Dropped) as exc:
            # No connection (server down), or the stream broke mid-way (reset, cut line).
            if isinstance(exc, MaxRetryError):
                problem = str(from_transport(exc, "watch", str(ref))).splitlines()[0]
            else:
                problem = f"watch connection dropped ({type(exc).__name__}: {exc})"[:200]
            log.info("watch on %s: %s; resuming from resourceVersion %s", ref, problem, rv)
            pause()


def wait_deleted(kube: Any, ref: Ref, *, timeout: float, resync: float = 30.0) -> None:
    """Wait until the object no longer exists (finalizers and Foreground deletion done)."""
    wait_for(kube, ref, lambda obj: obj is None, timeout=timeout, resync=resync,
             describe="be deleted")


def condition_is(ctype: str, value: str = "True") -> Predicate:
    """A predicate: the object has condition `ctype` with status `value`."""

    def pred(obj: dict[str, Any] | None) -> bool:
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return c.get("status") == value
        return False

    return pred
