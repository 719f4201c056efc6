"""STAND-IN for the kube-apiserver's aggregation layer: one API endpoint over two real servers.

A cluster serves core objects and custom resources from one URL. Here they come from two
real API servers (tests/standins/apiservers.py): the v1.20 kube-apiserver (core: Namespaces,
ConfigMaps, Pods, Services, Nodes, logs and port-forward through the kubelet stand-in) and the
v1.36 CRD API server (the upstream Kubeflow CRDs, unchanged). This proxy routes each request
by API group, as the aggregator routes by APIService: `/apis/<group>/...` of a group the CRD
server serves goes there, everything else to the kube-apiserver; `/apis` merges both group
lists. It forwards bodies and streams (watches, logs) unchanged, and tunnels upgraded
connections (port-forward websockets) byte for byte.

Not covered: aggregated discovery (v2), OpenAPI merging, priority of overlapping groups
(apiextensions.k8s.io goes to the CRD server, where the CRDs live). Credentials: each client
token is mapped to the same user's token on each server (same user names on both).
Listens on 127.0.0.1 only, plain HTTP (loopback).
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
       "trailers", "transfer-encoding", "upgrade", "host", "authorization",
       "content-length"}


@dataclass
class Upstream:
    name: str
    url: str  # https://127.0.0.1:PORT
    ca: str
    tokens: dict[str, str]  # user -> token on this server

    @property
    def hostport(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or 443

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca)

    def connection(self, timeout: float | None = 60) -> http.client.HTTPSConnection:
        host, port = self.hostport
        return http.client.HTTPSConnection(host, port, context=self.context(), timeout=timeout)


@dataclass
class Aggregator:
    core: Upstream
    crd: Upstream
    tokens: dict[str, str]  # user -> token clients present to the proxy
    port: int = 0
    crd_groups: set[str] = field(default_factory=set)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def user_of(self, header: str | None) -> str | None:
        token = (header or "").removeprefix("Bearer ").strip()
        return next((u for u, t in self.tokens.items() if t == token), None)

    def refresh_groups(self) -> None:
        conn = self.crd.connection(10)
        try:
            conn.request("GET", "/apis", headers={
                "Authorization": f"Bearer {self.crd.tokens['admin']}"})
            data = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        self.crd_groups = {g["name"] for g in data.get("groups") or []}

    def route(self, path: str) -> Upstream:
        parts = path.split("?", 1)[0].strip("/").split("/")
        if len(parts) >= 2 and parts[0] == "apis":
            group = parts[1]
            if group == "apiextensions.k8s.io":
                return self.crd
            if group not in self.crd_groups:
                self.refresh_groups()  # a CRD established since the last look
            if group in self.crd_groups:
                return self.crd
        return self.core

    def start(self) -> None:
        self.refresh_groups()
        handler = type("Handler", (_Handler,), {"agg": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    agg: Aggregator
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:  # quiet
        return

    def _auth(self, up: Upstream) -> str:
        user = self.agg.user_of(self.headers.get("Authorization"))
        if user is None:  # unknown to the proxy: let the server refuse it (401)
            return self.headers.get("Authorization") or ""
        return f"Bearer {up.tokens[user]}"

    def _merged_groups(self) -> None:
        out: dict[str, Any] = {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
        status = 200
        for up in (self.agg.core, self.agg.crd):
            conn = up.connection(10)
            try:
                conn.request("GET", "/apis", headers={"Authorization": self._auth(up),
                                                      "Accept": "application/json"})
                resp = conn.getresponse()
                body = resp.read()
            finally:
                conn.close()
            if resp.status != 200:
                status = resp.status
                out = json.loads(body or b"{}")
                break
            names = {g["name"] for g in out["groups"]}
            out["groups"] += [g for g in json.loads(body)["groups"] if g["name"] not in names]
        data = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _forward(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/") == "/apis":
            self._merged_groups()
            return
        up = self.agg.route(self.path)
        if "upgrade" in (self.headers.get("Connection") or "").lower():
            self._tunnel(up)
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Authorization"] = self._auth(up)
        conn = up.connection(timeout=None)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            declared = resp.getheader("Content-Length")
            if declared is not None:
                self.send_header("Content-Length", declared)
                self.end_headers()
                self.wfile.write(resp.read())
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while True:  # a stream (watch, log follow): pass each piece on as it comes
                chunk = resp.read1(65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):
            # the client went away, or the server cut a stream: end this connection
            self.close_connection = True
        finally:
            conn.close()

    def _tunnel(self, up: Upstream) -> None:
        """An upgraded request (websocket port-forward): send it on, then copy bytes."""
        host, port = up.hostport
        raw = socket.create_connection((host, port), timeout=30)
        remote = up.context().wrap_socket(raw, server_hostname=host)
        lines = [f"{self.command} {self.path} HTTP/1.1", f"Host: {host}:{port}",
                 f"Authorization: {self._auth(up)}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()
                  if k.lower() not in ("host", "authorization")]
        remote.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        client = self.connection
        client.settimeout(None)
        remote.settimeout(None)
        pair = {client: remote, remote: client}
        try:
            while True:
                readable, _, _ = select.select(list(pair), [], [], 0 if remote.pending()
                                               else 60)
                if remote.pending() and remote not in readable:
                    readable.append(remote)  # TLS bytes already decrypted, select can't see
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    pair[src].sendall(data)
        except OSError:
            return
        finally:
            self.close_connection = True
            remote.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward
