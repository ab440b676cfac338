"""`pi serve`: Pi's agents over HTTP, with AG-UI streaming (the `serve` extra).

    from pi_runtime.server import ServeConfig, create_app, served_agents
    app = create_app(ServeConfig(agents=served_agents(["agent.toml"]),
                                 db_url="sqlite:///.pi/pi.db"))

Modules: `config` (what is served, tokens), `app` (the application), `api` (`/v1`),
`auth` (bearer tokens, the login cookie), `tenancy` (whose sessions), `stream` (runs
detached from requests, SSE), `agui` (Pi events → AG-UI), `limits` (the body limit),
`errors` (one JSON error shape), `background` (the in-process worker).
"""

from __future__ import annotations

from ..exceptions import UserError

try:
    import ag_ui.core  # noqa: F401
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise UserError(
        f"`pi serve` needs the serve extra ({exc.name} is missing): pip install 'pi-runtime[serve]'"
    ) from None

from .app import create_app
from .config import ServeConfig, TokenTable, served_agents

__all__ = ["ServeConfig", "TokenTable", "create_app", "served_agents"]
