"""``scaleright dashboard``: serve the web dashboard (``scaleright.dashboard``) on loopback."""

from __future__ import annotations

from pathlib import Path

import typer

from scaleright.cli.common import CatalogOpt, catalog_from, console, esc, profile_from
from scaleright.errors import InputError

PORT_MIN, PORT_MAX = 1, 65535


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard_cmd)


def dashboard_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; loopback by default. Another address "
                             "exposes the dashboard to that network (it has no login)."),
    port: int = typer.Option(8765, "--port", help="TCP port (1-65535)."),
    db: Path | None = typer.Option(None, "--db", help="Run database to show (default: the user data directory's)."),
    calibration: str | None = typer.Option(None, "--calibration", help="Calibration profile name or JSON path "
                                           "that plans use."),
    catalog: Path | None = CatalogOpt,
) -> None:
    """A web dashboard over the Python API: scenario editor, plans with interactive charts, two plans side by side,
    stored runs and calibration profiles, the catalog with sources. Needs `pip install "scaleright[dashboard]"`."""
    if not PORT_MIN <= port <= PORT_MAX:
        raise InputError(f"--port={port} must be between {PORT_MIN} and {PORT_MAX}")
    if not host or len(host) > 253 or any(c.isspace() for c in host):
        raise InputError(f"--host={host!r} must be an address or host name, e.g. 127.0.0.1")
    try:
        import uvicorn

        from scaleright.dashboard.app import LOOPBACK_HOSTS, create_app
    except ImportError as exc:
        raise InputError(f"the dashboard needs its extra: pip install \"scaleright[dashboard]\" ({exc.name} is "
                         "missing)") from None  # fmt: skip
    app = create_app(catalog=catalog_from(catalog), db=db, profile=profile_from("--calibration", calibration),
                     loopback_only=host in LOOPBACK_HOSTS)  # fmt: skip
    if host not in LOOPBACK_HOSTS:
        console.print(f"[yellow]warning:[/yellow] serving on {esc(host)}: anyone who can reach it can use it "
                      "(no login)")
    console.print(f"scaleright dashboard on http://{esc(host)}:{port}/ (Ctrl-C stops it)")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    except OSError as exc:
        raise InputError(f"--port={port}: cannot listen on {host} ({exc.strerror or exc})") from None
