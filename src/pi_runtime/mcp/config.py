"""`MCPServer`: one MCP server an agent takes tools from, as plain, storable data.

An agent file's `[mcp.NAME]` table and the Python `MCPServer(...)` are the same thing:

    [mcp.files]
    command = ["python", "server.py"]    # stdio: a subprocess (or `url = "…"`: Streamable HTTP)
    cwd = "."                            # the server's folder (default: the agent file's)
    env = {API_KEY = "${FILES_API_KEY}"} # `${VAR}` is read from Pi's environment at connect
    timeout_s = 30                       # per call; past it the call fails with `timeout`
    allow = ["read", "search"]           # the server's tool names (before `prefix`)
    block = ["delete"]
    approval = ["write"]                 # calls wait for a person: `pi approve` / `pi reject`
    prefix = "files_"                    # the model calls `files_read`

Secrets stay out of stores and traces: a session stores this table as written, so `env`
values and `headers` hold `${VAR}` references, resolved only when Pi connects. A literal
value under a secret-looking name (`*KEY*`, `*TOKEN*`, `Authorization`, …) is refused.

Nothing here imports the MCP SDK: an agent file is read without it.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import UserError

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 2
DEFAULT_RESULT_BYTES = 16_000

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_NAME = re.compile(
    r"key|token|secret|passw|auth|credential|cookie|session|signature", re.IGNORECASE
)
PYTHON_COMMANDS = ("python", "python3")
"""A `command` starting with one of these runs the Python that runs Pi (its packages)."""
KEYS = (
    "command",
    "url",
    "cwd",
    "env",
    "headers",
    "timeout_s",
    "connect_timeout_s",
    "allow",
    "block",
    "approval",
    "prefix",
    "retries",
    "max_result_bytes",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServer:
    """An MCP server whose tools an agent may call, through the same gate as its own.

    Attributes:
        name: what Pi calls the server (in errors, traces and the agent file's table).
        command: a stdio server: the program and its arguments. `python` / `python3`
            first means the interpreter running Pi.
        url: a Streamable HTTP server's endpoint (instead of `command`).
        cwd: the stdio server's working folder (default: the current one).
        env: extra environment of the stdio server; values may hold `${VAR}`.
        headers: HTTP headers sent to a `url` server; values may hold `${VAR}`.
        timeout_s: one call's limit in seconds; past it the call is `timeout`.
        connect_timeout_s: the limit for starting the server and listing its tools.
        allow: the server's tools the agent may call (None: all), by the server's names.
        block: tools never offered, by the server's names.
        approval: tools whose calls wait for a person's approval, by the server's names
            (an agent's own `approval` names only its own tools: the server's are not
            known before it is started).
        prefix: put before every tool name the model sees (`files_` + `read`).
        retries: how often a transient failure of a read-only or idempotent tool is
            retried; other tools are never retried (the server may have acted).
        max_result_bytes: results longer than this are cut, with a marker.
    """

    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    allow: tuple[str, ...] | None = None
    block: tuple[str, ...] = ()
    approval: tuple[str, ...] = ()
    prefix: str = ""
    retries: int = DEFAULT_RETRIES
    max_result_bytes: int = DEFAULT_RESULT_BYTES

    def __post_init__(self) -> None:
        where = f"mcp.{self.name}" if isinstance(self.name, str) else "mcp"
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise UserError(f"{where}: a server's name is 1-64 letters, digits, _ or -")
        if (self.command is None) == (self.url is None):
            raise UserError(f"{where}: give exactly one of `command` (stdio) or `url` (HTTP)")
        if self.command is not None:
            command = self.command
            if isinstance(command, str) or not isinstance(command, list | tuple) or not command:
                raise UserError(f"{where}.command: a list: the program, then its arguments")
            if not all(isinstance(part, str) and part and "\0" not in part for part in command):
                raise UserError(f"{where}.command: every part must be a non-empty string")
            object.__setattr__(self, "command", tuple(command))
        if self.url is not None:
            _check_url(f"{where}.url", self.url)
        if self.cwd is not None and (not isinstance(self.cwd, str) or not self.cwd):
            raise UserError(f"{where}.cwd: must be a folder, got {self.cwd!r}")
        object.__setattr__(self, "env", _values(f"{where}.env", self.env))
        object.__setattr__(self, "headers", _values(f"{where}.headers", self.headers))
        if self.url is None and self.headers:
            raise UserError(f"{where}.headers: only a `url` server takes headers")
        if self.command is None and (self.env or self.cwd):
            raise UserError(f"{where}: `env` and `cwd` are for a `command` (stdio) server")
        for key in ("timeout_s", "connect_timeout_s"):
            value = getattr(self, key)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise UserError(f"{where}.{key}: must be a positive number of seconds")
            object.__setattr__(self, key, float(value))
        object.__setattr__(
            self, "allow", None if self.allow is None else _names(where, "allow", self.allow)
        )
        object.__setattr__(self, "block", _names(where, "block", self.block))
        both = sorted(set(self.allow or ()) & set(self.block))
        if both:
            raise UserError(f"{where}: {', '.join(both)} both allowed and blocked")
        approval = _names(where, "approval", self.approval)
        object.__setattr__(self, "approval", approval)
        never = sorted(
            n
            for n in approval
            if n in self.block or (self.allow is not None and n not in self.allow)
        )
        if never:
            raise UserError(
                f"{where}.approval: {', '.join(never)} can never be called (blocked or not "
                "allowed), so no call of it can wait for approval"
            )
        if not isinstance(self.prefix, str) or (self.prefix and not _PREFIX.fullmatch(self.prefix)):
            raise UserError(
                f"{where}.prefix: 1-32 letters, digits, _ . or -, starting with a letter or _"
            )
        for key, least in (("retries", 0), ("max_result_bytes", 100)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise UserError(f"{where}.{key}: must be an integer of at least {least}")

    @classmethod
    def from_table(cls, name: str, table: Mapping[str, Any]) -> MCPServer:
        """A server from an agent file's `[mcp.NAME]` table (or its stored form)."""
        if not isinstance(table, Mapping):
            raise UserError(f"mcp.{name}: must be a table with `command` or `url`")
        unknown = sorted(set(table) - set(KEYS))
        if unknown:
            raise UserError(f"mcp.{name}.{unknown[0]}: unknown key; known: {', '.join(KEYS)}")
        return cls(name=name, **dict(table))

    def to_table(self) -> dict[str, Any]:
        """Plain JSON values, `${VAR}` references as written: what a session stores."""
        table: dict[str, Any] = {
            "command": None if self.command is None else list(self.command),
            "url": self.url,
            "cwd": self.cwd,
            "env": dict(self.env),
            "headers": dict(self.headers),
            "timeout_s": self.timeout_s,
            "connect_timeout_s": self.connect_timeout_s,
            "allow": None if self.allow is None else list(self.allow),
            "block": list(self.block),
            "approval": list(self.approval),
            "prefix": self.prefix,
            "retries": self.retries,
            "max_result_bytes": self.max_result_bytes,
        }
        return {k: v for k, v in table.items() if v is not None}

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def program(self) -> tuple[str, list[str]]:
        """(executable, arguments) of a stdio server; `python` is this interpreter."""
        assert self.command is not None
        head, *rest = self.command
        if head in PYTHON_COMMANDS:
            head = sys.executable
        return head, [resolve(part, f"mcp.{self.name}.command") for part in rest]

    def resolved_env(self) -> dict[str, str]:
        """`env` with its `${VAR}` references filled in (UserError naming a missing one)."""
        return {k: resolve(v, f"mcp.{self.name}.env.{k}") for k, v in self.env.items()}

    def resolved_headers(self) -> dict[str, str]:
        return {k: resolve(v, f"mcp.{self.name}.headers.{k}") for k, v in self.headers.items()}

    def resolved_url(self) -> str:
        assert self.url is not None
        return resolve(self.url, f"mcp.{self.name}.url")

    def where(self) -> str:
        """The server as errors name it: never a resolved secret."""
        if self.command is not None:
            return f"MCP server {self.name!r} ({Path(self.command[0]).name})"
        return f"MCP server {self.name!r} ({self.url})"


def resolve(text: str, key: str) -> str:
    """`text` with each `${VAR}` replaced by the environment's value."""

    def value(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None:
            raise UserError(f"{key}: environment variable {match.group(1)} is not set")
        return found

    return _REFERENCE.sub(value, text)


def _check_url(key: str, url: Any) -> None:
    if not isinstance(url, str) or not re.match(r"(https?://|\$\{)", url):
        raise UserError(f"{key}: must be an http:// or https:// URL, got {url!r}")
    if re.match(r"https?://[^/]*@", url):
        raise UserError(f"{key}: put credentials in `headers` with a ${{VAR}} reference")
    for name, value in re.findall(r"[?&]([^=&#]+)=([^&#]*)", url):
        if _SECRET_NAME.search(name) and not _REFERENCE.search(value):
            raise UserError(f"{key}: query parameter {name!r} holds a secret: use ${{VAR}}")


def _values(key: str, table: Any) -> dict[str, str]:
    if not isinstance(table, Mapping):
        raise UserError(f"{key}: must be a table of strings")
    out: dict[str, str] = {}
    for name, value in table.items():
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise UserError(f"{key}: must be a table of strings, got {name!r} = {value!r}")
        if _SECRET_NAME.search(name) and not _REFERENCE.search(value):
            raise UserError(
                f"{key}.{name}: a secret is stored with the agent: write a reference to an "
                f'environment variable instead, e.g. {name} = "${{MY_VAR}}"'
            )
        out[name] = value
    return out


def _names(where: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise UserError(f"{where}.{key}: must be a list of tool names, got {value!r}")
    if not all(isinstance(item, str) and item for item in value):
        raise UserError(f"{where}.{key}: must be a list of non-empty tool names")
    return tuple(value)
