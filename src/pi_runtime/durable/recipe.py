"""`Recipe`: how to rebuild a session's agent in another process (a worker continuing it).

Stored as the session's `agent` JSON: a model spec string, tools as `MODULE:ATTR`
strings, the run limits, and where the tool modules import from.

    {"model": "scripted:/abs/script.json", "tools": ["examples.jobs.tools:TOOLS"],
     "limits": {"max_steps": 20, ...}, "base_url": null, "import_path": "/abs/dir",
     "job_max_attempts": 5}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..loop import Agent, Limits
from ..models import Model, resolve_model
from ..tools import ToolSpec
from ..tools.loading import load_tools, split_ref

# Model specs whose argument is a file path, made absolute so any working directory works.
_PATH_SPECS = ("scripted", "replay", "local")
# Cheap, stateful-per-run models are built anew each time; others are worth keeping.
_FRESH_SPECS = ("scripted", "replay")
_KEYS = {"model", "tools", "limits", "base_url", "import_path", "job_max_attempts"}
DEFAULT_JOB_ATTEMPTS = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    """What a worker needs to rebuild the agent of a session.

    Attributes:
        model: a model spec string (None: the default model).
        tools: `MODULE:ATTR` strings, each a tool or a list of tools.
        limits: the run guards (`Limits` fields); missing ones take their defaults.
        base_url: an OpenAI-compatible server, as `pi run --base-url`.
        import_path: a folder put on `sys.path` before importing the tool modules.
        job_max_attempts: how often a background job may be interrupted (a worker dying)
            and started again before it fails.
    """

    model: str | None = None
    tools: tuple[str, ...] = ()
    limits: dict[str, Any] = field(default_factory=dict)
    base_url: str | None = None
    import_path: str | None = None
    job_max_attempts: int = DEFAULT_JOB_ATTEMPTS

    def __post_init__(self) -> None:
        for spec in self.tools:
            split_ref(spec)
        Limits(**self.limits)  # a bad field fails now, not in a worker later
        if self.job_max_attempts < 1:
            raise UserError(f"job_max_attempts must be at least 1, got {self.job_max_attempts}")

    @classmethod
    def here(
        cls,
        *,
        model: str | None = None,
        tools: tuple[str, ...] | list[str] = (),
        limits: Limits | None = None,
        base_url: str | None = None,
        job_max_attempts: int = DEFAULT_JOB_ATTEMPTS,
    ) -> Recipe:
        """A recipe made in this process: file paths made absolute, the current folder
        recorded as where tool modules import from."""
        return cls(
            model=_absolute(model),
            tools=tuple(tools),
            limits=(limits or Limits()).to_dict(),
            base_url=base_url,
            import_path=os.getcwd(),
            job_max_attempts=job_max_attempts,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Recipe:
        if data is None:
            raise UserError("the session has no agent recipe: it was not made by `pi run`")
        unknown = sorted(set(data) - _KEYS)
        if unknown:
            raise UserError(f"the session's agent recipe has unknown fields: {unknown}")
        tools = data.get("tools") or []
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise UserError("the session's agent recipe: tools must be a list of MODULE:ATTR")
        try:
            return cls(
                model=data.get("model"),
                tools=tuple(tools),
                limits=dict(data.get("limits") or {}),
                base_url=data.get("base_url"),
                import_path=data.get("import_path"),
                job_max_attempts=int(data.get("job_max_attempts", DEFAULT_JOB_ATTEMPTS)),
            )
        except (TypeError, ValueError) as exc:
            raise UserError(f"the session's agent recipe is malformed: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tools": list(self.tools),
            "limits": dict(self.limits),
            "base_url": self.base_url,
            "import_path": self.import_path,
            "job_max_attempts": self.job_max_attempts,
        }

    def load_tools(self) -> list[ToolSpec]:
        """The tools, imported (UserError names the spec that failed)."""
        return [spec for ref in self.tools for spec in import_tools(ref, self.import_path)]

    def build_agent(
        self,
        *,
        trace_dir: str | Path | bool | None = None,
        models: dict[str, Model] | None = None,
        limits: dict[str, Any] | None = None,
    ) -> Agent:
        """The agent.

        Args:
            trace_dir: where its runs write traces (as `Agent`).
            models: a cache of models costly to load, kept by the caller across calls.
            limits: limits overriding the recipe's for this agent only.
        """
        return Agent(
            self._model(models),
            tools=self.load_tools(),
            limits=Limits(**{**self.limits, **(limits or {})}),
            trace_dir=trace_dir,
        )

    def _model(self, cache: dict[str, Model] | None) -> Model:
        key = f"{self.model}@{self.base_url}"
        fresh = (self.model or "").partition(":")[0] in _FRESH_SPECS
        if cache is not None and not fresh and key in cache:
            return cache[key]
        model = resolve_model(self.model, base_url=self.base_url)
        if cache is not None and not fresh:
            cache[key] = model
        return model


def import_tools(ref: str, import_path: str | None = None) -> list[ToolSpec]:
    """The tool or list of tools at `MODULE:ATTR` (see `pi_runtime.tools.loading`)."""
    return load_tools(ref, import_path)


def _absolute(spec: str | None) -> str | None:
    if spec is None:
        return None
    prefix, sep, rest = spec.partition(":")
    if sep and rest and prefix in _PATH_SPECS:
        return f"{prefix}:{Path(rest).expanduser().resolve()}"
    return spec
