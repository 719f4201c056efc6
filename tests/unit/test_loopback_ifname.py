"""gloo/NCCL are pinned to the loopback interface by name, and the name differs: `lo` on
Linux, `lo0` on macOS (whose interface list is faked here: no macOS on this machine)."""

from __future__ import annotations

import socket

import pytest

from lab.backends.local.training import env


def test_linux_loopback_is_lo() -> None:
    names = {name for _, name in socket.if_nameindex()}
    assert env.loopback_ifname() == "lo" and "lo" in names


def test_macos_loopback_is_lo0(monkeypatch: pytest.MonkeyPatch) -> None:
    mac = [(1, "lo0"), (2, "gif0"), (3, "stf0"), (4, "anpi0"), (5, "en0"), (6, "utun0")]
    monkeypatch.setattr(socket, "if_nameindex", lambda: mac)
    assert env.loopback_ifname() == "lo0"
