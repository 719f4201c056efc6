"""`kflab ui`: the local web UI and KFP API server (parse, call, print)."""

from __future__ import annotations

import click

from lab.cli.root import Obj, backend_options, cli, pass_obj


@cli.command("ui")
@click.option("--port", type=click.IntRange(0, 65535), default=0,
              help="Port on 127.0.0.1 (default: a free one).")
@click.option("--no-browser", is_flag=True, help="Print the URL; do not open a browser.")
@click.option("--api-token", is_flag=True,
              help="The KFP API needs the token too: kfp.Client(host=..., existing_token=...) "
                   "(for a machine shared with other users).")
@backend_options
@pass_obj
def ui_cmd(obj: Obj, port: int, no_browser: bool, api_token: bool) -> None:
    """Serve the read-only web UI (runs, experiments, jobs, model servers, notebooks) and the
    KFP v2beta1 API for kfp.Client, on 127.0.0.1 until Ctrl-C."""
    from lab.webui.server import UiServer

    server = UiServer(obj.backend(), obj.state, port=port, api_token=api_token)
    click.echo(f"kflab ui: {server.url}")
    token = f", existing_token=\"{server.token}\"" if api_token else ""
    click.echo(f"KFP API:  kfp.Client(host=\"{server.host}\"{token})")
    click.echo("Ctrl-C stops it.", err=True)
    server.start()  # serving before the browser asks (a BROWSER command may wait on it)
    if not no_browser:
        import threading
        import webbrowser

        from lab import state

        # The browser gets a 0600 file that trades a one-time code for the cookie, never
        # the token: a command line is readable by every local user (/proc/PID/cmdline).
        opener = server.launch_file(state.path(obj.state, "ui"))

        def open_it() -> None:
            if not webbrowser.open(opener.as_uri()):  # a server, a container, no $DISPLAY
                click.echo(f"no web browser found here: open the kflab ui address above in "
                           f"yours (from another machine: ssh -L {server.port}:127.0.0.1:"
                           f"{server.port} THIS-HOST first)", err=True)

        threading.Thread(target=open_it, daemon=True, name="kflab-ui-browser").start()
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
