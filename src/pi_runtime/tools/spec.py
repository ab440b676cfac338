"""`@tool`: a plain or async function becomes a `ToolSpec` with a strict JSON Schema."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, get_type_hints, overload

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from ..exceptions import UserError
from ..messages import find_non_finite, repair_value
from ..models import ToolDefinition

MIN_RESULT_BYTES = 100

IDEMPOTENCY_PARAM = "idempotency_key"
"""A tool parameter of this name is filled by the runtime, never by the model."""

SESSION_PARAM = "session_id"
"""A tool parameter of this name receives the conversation's id (e.g. to own its data)."""

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Summary text and per-argument descriptions from a Google-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    indent = None
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args:
            if line.strip() and not line.startswith((" ", "\t")):
                in_args = False  # the next section started
            else:
                m = _ARG_LINE.match(line)
                this_indent = len(line) - len(line.lstrip())
                if m and (indent is None or this_indent <= indent):
                    indent = this_indent
                    current = m.group(1).lstrip("*")
                    params[current] = m.group(3).strip()
                elif current and line.strip():
                    params[current] = f"{params[current]} {line.strip()}"
                continue
        if re.match(r"^\s*(Returns|Raises|Yields|Examples?|Note):\s*$", line):
            break
        summary.append(line)
    return "\n".join(summary).strip(), params


