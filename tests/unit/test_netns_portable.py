"""The replicas' private network namespace is a Linux kernel feature: elsewhere (macOS) the
holder says so in one line, which the training backend turns into its host-network warning.
macOS cannot exist here, so sys.platform is faked in the holder's own interpreter."""

from __future__ import annotations

import subprocess
import sys

from lab.backends.local.training.run import NETNS

FAKE_MAC = ("import runpy, sys; sys.platform = 'darwin'; sys.argv = ['netns.py', 'hold']; "
            f"runpy.run_path({str(NETNS)!r}, run_name='__main__')")


def test_holder_says_unavailable_off_linux() -> None:
    res = subprocess.run([sys.executable, "-I", "-S", "-c", FAKE_MAC], capture_output=True,
                         text=True, timeout=30, check=False)
    assert res.returncode == 1, res.stderr
    assert res.stdout == "unavailable: network namespaces are Linux-only (this is darwin)\n"
    assert not res.stderr
