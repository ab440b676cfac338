"""The web trace viewer: pages at `/`, their script and style under `/static/`.

    GET /                   the caller's sessions
    GET /sessions/{id}      a session's runs, pending approvals and messages
    GET /runs/{id}          a run's timeline, live while it runs
    GET /login?next=/path   the login form (it posts to `auth`'s `POST /login`)

Every page is the same HTML shell; `web/viewer.js` draws it from the `/v1` JSON (the
API's and `browse`'s) with `textContent` only, never as markup. Nothing is fetched from
anywhere but this server, and the Content-Security-Policy says so: a string from a run
that slipped into the page as markup still could not run a script or call out. A page
request without a login redirects to the form.
"""

from __future__ import annotations

import html
from functools import cache
from importlib.resources import files
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import RedirectResponse, Response

from .auth import _safe_next, authenticator
from .errors import ApiError
from .tenancy import ID_PATTERN

router = APIRouter(include_in_schema=False)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
ASSETS = {"viewer.js": "text/javascript", "viewer.css": "text/css", "favicon.svg": "image/svg+xml"}
PageId = Annotated[str, PathParam(pattern=ID_PATTERN)]


@cache
def asset(name: str) -> bytes:
    """A file of the viewer, as the package ships it."""
    return (files("pi_runtime.server") / "web" / name).read_bytes()


def _page(request: Request, name: str) -> Response:
    if authenticator(request).principal_of(request) is None:
        target = quote(request.url.path, safe="/")
        return RedirectResponse(f"/login?next={target}", status_code=303, headers=HEADERS)
    return Response(asset(name), media_type="text/html; charset=utf-8", headers=HEADERS)


@router.get("/")
async def sessions_page(request: Request) -> Response:
    return _page(request, "page.html")


@router.get("/sessions/{session_id}")
async def session_page(session_id: PageId, request: Request) -> Response:
    return _page(request, "page.html")


@router.get("/runs/{run_id}")
async def run_page(run_id: PageId, request: Request) -> Response:
    return _page(request, "page.html")


@router.get("/login")
async def login_page(request: Request, next: str = "/") -> Response:
    target = _safe_next(next)
    if authenticator(request).open:  # no tokens: nothing to log in to
        return RedirectResponse(target, status_code=303, headers=HEADERS)
    body = asset("login.html").decode().replace("{next}", html.escape(target, quote=True))
    return Response(body, media_type="text/html; charset=utf-8", headers=HEADERS)


@router.get("/static/{name}")
async def static(name: str) -> Response:
    media = ASSETS.get(name)
    if media is None:
        raise ApiError(404, "no such file")
    headers = {**HEADERS, "Cache-Control": "no-cache"}
    return Response(asset(name), media_type=f"{media}; charset=utf-8", headers=headers)
