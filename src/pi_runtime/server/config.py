"""What `pi serve` serves, read and checked before anything listens.

    config = ServeConfig(agents=served_agents(["examples/weather/agent.toml"]),
                         db_url="sqlite:///.pi/pi.db", tokens=TokenTable.single("s3cret…"))

Nothing here imports the web stack, so the command line checks its flags (a bad tokens
file, a public host without a token) before FastAPI is loaded.
"""

from __future__ import annotations

import ipaddress
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..exceptions import UserError
from .tenancy import TENANT_PATTERN

if TYPE_CHECKING:
    from ..loop.definition import AgentDefinition

DEFAULT_MAX_BODY = 1_000_000
MIN_TOKEN_CHARS = 16
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FILE_MODELS = frozenset({"scripted", "replay"})
"""Spec prefixes whose rest is always a file's path (`scripted:PATH`, `replay:TRACE`)."""
_AT_SERVER = re.compile(r"@https?://\S*$")


@dataclass(frozen=True, slots=True)
class TokenTable:
    """Bearer tokens and the tenant each one stands for.

    `tenant` None (one `--token`): every session is visible to the holder, as on the
    command line. With `--tokens FILE` each token has its tenant, and a tenant sees only
    the sessions it created. The tokens themselves never appear in messages or reprs.
    """

    entries: tuple[tuple[str, str | None], ...] = field(repr=False)

    @classmethod
    def single(cls, token: str) -> TokenTable:
        _check_token(token, "--token")
        return cls(((token, None),))

    @classmethod
    def from_file(cls, path: str | Path) -> TokenTable:
        """A JSON object or a TOML table mapping each token to its tenant's name."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"tokens file {file}: cannot read it: {exc}") from None
        try:
            data = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
        except (ValueError, RecursionError):  # TOMLDecodeError is a ValueError
            # the parser's message would quote the line: it holds a token
            kind = "JSON" if file.suffix == ".json" else "TOML"
            raise UserError(f"tokens file {file}: not valid {kind}") from None
        if not isinstance(data, dict) or not data:
            raise UserError(f"tokens file {file}: must map tokens to tenants, one or more")
        entries: list[tuple[str, str | None]] = []
        for number, (token, tenant) in enumerate(data.items(), 1):
            where = f"tokens file {file}, entry {number}"
            _check_token(token, where)
            if not isinstance(tenant, str) or not TENANT_PATTERN.fullmatch(tenant):
                raise UserError(
                    f"{where}: the tenant must be 1-64 letters, digits, '.', '_' or '-'"
                )
            entries.append((token, tenant))
        return cls(tuple(entries))

    @property
    def tenanted(self) -> bool:
        return any(tenant is not None for _, tenant in self.entries)


def _check_token(token: object, where: str) -> None:
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise UserError(f"{where}: a token must be at least {MIN_TOKEN_CHARS} characters")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise UserError(f"{where}: a token must be printable ASCII without spaces")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    """Everything `create_app` needs.

    Attributes:
        agents: the served agents by name; the first is the default.
        db_url: the session store (`sqlite:///PATH` or `postgresql://…`).
        tokens: who may call `/v1`; None: anyone (loopback only).
        max_body_bytes: the largest request body read (larger: 413).
        trace_dir: where runs write traces (default as `Agent`).
        workers: worker slots run inside the server for background jobs (0: none; a
            separate `pi worker` delivers them).
        lease_s: the lease of runs the server holds: if it dies, a worker takes them over.
    """

    agents: dict[str, AgentDefinition]
    db_url: str
    tokens: TokenTable | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    trace_dir: Path | None = None
    workers: int = 1
    lease_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.agents:
            raise UserError("serve at least one agent (--agent FILE.toml)")
        if self.max_body_bytes < 1:
            raise UserError(f"the body limit must be positive, got {self.max_body_bytes}")
        if self.workers < 0:
            raise UserError(f"workers must be 0 or more, got {self.workers}")

    @property
    def default_agent(self) -> str:
        return next(iter(self.agents))


def served_agents(specs: list[str]) -> dict[str, AgentDefinition]:
    """The agents of `--agent [NAME=]FILE` flags, by name, in order.

    A name defaults to the file's stem, or to its folder's name for a file called
    `agent.toml` (`examples/approval/agent.toml` is `approval`).
    """
    from ..loop.agentfile import read_agent_file

    agents: dict[str, AgentDefinition] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        file = Path(path)
        if not name:
            name = file.resolve().parent.name if file.stem == "agent" else file.stem
        if not _NAME.fullmatch(name):
            raise UserError(
                f"--agent {spec}: the name {name!r} must be 1-64 letters, digits, '.', '_' or "
                "'-'; name it: --agent NAME=FILE"
            )
        if name in agents:
            raise UserError(f"--agent {spec}: two agents are named {name!r}; use NAME=FILE")
        agents[name] = read_agent_file(file)
    return agents


def public_model(name: str | None) -> str | None:
    """A model's name as a client of the server sees it: no file path, no server URL.

    `openai:gpt-4o`, `local` and `local:gemma-3-270m` are kept; `scripted:/srv/a/script.json`
    is `scripted`, `local:/models/x.gguf` is `local`, and `MODEL@https://host/v1` (a model
    on an OpenAI-compatible server) is `MODEL`: where the server keeps its files, and
    which machines it reaches, are the operator's business.
    """
    if name is None:
        return None
    prefix, colon, rest = name.partition(":")
    if not colon:
        return name
    if prefix == "text":  # the text protocol over another model
        return f"text:{public_model(rest)}"
    if prefix in _FILE_MODELS:
        return prefix
    if prefix == "local" and ("/" in rest or "\\" in rest or rest.endswith(".gguf")):
        return prefix
    return _AT_SERVER.sub("", name)


def is_loopback(host: str) -> bool:
    """Whether `host` binds to this machine only (an unknown name counts as public)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, tokens: TokenTable | None) -> None:
    """Refuse to serve a public address without a token."""
    if tokens is None and not is_loopback(host):
        raise UserError(
            f"--host {host} is reachable from other machines: give --token (or --tokens "
            "FILE) so /v1 needs one, or bind to 127.0.0.1"
        )
