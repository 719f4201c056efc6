"""Issue 34, Why #3: `kflab ui` passed its token on the browser's command line, readable by
every local user in /proc. Here `kflab ui` runs for real with BROWSER set to a recording
script (the browser child): while it runs, the test reads /proc/*/cmdline of every process
(the browser child's included) and finds no token; the script follows what it was given (a
0600 file in the state folder) to the one-time code, which the server trades once for the
token's cookie. The headless-Chromium half (address bar and history) is in
tests/integration/test_webui_browser.py."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from lab.backends.local import LocalBackend
from lab.webui.server import UiServer
from tests.conftest import REPO

# The "browser": records its own pid, argv and what the file it was given says, waits for
# the test to look at /proc, then follows the file's link as a browser would.
BROWSER = r'''#!{python}
import json, os, re, stat, sys, time, urllib.parse, urllib.request
out = {out!r}
target = sys.argv[1]
path = urllib.parse.urlparse(target).path
info = {{"pid": os.getpid(), "argv": sys.argv, "mode": stat.S_IMODE(os.stat(path).st_mode)}}
open(out + ".pid", "w").write(str(os.getpid()))
for _ in range(100):  # until the test has read /proc (at most 10 s)
    if os.path.exists(out + ".seen"):
        break
    time.sleep(0.1)
page = open(path).read()
link = re.search(r'url=(http://[^"]+)"', page).group(1)
info["link"] = link
with urllib.request.urlopen(link, timeout=10) as res:
    info["status"] = res.status
    info["cookie"] = res.headers.get_all("Set-Cookie")
try:
    urllib.request.urlopen(link, timeout=10)
    info["again"] = 200
except urllib.error.HTTPError as exc:
    info["again"] = exc.code
json.dump(info, open(out, "w"))
'''


def cmdlines() -> dict[int, bytes]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    found[int(entry)] = fh.read()
            except OSError:
                continue
    return found


def test_the_token_never_reaches_a_command_line(tmp_path: Path) -> None:
    record = tmp_path / "browser.json"
    script = tmp_path / "browser"
    script.write_text(BROWSER.format(python=sys.executable, out=str(record)))
    script.chmod(0o755)
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BROWSER": str(script)}
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "--state", str(state), "ui"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        token = re.search(r"\?token=(\S+)", first)
        assert token, first
        pid_file = Path(f"{record}.pid")
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "no browser started"
            time.sleep(0.05)
        browser_pid = int(pid_file.read_text())
        lines = cmdlines()  # every process, the browser child while it runs among them
        assert browser_pid in lines
        holders = [pid for pid, line in lines.items() if token.group(1).encode() in line]
        assert holders == [], f"the token is on the command line of {holders}"
        assert b"file://" in lines[browser_pid] and b"code=" not in lines[browser_pid]
        Path(f"{record}.seen").touch()
        while not record.exists():
            assert time.monotonic() < deadline, "the browser never followed the link"
            time.sleep(0.05)
        seen = json.loads(record.read_text())
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    assert seen["mode"] == 0o600
    opened = Path(seen["argv"][1][len("file://"):])
    assert opened.parent == state / "ui" and stat.S_IMODE(opened.parent.stat().st_mode) == 0o700
    assert not opened.exists()  # removed when the server stopped
    assert "code=" in seen["link"] and token.group(1) not in seen["link"]
    assert seen["status"] == 200
    assert any(c.startswith("kflab_token_") and f"={token.group(1)};" in c and "HttpOnly" in c
               for c in seen["cookie"])
    assert seen["again"] == 403  # one use only


def test_a_code_works_once_and_not_for_the_api(tmp_path: Path) -> None:
    ui = UiServer(LocalBackend(str(tmp_path)), tmp_path).start()
    try:
        code = ui.one_time_code()

        def get(path: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{ui.port}"})
            return conn.getresponse().status

        assert get(f"/ui-api/runs?code={code}") == 403  # a code opens the page, nothing else
        assert get(f"/?code={code}") == 200
        assert get(f"/?code={code}") == 403
        assert get("/?code=guessed") == 403
        expired = ui.one_time_code()
        ui._codes[expired] = time.monotonic() - 1
        assert get(f"/?code={expired}") == 403
    finally:
        ui.stop()


def test_no_browser_here_is_said(tmp_path: Path) -> None:
    """A headless machine (BROWSER names no program, no $DISPLAY): `kflab ui` says it found
    no browser and how to reach the address, and keeps serving until Ctrl-C."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(PYTHONPATH=str(REPO), BROWSER=str(tmp_path / "no-such-browser"))
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "--state", str(tmp_path / "s"),
                             "ui"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stderr is not None
        said = ""
        deadline = time.monotonic() + 60
        while "no web browser found here" not in said:
            assert time.monotonic() < deadline and proc.poll() is None, said
            if select.select([proc.stderr], [], [], 1.0)[0]:  # never blocks past the deadline
                said += proc.stderr.readline()
        assert "ssh -L" in said and proc.poll() is None, said
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
