"""Names and namespaces checked as the Kubernetes API server and the Kubeflow webhooks check
them, before they reach a URL or a path.

Backend-neutral: the local backend uses names as parts of paths in its state folder; the
kubernetes client pastes them into request paths unescaped (so `../secrets` would address
another resource). Everything from a manifest or the command line goes through these
checks first, and both backends refuse the same names with the same message. Per kind
(apimachinery's validation plus each project's webhook), `check_kind_name`:

- namespace: DNS-1123 label, at most 63 (a namespace name is a label).
- Experiment (Katib): DNS-1035 label of at most 40 -- Katib's webhook limit, because the
  suggestion Service `<name>-<algorithm>` must stay a 63-character label.
- Trial: DNS-1123 subdomain (the controller names them `<experiment>-<8 characters>`).
- PyTorchJob (Training Operator): DNS-1035 label, at most 63 (its webhook); the replica
  Services `<name>-worker-<i>` must fit too, which the training spec checks with the counts.
- InferenceService (KServe): DNS-1035 label; at most 53 here because KServe names the
  predictor Service `<name>-predictor`, itself a 63-character label.
- PipelineRun (kflab's record of a KFP run): DNS-1123 label, at most 63 -- on a cluster the
  run is an Argo Workflow whose name labels every pod, so it must be a valid label value.
- any other kind: DNS-1123 subdomain, at most 253 (what the API server requires of a CR).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from lab.errors import InputError, LabError

_LABEL_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Label keys/values and field managers: printable, no path or query characters.
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MANAGER = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.:]{0,127}$")


class Rule(NamedTuple):
    """How one kind's names are checked: a format and a maximum length, and why."""

    format: str  # "dns1123-label" | "dns1035-label" | "dns1123-subdomain"
    max_len: int
    why: str = ""

    def problems(self, value: str) -> list[str]:
        """What is wrong with `value` under this rule (empty when it is valid)."""
        out = []
        if not value:
            return ["must not be empty"]
        if len(value) > self.max_len:
            out.append(f"is {len(value)} characters long; the limit is {self.max_len}"
                       + (f" ({self.why})" if self.why else ""))
        if self.format == "dns1123-subdomain":
            if not all(_LABEL_1123.match(part) for part in value.split(".")):
                out.append("must consist of lower-case letters, digits, '-' and '.', and "
                           "start and end with a letter or digit (a DNS-1123 subdomain)")
        elif self.format == "dns1035-label":
            if not _LABEL_1035.match(value):
                out.append("must consist of lower-case letters, digits and '-', start with a "
                           "letter and end with a letter or digit (a DNS-1035 label)")
        elif not _LABEL_1123.match(value):
            out.append("must consist of lower-case letters, digits and '-', and start and end "
                       "with a letter or digit (a DNS-1123 label)")
        return out


NAMESPACE = Rule("dns1123-label", 63)
GENERIC = Rule("dns1123-subdomain", 253)
RULES: dict[str, Rule] = {
    "Experiment": Rule("dns1035-label", 40,
                       "Katib's limit: its suggestion Service is named <name>-<algorithm>"),
    "Trial": GENERIC,
    "PyTorchJob": Rule("dns1035-label", 63, "the Training Operator's limit"),
    "TFJob": Rule("dns1035-label", 63, "the Training Operator's limit"),
    "TrainJob": Rule("dns1035-label", 63, "the TrainJob CRD's validation rules"),
    "Notebook": Rule("dns1035-label", 52,
                     "the controller names a StatefulSet and a Service after it; a "
                     "StatefulSet's pods carry its name plus an 11-character hash in a "
                     "63-character label"),
    "InferenceService": Rule("dns1035-label", 53,
                             "KServe names the predictor Service <name>-predictor, "
                             "at most 63 characters"),
    "PipelineRun": Rule("dns1123-label", 63,
                        "on a cluster the run's name labels its pods"),
}


def rule_for(kind: str) -> Rule:
    return RULES.get(kind, GENERIC)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + "...'"


def name_problem(kind: str, name: object) -> str | None:
    """Why `name` is not a valid name for `kind`, or None when it is."""
    if not isinstance(name, str):
        return f"must be text, got {type(name).__name__}"
    problems = rule_for(kind).problems(name)
    return f"{_shown(name)} " + "; ".join(problems) if problems else None


