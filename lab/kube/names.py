"""Names and namespaces checked as the API server checks them, before they reach a URL.

The kubernetes client pastes names into request paths unescaped, so a name like
`../secrets` would address another resource: everything from a manifest or the command line
goes through these checks first.
"""

from __future__ import annotations

import re

from lab.errors import LabError

# DNS-1123 label (namespaces, most core names) and subdomain (object names), as apimachinery.
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Label keys/values and field managers: printable, no path or query characters.
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MANAGER = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.:]{0,127}$")


def check_namespace(namespace: str) -> str:
    """`namespace` when it is a valid DNS-1123 label (63 characters at most)."""
    if not isinstance(namespace, str) or len(namespace) > 63 or not _LABEL.match(namespace):
        raise LabError(f"invalid namespace {namespace!r}",
                       hint="lower-case letters, digits and '-', starting and ending with a "
                            "letter or digit, 63 characters at most")
    return namespace


def check_name(name: str, what: str = "name") -> str:
    """`name` when it is a valid DNS-1123 subdomain (253 characters at most)."""
    if not isinstance(name, str) or len(name) > 253 or not _SUBDOMAIN.match(name):
        raise LabError(f"invalid {what} {name!r}",
                       hint="lower-case letters, digits, '-' and '.', starting and ending "
                            "with a letter or digit, 253 characters at most")
    return name


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