def _strictify(schema: dict[str, Any]) -> dict[str, Any]:
    """Close every object schema (`additionalProperties: false`) and drop titles."""
    schema.pop("title", None)
    if schema.get("type") == "object" or "properties" in schema:
        schema.setdefault("additionalProperties", False)
    for key in ("properties", "$defs", "definitions"):
        for sub in schema.get(key, {}).values():
            if isinstance(sub, dict):
                _strictify(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _strictify(schema[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for sub in schema.get(key, []):
            if isinstance(sub, dict):
                _strictify(sub)
    return schema


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool the runtime can offer, check and run.

    Attributes:
        name: the name the model calls.
        description: what the model reads to decide when and how to call it.
        parameters: strict JSON Schema of the arguments.
        function: the Python callable (plain or async).
        idempotent: False for side effects (email, order, payment): such calls get an
            idempotency key derived from the session and the tool call id.
        max_arg_bytes: arguments larger than this are refused before parsing.
        timeout_s: a call running longer fails with `timeout` (None: no limit).
        retries: how many times a transient failure is retried before the model hears of it.
        max_result_bytes: results longer than this are cut, with a marker and the size.
        background: a long tool: with a durable store, a call starts a job and the run
            ends `awaiting`; the result reaches the conversation when the job is done.
        requires_approval: a call is checked but not run until a person approves it: the
            run ends `awaiting_approval` (see `pi_runtime.tools.approval`).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    is_async: bool
    takes_idempotency_key: bool
    takes_session_id: bool = False
    idempotent: bool = True
    max_arg_bytes: int = 64_000
    timeout_s: float | None = 60.0
    retries: int = 2
    max_result_bytes: int = 16_000
    background: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    requires_approval: bool = False

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )

    def validate_python(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments converted to the function's Python types (raises ValidationError).

        Arguments that did not come through `parse_object` (a stored job's, say) get the
        same care: lone surrogates are repaired and NaN or ±Infinity anywhere is refused.
        """
        arguments = repair_value(arguments)
        found = find_non_finite(arguments)
        if found is not None:
            raise ValidationError.from_exception_data(
                self.arguments_model.__name__,
                [{"type": "finite_number", "loc": found[0], "input": found[1]}],
            )
        return self.validate_parsed(arguments)

    def validate_parsed(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """`validate_python` for arguments `parse_object` returned: already repaired and finite."""
        # the validator itself: `model_validate` only adds a frame and its keywords
        model = self.arguments_model.__pydantic_validator__.validate_python(arguments)
        # a model's `__dict__` holds its fields, and only them (extras and private
        # attributes live apart): a copy is the fields by name, without a lookup each
        return dict(model.__dict__)


def _field(hint: Any, default: Any, doc: str | None) -> tuple[Any, FieldInfo]:
    """(annotation, field) for one parameter, keeping every constraint it declares.

    Constraints may sit in the hint (`Annotated[int, Field(le=10)]`) or in the default
    (`n: int = Field(5, ge=1)`); pydantic merges both. A description given in either
    wins over the docstring's, which only fills a gap.
    """
    info = default if isinstance(default, FieldInfo) else Field(default)
    if doc and not (info.description or FieldInfo.from_annotation(hint).description):
        hint = Annotated[hint, Field(description=doc)]
    return hint, info


def _build(
    function: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    idempotent: bool,
    max_arg_bytes: int,
    timeout_s: float | None,
    retries: int,
    max_result_bytes: int,
    background: bool = False,
    requires_approval: bool = False,
) -> ToolSpec:
    if not callable(function):
        raise UserError(f"@tool needs a function, got {function!r}")
    tool_name = name or function.__name__
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", tool_name):
        raise UserError(f"tool name {tool_name!r} must be 1-64 letters, digits, _ . or -")
    if max_arg_bytes <= 0 or retries < 0:
        raise UserError(f"tool {tool_name!r}: max_arg_bytes must be positive and retries >= 0")
    if max_result_bytes < MIN_RESULT_BYTES:
        raise UserError(
            f"tool {tool_name!r}: max_result_bytes must be at least {MIN_RESULT_BYTES} "
            "(room for some content and the truncation marker)"
        )
    if timeout_s is not None and timeout_s <= 0:
        raise UserError(f"tool {tool_name!r}: timeout_s must be positive or None")
    summary, arg_docs = _parse_docstring(function.__doc__)
    try:
        hints = get_type_hints(function, include_extras=True)
    except Exception as exc:
        raise UserError(f"tool {tool_name!r}: cannot resolve type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    takes_key = takes_session = False
    for param in inspect.signature(function).parameters.values():
        if param.kind is param.POSITIONAL_ONLY:
            raise UserError(
                f"tool {tool_name!r}: parameter {param.name!r} is positional-only; "
                "the runtime passes arguments by name"
            )
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(
                f"tool {tool_name!r}: *args and **kwargs cannot be described to a model"
            )
        if param.name == IDEMPOTENCY_PARAM:
            takes_key = True
            continue
        if param.name == SESSION_PARAM:
            takes_session = True
            continue
        if param.name not in hints:
            raise UserError(f"tool {tool_name!r}: parameter {param.name!r} needs a type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default, arg_docs.get(param.name))
    try:
        definitions: dict[str, Any] = {name: _field(*spec) for name, spec in fields.items()}
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
            **definitions,
        )
        schema = _strictify(model.model_json_schema())
    except Exception as exc:
        raise UserError(f"tool {tool_name!r}: cannot build a JSON Schema: {exc}") from exc
    try:
        # the gate checks arguments with this schema: a `pattern` pydantic accepts but
        # Python's `re` cannot compile (`\p{L}`) would fail every call, so fail here
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise UserError(f"tool {tool_name!r}: unusable JSON Schema: {exc.message}") from exc
    return ToolSpec(
        name=tool_name,
        description=(description or summary or tool_name).strip(),
        parameters=schema,
        function=function,
        arguments_model=model,
        is_async=inspect.iscoroutinefunction(function),
        takes_idempotency_key=takes_key,
        takes_session_id=takes_session,
        idempotent=idempotent,
        max_arg_bytes=max_arg_bytes,
        timeout_s=timeout_s,
        retries=retries,
        max_result_bytes=max_result_bytes,
        background=background,
        requires_approval=requires_approval,
    )


@overload
def tool(function: Callable[..., Any], /) -> ToolSpec: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = True,
    max_arg_bytes: int = 64_000,
    timeout_s: float | None = 60.0,
    retries: int = 2,
    max_result_bytes: int = 16_000,
    background: bool = False,
    requires_approval: bool = False,
) -> Callable[[Callable[..., Any]], ToolSpec]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = True,
    max_arg_bytes: int = 64_000,
    timeout_s: float | None = 60.0,
    retries: int = 2,
    max_result_bytes: int = 16_000,
    background: bool = False,
    requires_approval: bool = False,
) -> ToolSpec | Callable[[Callable[..., Any]], ToolSpec]:
    """Turn a function into a tool; its type hints and docstring become the schema.

    Use bare (`@tool`) or with options (`@tool(idempotent=False, timeout_s=5)`).
    A parameter named `idempotency_key` is filled by the runtime for non-idempotent tools.
    With `requires_approval=True` a call runs only once a person approves it.
    """
    options = {
        "name": name,
        "description": description,
        "idempotent": idempotent,
        "max_arg_bytes": max_arg_bytes,
        "timeout_s": timeout_s,
        "retries": retries,
        "max_result_bytes": max_result_bytes,
        "background": background,
        "requires_approval": requires_approval,
    }
    if function is not None:
        return _build(function, **options)  # type: ignore[arg-type]

    def decorate(fn: Callable[..., Any]) -> ToolSpec:
        return _build(fn, **options)  # type: ignore[arg-type]

    return decorate
