"""A loopback artifact server for tests: a folder laid out like github.com's download paths
(`/OWNER/REPO/releases/download/TAG/FILE`, `/OWNER/REPO/archive/REF.tar.gz`), served over
http on 127.0.0.1 and a free port, with every requested path recorded. What it serves are
STAND-INS made by the tests; the real files cannot be downloaded here (no GitHub)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

K3S_VERSION = "v1.34.2+k3s1"  # the version manifests/versions.yaml pins
K3S_RELEASE = f"k3s-io/k3s/releases/download/{K3S_VERSION}"


def k3s_standin(version: str = K3S_VERSION) -> bytes:
    """A STAND-IN for the k3s binary: answers --version like k3s, refuses to run a server."""
    return (b"#!/bin/sh\n# kflab test STAND-IN for the k3s binary (not k3s)\n"
            b'if [ "$1" = --version ]; then\n'
            b"  echo 'k3s version " + version.encode() + b" (00000000)'\n"
            b"  echo 'go version go0.0 (kflab stand-in)'\n  exit 0\nfi\n"
            b"echo 'kflab stand-in: this is not the real k3s, it cannot start a cluster' >&2\n"
            b"exit 1\n")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sums(entries: dict[str, str]) -> bytes:
    """A checksum file in the format of k3s' sha256sum-ARCH.txt (`SHA  NAME` lines)."""
    return "".join(f"{sha}  {name}\n" for name, sha in entries.items()).encode()


class ArtifactServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(root), **kw)

            def do_GET(self):
                with server._lock:
                    server.requests.append(urllib.parse.unquote(self.path.split("?")[0]))
                return super().do_GET()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def put(self, path: str, data: bytes | str) -> Path:
        """Serve DATA at /PATH (PATH unquoted, as the handler maps it)."""
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        return target

    def put_json(self, path: str, doc: dict) -> Path:
        return self.put(path, json.dumps(doc))

    def fetched(self, suffix: str) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.endswith(suffix))


@contextmanager
def serve(root: Path) -> Iterator[ArtifactServer]:
    root.mkdir(parents=True, exist_ok=True)
    srv = ArtifactServer(root)
    thread = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
