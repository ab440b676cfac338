"""Model spec strings (`scripted:PATH`, `replay:TRACE`, `openai:MODEL`, …) to models."""

from __future__ import annotations

from ..exceptions import UserError
from .base import Model
from .replay import ReplayModel
from .scripted import ScriptedModel

PROVIDERS = ("local", "openai", "anthropic", "deepseek", "ollama", "openrouter")
DEFAULT_SPEC = "local"


def resolve_model(spec: str | None, *, base_url: str | None = None) -> Model:
    """The model a spec string names. A bad or unavailable spec is a `UserError`."""
    spec = spec or DEFAULT_SPEC
    prefix, _, rest = spec.partition(":")
    if prefix == "scripted":
        if not rest:
            raise UserError("scripted model needs a script path: scripted:PATH")
        return ScriptedModel.from_file(rest)
    if prefix == "replay":
        if not rest:
            raise UserError("replay model needs a trace path: replay:TRACE")
        return ReplayModel(rest)
    if prefix in PROVIDERS:
        raise UserError(
            f"the {prefix!r} provider is not part of this version of Pi yet; "
            "use --model scripted:PATH or --model replay:TRACE"
        )
    raise UserError(
        f"unknown model spec {spec!r}; expected one of "
        "scripted:PATH, replay:TRACE, " + ", ".join(f"{p}:MODEL" for p in PROVIDERS[1:])
    )
