"""Redaction for `kflab debug bundle`, which users attach to public issues: by allowlist.

Patterns for secrets always miss one (`DB_PASS`, `MYSQL_PWD`, a value given as the next argv
item), so what a bundle may show is decided by where a value sits, not by what it looks like:
- structured objects (`scrub`): every environment value is redacted, names kept (`env` lists
  and mappings, `NAME=value` items); argv lists (`command`, `args`, `argv`) keep the program,
  flag names, sub-command words and file names, and redact every value after a flag, every
  `--flag=value` value and every other item; a shell script given to `sh -c` is taken apart
  the same way, command by command; annotation values are redacted unless their key is one
  of a few known to hold no credential (a JSON list or mapping value is read as argv or as
  environment: k3s.io/node-args, k3s.io/node-env); any field named like a credential is
  redacted whatever it holds;
- free text (logs, events, the Ansible log, and every file as a last pass: `redact`): known
  token shapes (GitHub, Slack, AWS, Google, Hugging Face, GitLab, npm and PyPI tokens, JSON
  web tokens, PEM blocks, k3s join tokens, Azure `AccountKey=` and SAS signatures), the values
  of `NAME=value` environment assignments, of credential-named fields and flags, every URL's
  user info and query values (presigned `X-Amz-Signature=`, `?token=`), `Authorization`
  schemes and `Cookie`/`Set-Cookie` headers.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from typing import Any

REDACTED = "<redacted>"
MAX_DEPTH = 60  # objects kflab writes are a few levels deep; deeper is cut, not recursed

# A field or flag whose name says it holds a credential (matched on the name, any case).
_CRED = (r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|"
         r"private[_-]?key|client[_-]?key|signing[_-]?key|[_-]key|key[_-]?data|credentials?|"
         r"\bauth\b|_auth|auth_|authorization|session|cookie|webhook|signature|\bsig\b|"
         r"connection[_-]?string|dsn)")
_CRED_NAME = re.compile(r"(?i)^[\w.-]*" + _CRED + r"[\w.-]*$")
# in text: bounded on both sides, and starting a word (no quadratic scans of long tokens)
_CRED_IN = r"[\w.-]{0,48}" + _CRED + r"[\w.-]{0,48}"
_START = r"(?<![\w.-])"  # matching begins only at the start of a word

# Annotation keys (prefixes) whose values are known to hold no credential; others are hidden.
SAFE_ANNOTATIONS = (
    "deployment.kubernetes.io/", "kubectl.kubernetes.io/restartedAt",
    "kubectl.kubernetes.io/default-container", "serving.kserve.io/", "pipelines.kubeflow.org/",
    "katib.kubeflow.org/", "sidecar.istio.io/inject", "notebooks.kubeflow.org/",
    "workflows.argoproj.io/", "kubeflow-resource-stopped", "kflab.dev/",
    "node.alpha.kubernetes.io/ttl",
    "volumes.kubernetes.io/controller-managed-attach-detach",
)
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"})
_SHELL_OPS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "{", "}", "then", "do", "else",
                        "fi", "done", "if", "while", "for", "in", "!"})
_WORD = re.compile(r"^[a-z][a-z-]{0,23}$")  # a sub-command: alias, set, run (no digits)
WORDS_KEPT = 2  # sub-command words kept after a program (`mc alias set`, `kflab pipeline run`)
_FILE = re.compile(r"^[\w./-]{1,200}\.(?:py|sh|ya?ml|json|ipynb|txt|csv|toml|cfg|ini|md|log|"
                   r"joblib|pkl|pickle|pt|pth|onnx|bst|h5|keras|parquet|tar\.gz|tgz|zip)$")
_PATH = re.compile(r"^(?:/|\./|\.\./|~/)[\w./@+-]{0,300}$")
_LONG_RUN = re.compile(r"[A-Za-z0-9+/=_-]{24,}")  # a long run of token characters
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e-?\d+)?$")

_TEXT: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM blocks of any kind (keys, certificates), whole
    (re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)", re.S),
     REDACTED),
    # JSON web tokens (ServiceAccount tokens, OIDC id tokens)
    (re.compile(r"\beyJ[\w-]{4,}\.[\w-]{4,}\.?[\w-]*"), REDACTED),
    # vendor token shapes
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|"
                r"xox[abposr]-[A-Za-z0-9-]{6,}|xapp-[A-Za-z0-9-]{10,}|"
                r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{12,}|AIza[\w-]{30,}|"
                r"hf_[A-Za-z0-9]{16,}|glpat-[\w-]{16,}|npm_[A-Za-z0-9]{24,}|"
                r"pypi-[\w-]{16,}|sk-[A-Za-z0-9_-]{16,}|sk_live_[A-Za-z0-9]{10,}|"
                r"dop_v1_[a-f0-9]{20,}|SG\.[\w-]{16,}\.[\w-]{16,})"), REDACTED),
    (re.compile(r"(?i)\bhooks\.slack\.com/[\w/+-]+"), "hooks.slack.com/" + REDACTED),
    # k3s join tokens: K10<hash>::server:<secret>
    (re.compile(r"\bK10[0-9a-f]{16,}::[\w.-]+:[\w.-]+"), REDACTED),
    # Azure connection strings and SAS: AccountKey=..., SharedAccessKey=..., sig=...
    (re.compile(r"(?i)\b((?:Account|SharedAccess)Key|SharedAccessSignature|sig)=[^;&\s\"']+"),
     r"\1=" + REDACTED),
    # URLs: user info (user:password@, token@) and every query value
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)[^\s/@\"'<>]{1,512}@"),
     r"\1" + REDACTED + "@"),
    (re.compile(r"([?&][\w.%-]{1,64}=)[^&#\s\"'<>)\]]+"), r"\1" + REDACTED),
    # HTTP credentials: Authorization schemes, cookies
    (re.compile(r"(?i)\b(bearer|basic|digest)(\s+)[\w.~+/=-]{8,}"), r"\1\2" + REDACTED),
    (re.compile(r"(?i)\b((?:set-)?cookie\"?'?\s*[:=]\s*)[^\n]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)\b(authorization\"?'?\s*[:=]\s*)[^\n,}]+"), r"\1" + REDACTED),
    # environment assignments: NAME=value (names kept: env values are always redacted)
    (re.compile(r"\b([A-Z][A-Z0-9_]{1,63})=(?!<redacted>)(\"[^\"\n]*\"|'[^'\n]*'|[^\s,;}\]]+)"),
     r"\1=" + REDACTED),
    # a registry's or docker config's `auth` (base64 of user:password)
    (re.compile(r"""(?i)(["']?\bauth["']?[ \t]*[:=][ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s,}\]\n]+)"""),
     r"\1" + REDACTED),
    # credential-named flags with the value after a space: --token X, --accesskey X
    (re.compile(r"(?i)" + _START + r"(--" + _CRED_IN + r")([ \t]+)(?!-)(?!<redacted>)([^\s]+)"),
     r"\1\2" + REDACTED),
    # credential-named fields: name: value, "name": "value", name=value, --name=value
    (re.compile(r"""(?ix)""" + _START + r"""(?P<k>["']?(?:--)?""" + _CRED_IN + r"""["']?\s*[:=]\s*)
                    (?!<redacted>)(?P<v>"[^"\n]*"|'[^'\n]*'|[^\s,}\]\n]+)"""),
     r"\g<k>" + REDACTED),
    # env lists in text: - name: SOME_NAME \n value: xxx
    (re.compile(r"""(?ix)(name["']?\s*[:=]\s*["']?[\w.-]+["']?\s*[,\n]\s*["']?value["']?\s*
                    [:=]\s*)(?!<redacted>)("[^"\n]*"|'[^'\n]*'|[^\s,}\n]+)"""), r"\1" + REDACTED),
)


