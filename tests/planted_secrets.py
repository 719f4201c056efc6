"""Secrets planted where a lab keeps them, for the debug bundle's sweeps (issue 34, Why #2:
18 of 36 planted secrets leaked). Each value is unique and must appear nowhere in a bundle;
the names around them (variable names, flags, annotation keys) stay, so the bundle is still
useful. Used by tests/unit/test_debug_bundle.py (local backend) and
tests/integration/test_cluster_conformance.py (the stand-in cluster)."""

from __future__ import annotations

import json
from typing import Any

# --- environment values: redacted whatever the variable's name ---
ENV = {
    "DB_PASS": "pl4nted-db-pass-01",
    "MYSQL_PWD": "pl4nted-mysql-pwd-02",
    "GITHUB_PAT": "ghp_pl4ntedGithubPat03xxxxxxxxxxxxxxxxxx",
    "SIGNING_KEY": "pl4nted-signing-key-04",
    "SLACK_WEBHOOK": "https://hooks.slack.com/services/T0000/B0000/pl4ntedSlackHook05",
    "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=acct;"
                                       "AccountKey=pl4ntedAzureKey06==;EndpointSuffix=x",
    "AWS_SECRET_ACCESS_KEY": "pl4ntedAwsSecretAccessKey07",
    "HF_TOKEN": "hf_pl4ntedHuggingFace08xxxx",
    "OPAQUE_SETTING": "pl4nted-innocent-name-09",
    "WANDB_API_KEY": "pl4nted-wandb-key-10",
}
# --- argv: values after flags, `--flag=value`, positional oddities, `sh -c` scripts ---
ARGS = ["train.py", "--accesskey", "pl4nted-accesskey-11", "-p", "pl4nted-short-p-12",
        "--password=pl4nted-eq-password-13", "--db-url",
        "postgres://user:pl4nted-pg-14@db:5432/x", "login", "pl4ntedPositional15XYZ"]
SCRIPT = ("mc alias set local http://minio:9000 AKIAPL4NTED16EXAMPLE pl4nted-mc-secret-17 && "
          "export TOKEN=pl4nted-export-18; curl -H 'Authorization: Bearer pl4nted-bearer-19' "
          "https://api.example.com --api-key pl4nted-api-key-20 && echo trained")
# --- annotations: the JSON-array form of k3s node args, its env form, anything else ---
ANNOTATIONS = {
    "k3s.io/node-args": json.dumps(["server", "--token", "pl4nted-k3s-token-21",
                                    "--disable", "traefik"]),
    "k3s.io/node-env": json.dumps({"K3S_TOKEN": "pl4nted-k3s-env-22"}),
    "example.com/database": "pl4nted-annotation-23",
    "example.com/model-url": "https://bucket.s3.amazonaws.com/m?X-Amz-Algorithm=AWS4"
                             "&X-Amz-Credential=AKIAPL4NTED24XXXXXXX&X-Amz-Signature="
                             "pl4ntedAmzSignature25",
}
# --- log lines: the shapes a workload prints ---
LOG = {
    "cookie": "Cookie: session=pl4nted-cookie-26",
    "set-cookie": "set-cookie: sid=pl4nted-set-cookie-27; HttpOnly",
    "jwt": "id eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbDRudGVkMjgifQ.pl4ntedJwtSignature28",
    "pem": "-----BEGIN OPENSSH PRIVATE KEY-----\npl4ntedPemBody29\n"
           "-----END OPENSSH PRIVATE KEY-----",
    "slack": "bot xoxb-pl4nted-slack-30",
    "aws": "key AKIAPL4NTED31XXXXXXX in use",
    "userinfo": "remote https://user:pl4nted-url-pass-32@git.example.com/x.git",
    "query": "GET /x?token=pl4nted-query-token-33 200",
    "azure": "conn AccountKey=pl4ntedAcctKey34==;EndpointSuffix=x",
    "sas": "https://acct.blob.core.windows.net/c/b?sv=2021&sig=pl4ntedSasSig35&se=2030",
    "yaml": "password: pl4nted-yaml-pass-36",
    "json": '{"client_secret": "pl4nted-json-secret-37"}',
    "env": "MY_PRIVATE=pl4nted-env-print-38",
    "gitlab": "glpat-pl4ntedGitlab39xxxxxx",
    "npm": "npm_pl4ntedNpmToken40xxxxxxxxxxxxxxxxx",
    "basic": "Authorization: Basic cGw0bnRlZDo0MXBhc3N3b3Jk",
    "github-pat": "github_pat_11PL4NTED42_xxxxxxxxxxxxxxxxxxxxx",
    "openai": "sk-pl4ntedOpenAiKey43xxxxxxxx",
    "pypi": "pypi-pl4ntedPypiToken44xxxxxx",
    "kubeconfig": "client-key-data: pl4ntedClientKeyData45",
    "token": "token: pl4nted-yaml-token-46",
    "bearer": "Authorization: Bearer pl4nted-log-bearer-47",
}

