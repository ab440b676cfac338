"""The `pi serve` application, built from a `ServeConfig`.

    app = create_app(ServeConfig(agents=served_agents(["agent.toml"]), db_url=url))
    uvicorn.run(app, host="127.0.0.1", port=8000)

Routers: `auth.router` (`POST /login`, `/logout`), `api.router` (`/v1`, behind
`auth.principal`), `browse.router` (the viewer's JSON, `/v1` too), `viewer.router` (the
trace viewer's pages at `/`), and `/healthz`. More surfaces plug in as one more router
here: their routes take `auth.Caller` for the same bearer-or-cookie auth, and
`server_state(request)` for the store, the served agents and the live runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI

from ..durable import Store, open_store
from ..observe import otel
from . import api, auth, browse, viewer
from .auth import Authenticator
from .background import WorkerThread
from .config import ServeConfig
from .errors import CatchAll, install_error_handlers
from .limits import BodyLimit
from .state import ServerState

DRAIN_S = 20.0
_THREADS = 64  # store calls go through threads: enough that lease renewals never queue


def create_app(config: ServeConfig, *, store: Store | None = None) -> FastAPI:
    """The server for `config` (its store opened now, unless given: a bad URL fails here,
    before anything listens)."""
    state = ServerState(config=config, store=store or open_store(config.db_url, pool_size=10))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=_THREADS))
        otel.configure_from_env()  # export on now, if OTEL_* says so: a bad setting warns early
        worker = None
        if config.workers:
            worker = WorkerThread(
                state.store,
                slots=config.workers,
                lease_s=config.lease_s,
                trace_dir=config.trace_dir,
                drain_s=DRAIN_S,
                name=state.name,
            )
            worker.start()
        try:
            yield
        finally:
            await state.hub.drain(DRAIN_S)
            if worker is not None:
                await asyncio.to_thread(worker.stop, DRAIN_S + 5)
            for model in list(state.models.values()):
                with suppress(Exception):
                    await model.aclose()
            if store is None:
                state.store.close()
            otel.shutdown()  # what the last runs buffered reaches the receiver

    app = FastAPI(
        title="Pi",
        summary="Agent runs over HTTP: RunResult JSON or AG-UI events.",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,  # the documentation pages load scripts from the internet
        redoc_url=None,
    )
    app.state.pi = state
    app.state.auth = Authenticator(config.tokens)
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(CatchAll)  # added last: the outermost of the two
    app.include_router(auth.router)
    app.include_router(api.router)
    app.include_router(browse.router)
    app.include_router(viewer.router)

    @app.get("/healthz", tags=["health"], summary="Whether the server answers")
    async def healthz() -> dict[str, object]:
        return {"status": "ok", "running": state.hub.running}

    return app


def _version() -> str:
    try:
        return version("pi-runtime")
    except PackageNotFoundError:
        return "0"