def redact(text: str) -> str:
    """Free text with every known credential shape replaced by <redacted>."""
    for pattern, repl in _TEXT:
        text = pattern.sub(repl, text)
    return text


# --- argv ------------------------------------------------------------------------------------

def _keep(item: str, position: int) -> bool:
    """A positional argv item shown as it is: one of the first WORDS_KEPT sub-command words
    (lower-case letters, no digits), a file or path name; never a long run of token
    characters, never a number (a PIN is one)."""
    if _LONG_RUN.search(item) or "@" in item or ":" in item:
        return False
    return bool((_WORD.match(item) and position <= WORDS_KEPT) or _FILE.match(item)
                or _PATH.match(item))


def _is_flag(item: str) -> bool:
    return item.startswith("-") and len(item) > 1 and not _NUMBER.match(item)


def argv(items: list[Any]) -> list[str]:
    """An argv list as a bundle may show it (see the module docstring)."""
    out: list[str] = []
    value_next = script_next = False
    shell = False
    positional = 0
    for i, raw in enumerate(items):
        item = str(raw)
        if script_next:
            out.append(script(item))
            script_next = value_next = False
            continue
        if i == 0:
            name = item.rsplit("/", 1)[-1]
            shell = name in SHELLS
            program = re.fullmatch(r"[A-Za-z][\w.+-]{0,40}", name) and not _LONG_RUN.search(name)
            out.append(item if _keep(item, 0) or program else REDACTED)
            continue
        if _is_flag(item):
            flag, eq, _ = item.partition("=")
            out.append(flag + ("=" + REDACTED if eq else "") if _keep_flag(flag) else REDACTED)
            if shell and not eq and re.fullmatch(r"-[a-z]*c[a-z]*", flag):
                script_next = True
            else:
                value_next = not eq
            continue
        if value_next:
            out.append(REDACTED)
            value_next = False
            continue
        positional += 1
        out.append(item if _keep(item, positional) else REDACTED)
    return out


def _keep_flag(flag: str) -> bool:
    return bool(re.fullmatch(r"--?[A-Za-z0-9][\w.-]{0,63}", flag))


def script(text: str) -> str:
    """A shell script (`sh -c SCRIPT`) taken apart as argv, command by command: program names,
    flag names and safe words stay; values and anything unparsable are redacted."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return REDACTED
    out, command = [], []  # type: ignore[var-annotated]
    for tok in [*tokens, ";"]:
        if tok in _SHELL_OPS or set(tok) <= set(";&|()"):
            if command:
                out.extend(argv(command))
                command = []
            if tok != ";" or out:
                out.append(tok)
        else:
            command.append(tok)
    while out and out[-1] == ";":
        out.pop()
    return " ".join(out)


# --- structured objects ----------------------------------------------------------------------

def _env(value: Any) -> Any:
    """An `env` field: names kept, every value redacted (valueFrom references kept)."""
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, dict):
                out.append({k: (REDACTED if k == "value" else scrub(v, 1))
                            for k, v in item.items()})
            elif isinstance(item, str):
                name, eq, _ = item.partition("=")
                out.append(f"{name}={REDACTED}" if eq else REDACTED)
            else:
                out.append(REDACTED)
        return out
    if isinstance(value, dict):
        return {str(k): REDACTED for k in value}
    return REDACTED


def _annotations(value: Any) -> Any:
    if not isinstance(value, dict):
        return scrub(value, 1)
    out = {}
    for key, raw in value.items():
        key = str(key)
        parsed = None
        if isinstance(raw, str) and raw.lstrip()[:1] in ("[", "{"):
            with contextlib.suppress(ValueError, RecursionError):
                parsed = json.loads(raw)
        if isinstance(parsed, list) and all(isinstance(x, str | int | float) for x in parsed):
            out[key] = json.dumps(argv(parsed))
        elif isinstance(parsed, dict):
            out[key] = json.dumps(_env(parsed))
        elif key.startswith(SAFE_ANNOTATIONS) and isinstance(raw, str | int | float | bool):
            out[key] = redact(str(raw)) if isinstance(raw, str) else raw
        else:
            out[key] = REDACTED
    return out


def _container(obj: dict[str, Any], depth: int) -> dict[str, Any]:
    """command + args of one container are one argv (`sh -c` in command, the script in
    args)."""
    command = obj.get("command") if isinstance(obj.get("command"), list) else []
    args = obj.get("args") if isinstance(obj.get("args"), list) else []
    both = argv([*command, *args]) if (command or args) else []
    out = {}
    for key, value in obj.items():
        if key == "command" and isinstance(value, list):
            out[key] = both[:len(command)]
        elif key == "args" and isinstance(value, list):
            out[key] = both[len(command):] if command else argv(["_", *args])[1:]
        else:
            out[key] = _field(key, value, depth)
    return out


def _field(key: str, value: Any, depth: int) -> Any:
    if key == "env" or key.endswith("Env") or key == "environment":
        return _env(value)
    if key == "annotations":
        return _annotations(value)
    if key in ("argv", "cmdline") and isinstance(value, list):
        return argv(value)
    if key in ("arguments", "parameters", "params") and isinstance(value, dict):
        return {k: (v if isinstance(v, bool | int | float) or v is None else REDACTED)
                for k, v in value.items()}
    if isinstance(value, str | bytes) and _CRED_NAME.match(key) and value:
        return REDACTED
    return scrub(value, depth + 1)


def scrub(obj: Any, depth: int = 0) -> Any:
    """A JSON-like object as a bundle may show it (see the module docstring)."""
    if depth > MAX_DEPTH:
        return REDACTED
    if isinstance(obj, dict):
        if isinstance(obj.get("command"), list) or isinstance(obj.get("args"), list):
            return _container(obj, depth)
        return {str(k): _field(str(k), v, depth) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v, depth + 1) for v in obj]
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, bytes):
        return REDACTED
    return obj
