"""OpenAI-compatible vendors as entries, not adapters: URL, key variable and quirks.

A vendor differs from OpenAI in where it lives, which key it reads and a few request
details (which output-limit field it takes, whether it honours strict tools, whether it
wants its reasoning sent back). Everything else is the one `OpenAIModel` adapter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..exceptions import UserError
from ..messages import redact

__all__ = ["VENDORS", "Vendor", "custom_server", "resolve_api_key", "vendor"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Vendor:
    """How to reach one OpenAI-compatible service.

    Attributes:
        name: the spec prefix (`openai`, `deepseek`, …); recorded as the prefix of each
            answer's `model`, which is how a later request knows who wrote a message.
        base_url: the API root; None lets the SDK read `OPENAI_BASE_URL` or use OpenAI's.
        key_env: the environment variable holding the API key.
        key_required: False for servers that take no key (ollama, local servers).
        max_tokens_field: `max_completion_tokens` for OpenAI (its reasoning models refuse
            `max_tokens`); `max_tokens` for servers that only know the older name.
        strict_tools: send `strict: true` on tools whose schema allows it.
        parallel_tool_calls: send `parallel_tool_calls: true` when tools are offered.
        reasoning_field: the assistant-message field the vendor wants its reasoning sent
            back in (DeepSeek answers 400 when a tool-calling turn lacks it); None drops it.
        structured_output: how an output contract is sent: `json_schema` (the schema,
            enforced when strict) or `json_object` (JSON only; the schema stays in the
            system prompt) for vendors without schema support.
        known_windows: model names mean the providers' models, so their published
            context windows apply (`models.windows`); False for servers whose window is
            their own setting (ollama's `num_ctx`).
    """

    name: str
    base_url: str | None
    key_env: str | None
    key_required: bool = True
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    strict_tools: bool = False
    parallel_tool_calls: bool = True
    reasoning_field: str | None = None
    structured_output: Literal["json_schema", "json_object"] = "json_schema"
    known_windows: bool = True
    label: str | None = None
    """What error messages call the service (default: `name`)."""

    @property
    def display(self) -> str:
        return self.label or self.name


VENDORS: Mapping[str, Vendor] = {
    "openai": Vendor(
        name="openai",
        base_url=None,
        key_env="OPENAI_API_KEY",
        max_tokens_field="max_completion_tokens",
        strict_tools=True,
    ),
    "deepseek": Vendor(
        name="deepseek",
        base_url="https://api.deepseek.com",
        key_env="DEEPSEEK_API_KEY",
        reasoning_field="reasoning_content",
        structured_output="json_object",  # no json_schema response format there
    ),
    "ollama": Vendor(
        name="ollama",
        base_url="http://localhost:11434/v1",
        key_env=None,
        key_required=False,
        known_windows=False,  # the server's num_ctx, whatever the model's name says
    ),
    "openrouter": Vendor(
        name="openrouter",
        base_url="https://openrouter.ai/api/v1",
        key_env="OPENROUTER_API_KEY",
        strict_tools=True,
    ),
}

_NO_KEY = "no-key"
"""Sent to servers that take no key: the SDK insists on one, the server ignores it."""


def vendor(name: str) -> Vendor:
    """The entry of a known vendor (a `UserError` for any other name)."""
    try:
        return VENDORS[name]
    except KeyError:
        raise UserError(
            f"unknown OpenAI-compatible vendor {name!r}; known: {', '.join(sorted(VENDORS))}"
        ) from None


def custom_server(base_url: str, *, like: Vendor | None = None) -> Vendor:
    """Any OpenAI-compatible server (vLLM, llama.cpp server, LM Studio) at `base_url`.

    The key is optional and read from `OPENAI_API_KEY` (or `like`'s variable) when set.
    The label errors show holds the URL without its credentials.
    """
    shown = redact(base_url)
    if not base_url.startswith(("http://", "https://")):
        raise UserError(f"--base-url must be an http:// or https:// URL, got {shown!r}")
    if like is None:
        return Vendor(
            name="openai-compatible",
            label=f"the server at {shown}",
            base_url=base_url,
            key_env="OPENAI_API_KEY",
            key_required=False,
        )
    return Vendor(
        name=like.name,
        label=f"{like.name} at {shown}",
        base_url=base_url,
        key_env=like.key_env,
        key_required=False,
        max_tokens_field=like.max_tokens_field,
        strict_tools=like.strict_tools,
        parallel_tool_calls=like.parallel_tool_calls,
        reasoning_field=like.reasoning_field,
        known_windows=like.known_windows,
    )


def resolve_api_key(entry: Vendor, environ: Mapping[str, str] | None = None) -> str:
    """The key to send; a required key that is missing is a `UserError` naming its variable."""
    env = os.environ if environ is None else environ
    key = env.get(entry.key_env, "").strip() if entry.key_env else ""
    if key:
        return key
    if entry.key_required:
        raise UserError(
            f"the {entry.display} provider needs an API key: set the {entry.key_env} "
            "environment variable (or use --base-url for a server that takes none)"
        )
    return _NO_KEY
