"""Ansible filter `kflab_split_render`: one component's rendered manifests in two applies.

A component's own custom resources (an InferenceService runtime, a Katib config object, ...)
are checked by the component's own admission webhooks, which are served by a Deployment that
the same render creates. Applying everything at once fails until that pod serves, which on a
slow link can take longer than any fixed retry. So the kubeflow role applies `base` (CRDs,
RBAC, Services, Deployments, webhook configurations, and custom resources of OTHER
components' groups, e.g. cert-manager Certificates, whose webhooks already serve), waits for
the `webhooks` Deployments, then applies `custom`.

Runs on the Ansible controller (PyYAML is there); tested in tests/unit/test_kubeflow_apply.py.
"""

from __future__ import annotations

from typing import Any

import yaml

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _services(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(namespace, name) of every Service a webhook configuration or CRD conversion calls."""
    out = []
    if doc.get("kind") in WEBHOOK_KINDS:
        for hook in doc.get("webhooks") or []:
            svc = (hook.get("clientConfig") or {}).get("service")
            if svc:
                out.append((svc.get("namespace", "default"), svc["name"]))
    if doc.get("kind") == "CustomResourceDefinition":
        conv = ((doc.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
        svc = (conv.get("clientConfig") or {}).get("service")
        if svc:
            out.append((svc.get("namespace", "default"), svc["name"]))
    return out


# libyaml's parser and emitter when PyYAML has them: KServe's render is ~5 MB, which the pure
# Python ones take about a minute to read and write again on a laptop (seconds with libyaml).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def split_render(text: str) -> dict[str, Any]:
    docs = [d for d in yaml.load_all(text, Loader=_LOADER)
            if isinstance(d, dict) and d.get("kind")]
    own = {d["spec"]["group"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    custom = [d for d in docs if d["kind"] != "CustomResourceDefinition"
              and _group(str(d.get("apiVersion", ""))) in own]
    base = [d for d in docs if not any(d is c for c in custom)]
    services = {(d.get("metadata", {}).get("namespace", "default"), d["metadata"]["name"]): d
                for d in docs if d["kind"] == "Service" and d.get("apiVersion") == "v1"}
    webhooks: list[str] = []
    for ns, name in sorted({s for d in docs for s in _services(d)}):
        selector = ((services.get((ns, name)) or {}).get("spec") or {}).get("selector") or {}
        if not selector:
            continue
        for d in docs:
            if d["kind"] != "Deployment" or d.get("metadata", {}).get("namespace",
                                                                       "default") != ns:
                continue
            labels = ((d.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
                "labels") or {}
            if all(labels.get(k) == v for k, v in selector.items()):
                ref = f"{ns}/{d['metadata']['name']}"
                if ref not in webhooks:
                    webhooks.append(ref)
    dump = lambda items: (yaml.dump_all(items, Dumper=_DUMPER, sort_keys=False)  # noqa: E731
                          if items else "")
    return {"base": dump(base), "custom": dump(custom), "webhooks": webhooks,
            "custom_count": len(custom)}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"kflab_split_render": split_render}
