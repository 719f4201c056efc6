"""STAND-IN for a node's kubelet: the two endpoints the API server proxies to it.

The real kube-apiserver answers `pods/log` and `pods/portforward` by calling the kubelet of
the pod's node (the Node's InternalIP and kubeletEndpoint port, over TLS). This server plays
that kubelet on 127.0.0.1 for pods whose containers the controller stand-in runs as local
processes:
- GET /containerLogs/{ns}/{pod}/{container}[?tailLines=N]: the container's output so far;
- GET /portForward/{ns}/{pod}?port=P with a websocket upgrade (`v4.channel.k8s.io`, the
  protocol the Python client speaks): channel 2i carries data for the i-th port, 2i+1 its
  errors; each channel first sends its port (uint16, little-endian), as the kubelet does.
  Bytes go to the local port registered for that pod port.

Not covered: SPDY port-forward (kubectl's default), exec/attach, follow of a growing log
(the log is sent as it is), previous container logs, timestamps.
"""

from __future__ import annotations

import base64
import hashlib
import os
import select
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
LogSource = Callable[[], Iterable[str]]


def self_signed(folder: Path, name: str = "kubelet") -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (it is its own CA), made with openssl."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    os.chmod(key, 0o600)
    return cert, key


@dataclass
class Kubelet:
    cert: Path
    key: Path
    port: int = 0
    logs: dict[tuple[str, str, str], LogSource] = field(default_factory=dict)
    ports: dict[tuple[str, str, int], int] = field(default_factory=dict)  # -> local port
    server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        handler = type("Handler", (_Handler,), {"kubelet": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.cert), str(self.key))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _frame(payload: bytes, opcode: int = 2) -> bytes:
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack(">H", n)
    else:
        head += bytes([127]) + struct.pack(">Q", n)
    return head + payload


def _read_exact(sock: Any, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _read_frame(sock: Any) -> tuple[int, bytes]:
    b1, b2 = _read_exact(sock, 2)
    opcode, masked, n = b1 & 0x0F, b2 & 0x80, b2 & 0x7F
    if n == 126:
        n = struct.unpack(">H", _read_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", _read_exact(sock, 8))[0]
    mask = _read_exact(sock, 4) if masked else b"\0\0\0\0"
    data = bytes(b ^ mask[i % 4] for i, b in enumerate(_read_exact(sock, n)))
    return opcode, data


class _Handler(BaseHTTPRequestHandler):
    kubelet: Kubelet
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        return

    def _fail(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        query = parse_qs(url.query)
        if parts[0] == "containerLogs" and len(parts) == 4:
            self._logs(parts[1], parts[2], parts[3], query)
        elif parts[0] == "portForward" and len(parts) == 3:
            self._port_forward(parts[1], parts[2], query)
        else:
            self._fail(404, f"the kubelet stand-in does not serve {url.path}")

    def _logs(self, ns: str, pod: str, container: str, query: dict[str, list[str]]) -> None:
        source = self.kubelet.logs.get((ns, pod, container))
        if source is None:
            self._fail(404, f"container {container} of pod {ns}/{pod} is not running here")
            return
        lines = list(source())
        if "tailLines" in query:
            lines = lines[-int(query["tailLines"][0]):] if int(query["tailLines"][0]) else []
        data = "".join(f"{line}\n" for line in lines).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _port_forward(self, ns: str, pod: str, query: dict[str, list[str]]) -> None:
        ports = [int(p) for p in query.get("port", [])]
        key = self.headers.get("Sec-WebSocket-Key")
        if not key or not ports:
            self._fail(400, "a websocket upgrade with ?port= is required")
            return
        targets = [self.kubelet.ports.get((ns, pod, p)) for p in ports]
        if None in targets:
            self._fail(404, f"pod {ns}/{pod} exposes no such port here")
            return
        protocols = [p.strip() for p in (self.headers.get("Sec-WebSocket-Protocol") or "")
                     .split(",")]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        if "v4.channel.k8s.io" in protocols:
            self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        self.wfile.flush()
        ws = self.connection
        lock = threading.Lock()
        locals_: dict[int, socket.socket] = {}
        for i, (port, target) in enumerate(zip(ports, targets, strict=True)):
            for channel in (2 * i, 2 * i + 1):
                ws.sendall(_frame(bytes([channel]) + struct.pack("<H", port)))
            locals_[2 * i] = socket.create_connection(("127.0.0.1", int(target)), timeout=30)

        def pump(channel: int, sock: socket.socket) -> None:
            try:
                while True:
                    data = sock.recv(65536)
                    if not data:
                        break
                    with lock:
                        ws.sendall(_frame(bytes([channel]) + data))
            except OSError:
                pass

        for channel, sock in locals_.items():
            threading.Thread(target=pump, args=(channel, sock), daemon=True).start()
        try:
            while True:
                readable, _, _ = select.select([ws], [], [], 0 if ws.pending() else 60)
                if not readable and not ws.pending():
                    continue
                opcode, data = _read_frame(ws)
                if opcode == 8:  # close
                    break
                if opcode == 9:  # ping
                    with lock:
                        ws.sendall(_frame(data, 10))
                    continue
                if opcode in (1, 2) and data:
                    sock = locals_.get(data[0])
                    if sock is not None and len(data) > 1:
                        sock.sendall(data[1:])
        except (OSError, ConnectionError):
            pass
        finally:
            for sock in locals_.values():
                sock.close()
            self.close_connection = True