# What may not appear anywhere: every value above (the PEM body as the marker).
VALUES = [*ENV.values(), "pl4nted-accesskey-11", "pl4nted-short-p-12",
          "pl4nted-eq-password-13", "pl4nted-pg-14", "pl4ntedPositional15XYZ",
          "AKIAPL4NTED16EXAMPLE", "pl4nted-mc-secret-17", "pl4nted-export-18",
          "pl4nted-bearer-19", "pl4nted-api-key-20", "pl4nted-k3s-token-21",
          "pl4nted-k3s-env-22", "pl4nted-annotation-23", "AKIAPL4NTED24XXXXXXX",
          "pl4ntedAmzSignature25", "pl4nted-cookie-26", "pl4nted-set-cookie-27",
          "pl4ntedJwtSignature28", "pl4ntedPemBody29", "pl4nted-slack-30",
          "AKIAPL4NTED31XXXXXXX", "pl4nted-url-pass-32", "pl4nted-query-token-33",
          "pl4ntedAcctKey34", "pl4ntedSasSig35", "pl4nted-yaml-pass-36",
          "pl4nted-json-secret-37", "pl4nted-env-print-38", "pl4ntedGitlab39",
          "pl4ntedNpmToken40", "cGw0bnRlZDo0MXBhc3N3b3Jk", "PL4NTED42",
          "pl4ntedOpenAiKey43", "pl4ntedPypiToken44", "pl4ntedClientKeyData45",
          "pl4nted-yaml-token-46", "pl4nted-log-bearer-47"]
# What must stay: the names, so the bundle still says what was set.
KEPT = ["DB_PASS", "MYSQL_PWD", "GITHUB_PAT", "SLACK_WEBHOOK", "--accesskey", "k3s.io/node-args",
        "train.py", "mc"]


def log_script() -> str:
    """A shell script that prints every log shape (printf, so nothing is expanded)."""
    return "".join(f"printf '%s\\n' {json.dumps(line)}; " for line in LOG.values()) + "true"


def shell_container(name: str = "main", image: str = "python:3.11") -> dict[str, Any]:
    """A container with every env value whose `sh -c` script prints the log shapes and
    holds SCRIPT (never run: inside `if false`)."""
    return {"name": name, "image": image, "command": ["sh", "-c"],
            "args": [f"{log_script()}; if false; then {SCRIPT}; fi"],
            "env": [{"name": k, "value": v} for k, v in ENV.items()]}


def args_container(name: str = "main", image: str = "python:3.11") -> dict[str, Any]:
    """A container given ARGS after `python3 -c` (which ignores them)."""
    return {"name": name, "image": image, "command": ["python3", "-c", "print('ok')"],
            "args": ARGS, "env": [{"name": k, "value": v} for k, v in ENV.items()]}


def assert_clean(files: dict[str, str]) -> None:
    text = "\n".join(files.values())
    leaked = [v for v in VALUES if v in text]
    assert not leaked, f"{len(leaked)} of {len(VALUES)} planted secrets leaked: {leaked}"
