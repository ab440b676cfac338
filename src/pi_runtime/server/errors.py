"""Errors as the API returns them: one JSON shape, never a traceback.

    {"error": {"code": "not_found", "message": "no session 's1'"}}

`ApiError` is raised by handlers for the answers they mean (404, 409, …). Malformed JSON
(a body nested too deeply or with a number too long to read included) and schema misses
become 422 with `details` (where and what, never the input echoed); anything else becomes
a bare 500 whose body says nothing of the failure, which is logged.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("pi_runtime.server")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    500: "internal_error",
    503: "unavailable",
}


class ApiError(Exception):
    """An answer other than success, meant and explained: `status`, a `code` a program
    can branch on, a `message` a person can read."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.headers = headers


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    return JSONResponse(error_body(code, message, **extra), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {
            "loc": [str(part) for part in e.get("loc", ())],
            "msg": e.get("msg"),
            "type": e.get("type"),
        }
        for e in exc.errors()
    ]
    malformed = any(d["type"] == "json_invalid" for d in details)
    message = "the body is not valid JSON" if malformed else "the request does not fit its schema"
    return error_response(422, "invalid_request", message, details=details)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    unreadable = _unreadable_body(exc)
    if unreadable is not None:
        details = [{"loc": ["body"], "msg": unreadable, "type": "json_invalid"}]
        return error_response(422, "invalid_request", unreadable, details=details)
    status = exc.status_code
    message = exc.detail if isinstance(exc.detail, str) else _CODES.get(status, "error")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(status, _CODES.get(status, "error"), message, headers)


def _unreadable_body(exc: StarletteHTTPException) -> str | None:
    """Why the JSON parser refused the body, if this 400 is FastAPI's answer to that.

    FastAPI answers a JSON syntax error with a validation error, but any other failure of
    the parser with a bare 400: a body nested past Python's recursion limit, an integer
    longer than Python converts, bytes that are not UTF-8. Each is a malformed body (422).
    """
    cause = exc.__cause__
    if exc.status_code != 400:
        return None
    if isinstance(cause, RecursionError):
        return "the body is nested too deeply to read"
    if isinstance(cause, ValueError) and "digits" in str(cause):  # int_max_str_digits
        return "the body holds a number too long to read"
    if isinstance(cause, ValueError):  # UnicodeDecodeError among them
        return "the body is not valid JSON"
    return None


class CatchAll:
    """ASGI middleware: a failure nothing else answered becomes a bare JSON 500, and the
    log (not the client) gets the traceback. Starlette's own last resort answers too, but
    then raises again, and the server drops the connection under the answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if started:  # part of an answer is out: only the connection's end is left
                raise
            answer = error_response(
                500, "internal_error", "the server failed to answer this request"
            )
            await answer(scope, receive, send)