def namespace_problem(namespace: object) -> str | None:
    if not isinstance(namespace, str):
        return f"must be text, got {type(namespace).__name__}"
    problems = NAMESPACE.problems(namespace)
    return f"{_shown(namespace)} " + "; ".join(problems) if problems else None


def name_hint(kind: str, name: object = None) -> str:
    """How to write a valid name for `kind`: the name given, made valid, when that is close
    (first_run -> first-run), else the rule with an example."""
    rule = rule_for(kind)
    if isinstance(name, str) and name.strip():
        fixed = slug(name, kind, fallback="")
        if fixed and fixed != name and not rule.problems(fixed):
            return f"try {fixed!r}"
    start = "a letter" if rule.format == "dns1035-label" else "a letter or digit"
    dots = ", '-' and '.'" if rule.format == "dns1123-subdomain" else " and '-'"
    return (f"use at most {rule.max_len} lower-case letters, digits{dots}, starting with "
            f"{start}, e.g. my-{kind.lower()}")


NAMESPACE_HINT = ("use lower-case letters, digits and '-', starting and ending with a letter "
                  "or digit, 63 characters at most, e.g. team-a")


def check_name(name: object, what: str = "name") -> str:
    """`name` when it is a valid DNS-1123 subdomain (253 characters at most): the API
    server's rule for any object; `check_kind_name` adds each kind's own limits."""
    if not isinstance(name, str) or GENERIC.problems(name):
        raise LabError(f"invalid {what} {_shown(name)}",
                       hint="lower-case letters, digits, '-' and '.', starting and ending "
                            "with a letter or digit, 253 characters at most")
    return name  # type: ignore[return-value]


def check_kind_name(kind: str, name: object, *, file: str | None = None,
                    field: str = "metadata.name") -> str:
    """Return `name` if it is valid for `kind`; raise InputError naming the field if not."""
    problem = name_problem(kind, name)
    if problem is not None:
        raise InputError(file, field, f"invalid {kind} name: {problem}",
                         hint=name_hint(kind, name))
    return name  # type: ignore[return-value]


def check_namespace(namespace: object, *, file: str | None = None,
                    field: str = "metadata.namespace") -> str:
    """Return `namespace` if it is a valid namespace name; raise InputError if not."""
    problem = namespace_problem(namespace)
    if problem is not None:
        raise InputError(file, field, f"invalid namespace: {problem}", hint=NAMESPACE_HINT)
    return namespace  # type: ignore[return-value]


def check_object(obj: dict[str, Any], *, file: str | None = None) -> None:
    """Validate an object's metadata.name (by its kind) and metadata.namespace."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise InputError(file, "metadata", "missing or not a mapping",
                         hint="set metadata: {name: my-object}")
    kind = str(obj.get("kind", ""))
    check_kind_name(kind, meta.get("name"), file=file)
    if meta.get("namespace") is not None:
        check_namespace(meta["namespace"], file=file)


def slug(text: str, kind: str = "PipelineRun", fallback: str = "run") -> str:
    """A valid name for `kind` derived from free text (a file name, say): lower-case, runs of
    other characters become '-', trimmed to the kind's limit. Used only for defaults: a
    name the user typed is checked, never rewritten."""
    rule = rule_for(kind)
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:rule.max_len].strip("-")
    if rule.format == "dns1035-label" and out and not out[0].isalpha():
        out = f"{fallback}-{out}"[:rule.max_len].strip("-")
    return out or fallback


def check_label(key: str, value: str) -> tuple[str, str]:
    """A label key (optional DNS prefix + name) and value as Kubernetes accepts them."""
    prefix, _, name = key.rpartition("/")
    ok = (0 < len(name) <= 63 and _LABEL_VALUE.match(name)
          and (not prefix or (len(prefix) <= 253 and _SUBDOMAIN.match(prefix)))
          and isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.match(value))
    if not ok:
        raise LabError(f"invalid label {key}={value!r}",
                       hint="keys: [prefix/]name; names and values: 63 characters of "
                            "letters, digits, '-', '_', '.', starting and ending alphanumeric")
    return key, value


def check_manager(manager: str) -> str:
    """A field manager name: 128 printable characters at most, no path characters."""
    if not isinstance(manager, str) or not _MANAGER.match(manager):
        raise LabError(f"invalid field manager {manager!r}",
                       hint="letters, digits, '-', '_', '.', ':' (128 at most)")
    return manager
