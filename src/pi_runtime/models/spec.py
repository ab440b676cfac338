"""Model spec strings (`local`, `openai:MODEL`, `scripted:PATH`, …) to models.

| spec                  | model                                                      |
|-----------------------|------------------------------------------------------------|
| `local` (the default) | the embedded Qwen2.5-Coder-0.5B-Instruct, in-process       |
| `local:NAME`          | an embedded model by name (`gemma-3-270m`)                 |
| `local:PATH`          | another GGUF file, in-process                              |
| `openai:MODEL`        | OpenAI (`OPENAI_API_KEY`)                                  |
| `deepseek:MODEL`      | DeepSeek (`DEEPSEEK_API_KEY`)                              |
| `ollama:MODEL`        | Ollama on localhost:11434 (no key)                         |
| `openrouter:MODEL`    | OpenRouter (`OPENROUTER_API_KEY`)                          |
| `anthropic:MODEL`     | Anthropic (`ANTHROPIC_API_KEY`)                            |
| `scripted:PATH`       | a script file                                              |
| `replay:TRACE`        | the responses recorded in a trace                          |
| `text:SPEC`           | SPEC's model, calling tools through `<action>` text        |

With `base_url`, the spec names the model on that OpenAI-compatible server: `MODEL`,
or `VENDOR:MODEL` to keep a vendor's key and quirks while going through another URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..exceptions import UserError
from .base import Model
from .providers import VENDORS, custom_server
from .replay import ReplayModel
from .scripted import ScriptedModel

PROVIDERS = ("local", "openai", "anthropic", "deepseek", "ollama", "openrouter")
DEFAULT_SPEC = "local"
DEFAULT_SERVER_MODEL = "default"
"""The model name sent to a `--base-url` server when none is given (llama.cpp ignores it)."""


LOCAL_OPTIONS = {"threads": "n_threads", "context": "n_ctx", "max_tokens": "max_tokens"}
"""Settings of the embedded engine (`[local]` in an agent file) and `LocalModel`'s names."""


def resolve_model(
    spec: str | None, *, base_url: str | None = None, local: Mapping[str, Any] | None = None
) -> Model:
    """The model a spec string names. A bad or unavailable spec is a `UserError`.

    `local` holds settings of the embedded engine (`LOCAL_OPTIONS`); other models ignore
    them, so one agent file runs on either.
    """
    if spec is not None and (spec == "text" or spec.startswith("text:")):
        return _text_protocol(spec, base_url)
    if base_url is not None:
        return _on_server(spec, base_url)
    spec = spec or DEFAULT_SPEC
    prefix, _, rest = spec.partition(":")
    if prefix == "scripted":
        if not rest:
            raise UserError("scripted model needs a script path: scripted:PATH")
        return ScriptedModel.from_file(rest, keep_calls=False)  # no one holds it to read
    if prefix == "replay":
        if not rest:
            raise UserError("replay model needs a trace path: replay:TRACE")
        return ReplayModel(rest)
    if prefix == "local":
        from .local import LocalModel

        options = {LOCAL_OPTIONS[k]: v for k, v in (local or {}).items() if k in LOCAL_OPTIONS}
        return LocalModel(path=rest or None, **options)
    if prefix in VENDORS:
        if not rest:
            raise UserError(f"name the model: {prefix}:MODEL")
        from .openai import OpenAIModel

        return OpenAIModel(rest, vendor=VENDORS[prefix])
    if prefix == "anthropic":
        return _anthropic(rest, base_url=None)
    raise UserError(
        f"unknown model spec {spec!r}; expected local, scripted:PATH, replay:TRACE, text:SPEC, "
        + ", ".join(f"{p}:MODEL" for p in PROVIDERS[1:])
        + ", or --base-url URL for an OpenAI-compatible server"
    )


def _on_server(spec: str | None, base_url: str) -> Model:
    """A model on an OpenAI-compatible server at `base_url`."""
    from .openai import OpenAIModel

    prefix, _, rest = (spec or "").partition(":")
    if prefix in ("scripted", "replay", "local"):
        raise UserError(
            f"--base-url is for a model on an OpenAI-compatible server; {prefix} models "
            "run without one"
        )
    if prefix == "anthropic":
        return _anthropic(rest, base_url=base_url)
    if prefix in VENDORS:
        if not rest:
            raise UserError(f"name the model: {prefix}:MODEL")
        return OpenAIModel(rest, vendor=custom_server(base_url, like=VENDORS[prefix]))
    # Anything else is the server's own model name, colons included (`qwen2.5:7b`).
    return OpenAIModel(spec or DEFAULT_SERVER_MODEL, vendor=custom_server(base_url))


def _anthropic(model: str, *, base_url: str | None) -> Model:
    from .anthropic import AnthropicModel

    if not model:
        raise UserError("name the model: anthropic:MODEL")
    return AnthropicModel(model, base_url=base_url)


def _text_protocol(spec: str, base_url: str | None) -> Model:
    """`text:SPEC`: the model SPEC names, calling tools through `<action>` text."""
    from .text_protocol import TextProtocolModel

    inner = spec.removeprefix("text").removeprefix(":") or None
    if inner is None and base_url is None:
        raise UserError("name the model to wrap: text:SPEC, e.g. text:local or text:ollama:MODEL")
    return TextProtocolModel(resolve_model(inner, base_url=base_url))
