"""What the GenAI conventions call things Pi names its own way: providers, models, errors.

Pure functions, no OpenTelemetry import: the model's spec name (`openai:gpt-4o`,
`deepseek:deepseek-chat@https://…`, `local`, `scripted:run.json`) is split into the
provider, the model requested and the server reached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

PROVIDERS = {
    "openai": "openai",
    "openai-compatible": "openai",  # the OpenAI API at some server: `server.address` says which
    "anthropic": "anthropic",
    "deepseek": "deepseek",
    "ollama": "ollama",
    "openrouter": "openrouter",
    "local": "llama_cpp",
    "scripted": "pi.scripted",
    "function": "pi.function",
    "replay": "pi.replay",
}
"""Spec prefix → `gen_ai.provider.name` (the conventions' well-known value where one applies)."""

IN_PROCESS = frozenset({"llama_cpp", "pi.scripted", "pi.function", "pi.replay"})
"""Providers whose model runs in this process: their `chat` spans are INTERNAL, not CLIENT."""

_AT_SERVER = re.compile(r"^(?P<model>.*?)@(?P<url>https?://\S+)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ModelRef:
    provider: str
    model: str
    server_address: str | None = None
    server_port: int | None = None

    @property
    def in_process(self) -> bool:
        return self.provider in IN_PROCESS


def model_ref(name: str) -> ModelRef:
    """The provider, model and server a model's name (`Model.name`) stands for."""
    prefix, colon, rest = name.partition(":")
    if prefix == "text" and colon:  # the text protocol over another model
        return model_ref(rest)
    provider = PROVIDERS.get(prefix, prefix if colon else "_OTHER")
    if not colon:
        return ModelRef(provider=provider, model=name)
    if prefix in ("scripted", "replay"):  # a file's path: its name says which, and no more
        return ModelRef(provider=provider, model=Path(rest).name or name)
    at = _AT_SERVER.match(rest)
    if at is None:
        return ModelRef(provider=provider, model=rest or name)
    address, port = _server(at["url"])
    return ModelRef(
        provider=provider, model=at["model"] or name, server_address=address, server_port=port
    )


def _server(url: str) -> tuple[str | None, int | None]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    if parts.hostname is None:
        return None, None
    return parts.hostname, port if port is not None else (443 if parts.scheme == "https" else 80)


def model_error_type(message: str, *, transient: bool) -> str:
    """`error.type` of a failed model call: low-cardinality, from what the run recorded."""
    lowered = message.lower()
    if "timed out" in lowered or "timeout" in lowered:
        return "timeout"
    status = re.search(r"\b(?:HTTP|status(?: code)?)[ :=]*([45]\d\d)\b", message, re.IGNORECASE)
    if status is not None:
        return status.group(1)
    return "transient_error" if transient else "model_error"


def agent_name(source: str | None) -> str | None:
    """An agent's name from its agent file: the file's stem, or its folder's name when
    the file is a folder's `agent.toml`. None for agents built in Python."""
    if not source:
        return None
    path = Path(source)
    if path.stem == "agent" and path.parent.name:
        return path.parent.name
    return path.stem or None
