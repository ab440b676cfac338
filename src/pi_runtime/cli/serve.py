"""`pi serve`: the served agents over HTTP (RunResult JSON or AG-UI events)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..exceptions import UserError
from ._console import err_console, fail, say
from .session import DbOption, db_url

TOKEN_ENV = "PI_SERVE_TOKEN"


def serve_command(
    agent: Annotated[
        list[str],
        typer.Option(
            "--agent",
            help="[NAME=]FILE.toml to serve (repeatable; the first is the default). NAME "
            "defaults to the file's stem, or its folder's name for agent.toml.",
        ),
    ],
    db: DbOption = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: any).")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=TOKEN_ENV,
            show_envvar=True,
            help="Bearer token every /v1 request needs (prefer the variable: argv is public).",
        ),
    ] = None,
    tokens: Annotated[
        Path | None,
        typer.Option("--tokens", help="JSON or TOML file mapping tokens to tenants."),
    ] = None,
    max_body: Annotated[
        int, typer.Option("--max-body", min=1, help="Largest request body in bytes (else 413).")
    ] = 1_000_000,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", min=0, help="In-process worker slots for background jobs (0: none)."
        ),
    ] = 1,
    trace_dir: Annotated[
        Path | None, typer.Option("--trace-dir", help="Where runs write their traces.")
    ] = None,
    lease: Annotated[
        float,
        typer.Option(
            "--lease", min=0.1, help="Lease seconds: if the server dies, a worker takes over."
        ),
    ] = 30.0,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            "--forwarded-allow-ips",
            envvar="FORWARDED_ALLOW_IPS",
            show_envvar=True,
            help="Comma-separated proxy addresses (or '*') whose X-Forwarded-Proto/-For "
            "are trusted, e.g. a TLS proxy on another host (default: 127.0.0.1,::1).",
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's: critical, error, warning, info, debug.")
    ] = "info",
) -> None:
    """Serve agents over HTTP: POST /v1/sessions/{id}/runs answers with the RunResult, or
    AG-UI events for Accept: text/event-stream. Refuses a public --host without a token."""
    if token is not None and tokens is not None:
        fail("give --token or --tokens, not both")
    try:
        # the package checks the serve extra is installed (an install hint if not)
        from ..server.config import ServeConfig, TokenTable, check_exposure, served_agents

        table = (
            TokenTable.from_file(tokens)
            if tokens is not None
            else TokenTable.single(token)
            if token is not None
            else None
        )
        check_exposure(host, table)
        config = ServeConfig(
            agents=served_agents(agent),
            db_url=db_url(db),
            tokens=table,
            max_body_bytes=max_body,
            trace_dir=trace_dir.resolve() if trace_dir is not None else None,
            workers=workers,
            lease_s=lease,
        )
        from ..server import create_app

        app = create_app(config)
    except UserError as exc:
        fail(exc)
    import uvicorn

    say(
        err_console(),
        f"pi serve: agents {', '.join(config.agents)} · store {app.state.pi.store.url} · "
        + ("tenants" if table is not None and table.tenanted else "token" if table else "no auth"),
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        server_header=False,
        # behind a trusted TLS proxy the request's scheme is https: the cookie is Secure
        forwarded_allow_ips=forwarded_allow_ips,
        timeout_graceful_shutdown=30,
    )
