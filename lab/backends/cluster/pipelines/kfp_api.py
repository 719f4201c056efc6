"""The few KFP v2beta1 REST calls kflab makes (KFP 2.16's ml-pipeline service, port 8888):
experiments (find or create one per lab namespace) and runs (create, get, list, delete)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from lab.errors import LabError

API = "/apis/v2beta1"


class KfpApi:
    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        if not base_url.startswith("http://127.0.0.1:"):
            raise LabError(f"refusing KFP API address {base_url}: kflab reaches it through a "
                           "port-forward on 127.0.0.1")
        self.base, self.timeout = base_url.rstrip("/"), timeout

    def call(self, method: str, path: str, body: Any = None,
             query: dict[str, str] | None = None) -> dict[str, Any]:
        url = f"{self.base}{API}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data, method=method,  # noqa: S310 - loopback only
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise LabError(f"KFP API {method} {path}: {exc.code} {_message(exc.read())}",
                           hint="check `kflab status` (pipelines) and the run's name") from None
        except (urllib.error.URLError, OSError) as exc:
            raise LabError(f"KFP API {method} {path}: no answer ({exc})",
                           hint="is Kubeflow Pipelines running? `kflab status`") from None
        return json.loads(raw) if raw.strip() else {}

    # --- experiments ------------------------------------------------------------------------

    def find_experiment(self, name: str) -> str | None:
        """The id of the experiment named `name`, or None (a read creates nothing)."""
        found = self.call("GET", "/experiments", query={
            "filter": _equals("display_name", name), "page_size": "10"})
        for exp in found.get("experiments") or []:
            if exp.get("display_name") == name:
                return str(exp["experiment_id"])
        return None

    def experiment_id(self, name: str) -> str:
        """The id of the experiment named `name`, created when missing."""
        found = self.find_experiment(name)
        if found is not None:
            return found
        made = self.call("POST", "/experiments", {
            "display_name": name, "description": "kflab runs of this lab namespace"})
        return str(made["experiment_id"])

    # --- runs -------------------------------------------------------------------------------

    def create_run(self, name: str, experiment_id: str, pipeline_spec: dict[str, Any],
                   parameters: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", "/runs", {
            "display_name": name, "experiment_id": experiment_id,
            "pipeline_spec": pipeline_spec,
            "runtime_config": {"parameters": parameters}})

    def get_run(self, run_id: str) -> dict[str, Any]:
        return self.call("GET", f"/runs/{urllib.parse.quote(run_id, safe='')}")

    def runs(self, experiment_id: str, name: str | None = None) -> list[dict[str, Any]]:
        """Runs of the experiment (with `name`: only those), newest first."""
        query = {"experiment_id": experiment_id, "page_size": "100",
                 "sort_by": "created_at desc"}
        if name:
            query["filter"] = _equals("display_name", name)
        out: list[dict[str, Any]] = []
        while True:
            page = self.call("GET", "/runs", query=query)
            out += page.get("runs") or []
            token = page.get("next_page_token")
            if not token:
                break
            query["page_token"] = token
        out.sort(key=lambda r: r.get("created_at") or "", reverse=True)
        return [r for r in out if name is None or r.get("display_name") == name]

    def delete_run(self, run_id: str) -> None:
        self.call("DELETE", f"/runs/{urllib.parse.quote(run_id, safe='')}")


def _equals(key: str, value: str) -> str:
    """A v2beta1 filter (JSON of kfp's Filter message): key EQUALS value."""
    return json.dumps({"predicates": [{"key": key, "operation": "EQUALS",
                                       "string_value": value}]})


def _message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:300]
    return str(body.get("message") or body.get("error") or body)[:300]
