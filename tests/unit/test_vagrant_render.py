"""Rendering details a reviewer checks without running Vagrant."""

from __future__ import annotations

import re

import pytest

from lab import config
from lab.providers.vagrant import mac_for, render


@pytest.mark.parametrize("ssh_port", [1024, 2222, 34819, 65535])
def test_user_network_ports_are_valid_and_loopback(ssh_port: int) -> None:
    p = config.parse(f"provider: vagrant-libvirt\napi_port: 6443\n"
                     f"vagrant: {{network: user, ssh_port: {ssh_port}}}\n")
    text = render(p)
    ports = [int(x) for x in re.findall(r'tunnel(?:_local)?_port: "(\d+)"', text)]
    assert len(ports) == 2 and all(40000 <= x <= 59999 for x in ports)
    assert f"hostfwd=tcp:127.0.0.1:{ssh_port}-:22" in text
    assert "restrict=on" not in text  # only with isolated: true
    assert mac_for(p.name) in text


def test_virtualbox_sizes_and_loopback() -> None:
    text = render(config.parse("provider: vagrant-virtualbox\ncpus: 6\nmemory: 12\ndisk: 80\n"))
    assert "vb.cpus = 6" in text and "vb.memory = 12288" in text
    assert 'size: "80GB", primary: true' in text
    assert text.count('host_ip: "127.0.0.1"') == 2


def test_libvirt_managed_network_forwards_api_to_loopback() -> None:
    text = render(config.parse("provider: vagrant-libvirt\napi_port: 16443\n"))
    assert 'guest: 6443, host: 16443,\n    host_ip: "127.0.0.1"' in text
    assert "lv.machine_virtual_size = 40" in text and 'lv.cpu_mode = "host-passthrough"' in text
    assert "qemuargs" not in text and "mgmt_attach" not in text
