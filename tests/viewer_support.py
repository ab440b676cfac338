"""A `pi serve` for the trace viewer's tests (real uvicorn on 127.0.0.1, see
`serve_support`), its tokens, and the Chromium the browser tests drive.

    with viewer_server(tmp_path, [APPROVAL], tokens=tenants(tmp_path)) as server: ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from pi_runtime.server import ServeConfig, TokenTable, create_app, served_agents
from serve_support import REPO, ThreadServer

APPROVAL = str(REPO / "examples" / "approval" / "agent.toml")
TOKEN = "viewer-token-0123456789"
ACME = "acme-token-0123456789"
ZETA = "zeta-token-0123456789"
CHROMIUM = Path("/usr/bin/chromium")


def tenants(tmp_path: Path) -> TokenTable:
    """Two tenants, `acme` and `zeta`, with the tokens ACME and ZETA."""
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ACME: "acme", ZETA: "zeta"}), encoding="utf-8")
    return TokenTable.from_file(path)


@contextmanager
def viewer_server(
    tmp_path: Path, agents: list[str], *, tokens: TokenTable | None = None, **options: Any
) -> Iterator[ThreadServer]:
    """`pi serve` of `agents` on a SQLite store in `tmp_path`, traces in `tmp_path/traces`
    (refunds of the approval example go to `tmp_path/refunds.jsonl`)."""
    before = os.environ.get("PI_REFUND_LEDGER")
    os.environ["PI_REFUND_LEDGER"] = str(tmp_path / "refunds.jsonl")
    config = ServeConfig(
        agents=served_agents(agents),
        db_url=f"sqlite:///{tmp_path / 'pi.db'}",
        trace_dir=tmp_path / "traces",
        tokens=tokens,
        **options,
    )
    try:
        with ThreadServer(create_app(config)) as server:
            yield server
    finally:
        if before is None:
            os.environ.pop("PI_REFUND_LEDGER", None)
        else:
            os.environ["PI_REFUND_LEDGER"] = before


def client(server: ThreadServer, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, timeout=60, headers=headers)


def refunds(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "refunds.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
