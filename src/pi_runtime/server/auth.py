"""Who may call: a bearer token, or the cookie `POST /login` sets for a browser.

    Authorization: Bearer TOKEN          # programs
    POST /login  token=TOKEN&next=/      # a form: sets the `pi_session` cookie, then 303

`principal` is the dependency every protected route takes; it answers 401 (with
`WWW-Authenticate: Bearer`) when neither is valid. Tokens are compared in constant time
against every entry (digests, so lengths leak nothing) and never logged. The cookie holds
the tenant, an expiry and a random id, signed with a key made when the server starts: it
never holds the token, and a restart ends every browser session. `POST /logout` revokes
the cookie it is sent with, so a copy kept elsewhere stops working too (the server
remembers revoked ids until they would have expired anyway, up to `MAX_REVOKED`; past
that it changes its key, which logs every browser out).

A browser sends the cookie with any request to this server, whichever page made it, so a
`/v1` request that changes state and carries no bearer header must come from this server's
own pages (`Sec-Fetch-Site`, else `Origin`): 403 `cross_site` otherwise.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import RedirectResponse

from .config import TokenTable
from .errors import ApiError
from .tenancy import Principal

COOKIE = "pi_session"
COOKIE_TTL_S = 12 * 3600
MAX_REVOKED = 65_536  # cookies remembered as logged out; past it the signing key changes
_NO_TENANT = "-"  # a cookie's tenant field when tokens name none


@dataclass(slots=True)
class Authenticator:
    """Checks tokens and cookies against the server's `TokenTable` (None: open)."""

    tokens: TokenTable | None
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    # the ids of cookies logged out, with when each expires (then it is forgotten)
    revoked: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def open(self) -> bool:
        return self.tokens is None

    def from_token(self, given: str) -> Principal | None:
        if self.tokens is None:
            return Principal()
        wanted = hashlib.sha256(given.encode("utf-8", "surrogateescape")).digest()
        found: Principal | None = None
        for token, tenant in self.tokens.entries:  # no early exit: every entry is compared
            if hmac.compare_digest(wanted, hashlib.sha256(token.encode()).digest()):
                found = Principal(tenant)
        return found

    def cookie_for(self, principal: Principal, *, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + COOKIE_TTL_S)
        tenant = principal.tenant if principal.tenant is not None else _NO_TENANT
        encoded = base64.urlsafe_b64encode(tenant.encode()).decode()
        body = f"{encoded}.{expires}.{secrets.token_hex(16)}"
        return f"{body}.{self._sign(body)}"

    def from_cookie(self, value: str, *, now: float | None = None) -> Principal | None:
        opened = self._opened(value, now)
        if opened is None or opened[1] in self.revoked:
            return None
        return opened[0]

    def revoke(self, value: str, *, now: float | None = None) -> bool:
        """Make the cookie `value` invalid from now on (False: it was not valid)."""
        opened = self._opened(value, now)
        if opened is None:
            return False
        clock = time.time() if now is None else now
        for known, expires in list(self.revoked.items()):  # forget those expired anyway
            if expires < clock:
                del self.revoked[known]
        if len(self.revoked) >= MAX_REVOKED:  # a new key: every browser logs in again
            self.key = secrets.token_bytes(32)
            self.revoked.clear()
        else:
            self.revoked[opened[1]] = opened[2]
        return True

    def _opened(self, value: str, now: float | None) -> tuple[Principal, str, int] | None:
        """A valid, unexpired cookie's principal, id and expiry; None for anything else."""
        body, _, signature = value.rpartition(".")
        if not body or not hmac.compare_digest(
            signature.encode("utf-8", "replace"), self._sign(body).encode()
        ):
            return None
        parts = body.split(".")
        if len(parts) != 3:
            return None
        encoded, expires, cookie_id = parts
        if not expires.isdigit() or int(expires) < (time.time() if now is None else now):
            return None
        try:
            tenant = base64.urlsafe_b64decode(encoded.encode()).decode()
        except ValueError:
            return None
        return Principal(None if tenant == _NO_TENANT else tenant), cookie_id, int(expires)

    def _sign(self, body: str) -> str:
        return hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()

    def principal_of(self, request: Request) -> Principal | None:
        """The caller of `request`, or None if it shows no valid credential."""
        if self.open:
            return Principal()
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return self.from_token(token.strip())
        cookie = request.cookies.get(COOKIE)
        return self.from_cookie(cookie) if cookie else None


_OWN_PAGES = frozenset({"same-origin", "none"})
"""`Sec-Fetch-Site` values of a request sent from this server's own page (or typed)."""
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CROSS_SITE = "cross_site"
"""The 403's code for a request another site's page sent with the browser's credentials."""


def _bearer(request: Request) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _own_page(request: Request) -> bool:
    """Whether `request` comes from this server's own page, as far as the browser says:
    `Sec-Fetch-Site`, else the `Origin`'s host against `Host` (a client that sends
    neither, curl or a program, is no other site's page)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in _OWN_PAGES
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return bool(host) and urlsplit(origin).netloc.lower() == host.lower()


def authenticator(request: Request) -> Authenticator:
    auth = request.app.state.auth
    assert isinstance(auth, Authenticator)
    return auth


def principal(request: Request) -> Principal:
    """The dependency of protected routes: the caller, or 401; 403 for a request that
    changes state on the strength of the cookie (or of no credential, on an open server)
    sent from another site's page."""
    found = authenticator(request).principal_of(request)
    if found is None:
        raise ApiError(
            401,
            "a valid `Authorization: Bearer TOKEN` header (or a login cookie) is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    # A browser attaches the cookie to a request any page makes (SameSite=Strict still lets
    # a page on another port of this host through: it is the same site), but never a
    # bearer header: only the ambient credential needs the check.
    if request.method not in _SAFE_METHODS and not _bearer(request) and not _own_page(request):
        raise ApiError(
            403,
            "a request that changes state without a bearer header must come from this "
            "server's own pages",
            code=CROSS_SITE,
        )
    return found


Caller = Annotated[Principal, Depends(principal)]

router = APIRouter(tags=["auth"])


@router.post(
    "/login",
    status_code=303,
    summary="Log a browser in: a form with `token` (and `next`) sets the session cookie",
    responses={401: {"description": "The token is not valid."}},
)
async def login(request: Request) -> Response:
    # Another site's page must not log a browser in (as the other site's tenant, whose
    # sessions the person would then read and approve as their own). Browsers say where
    # a request comes from; the strict cookie stops the rest of cross-site requests.
    if not _own_page(request):
        raise ApiError(403, "log in from this server's own login page", code=CROSS_SITE)
    try:
        form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=8)
    except ValueError:  # more fields than a login form has
        raise ApiError(422, "the login form takes `token` and `next`") from None
    token = (form.get("token") or [""])[0]
    target = _safe_next((form.get("next") or ["/"])[0])
    auth = authenticator(request)
    found = auth.from_token(token) if token else None
    if found is None:
        raise ApiError(401, "the token is not valid")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        auth.cookie_for(found),
        max_age=COOKIE_TTL_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout", status_code=303, summary="End the browser's session: its cookie is revoked")
async def logout(request: Request) -> Response:
    cookie = request.cookies.get(COOKIE)
    if cookie:
        authenticator(request).revoke(cookie)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _safe_next(target: str) -> str:
    """A path on this server only (no `//host` or `\\`: an open redirect otherwise)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target if all(32 < ord(c) < 127 for c in target) else "/"
