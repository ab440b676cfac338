"""`OutputContract`: what a final answer must be, and the check of one answer against it."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel

from ..exceptions import UserError
from ..tools.linear_pattern import LinearValidator
from .repair import instructions_text, repair_text
from .schema import prepare_schema
from .validate import model_errors, parse_answer, schema_errors

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContractCheck:
    """The verdict on one answer.

    Attributes:
        value: the JSON object the model wrote, when it matches; else None.
        errors: one line per problem, each starting with the JSON path it concerns
            (`$.fulfillment.intent: ...`); empty when the answer matches.
        instance: for a contract built from a pydantic model, the validated instance.
    """

    value: dict[str, Any] | None = None
    errors: tuple[str, ...] = ()
    instance: BaseModel | None = None

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputContract:
    """A final answer must be one JSON object matching `schema` (and `model`, if given).

    Build one with `from_model` or `from_schema`; the schema is stored in strict form
    (see `pi_runtime.contract.schema`). Treat `schema` as read-only.

    Attributes:
        name: the contract's name as providers want it (1-64 of `A-Za-z0-9_-`).
        schema: strict JSON Schema (Draft 2020-12) of the answer; its root is an object.
        strict: True when the provider may enforce the schema while decoding (every object
            closed). False keeps declared free-form objects: the provider is asked to follow
            the schema without enforcing it, and `validate` still checks all of it.
        max_repairs: how many times a failing answer is sent back before the run ends with
            `contract_violation`.
        model: the pydantic model whose validators also run on every answer.
        example: a valid answer shown to the model in `instructions()`; checked here.
        fallback: the run's output when the repairs are spent (seed 002 §4.4: fall back
            to a safe answer rather than nothing): any JSON value, e.g. a polite refusal
            in the contract's shape (an object is checked against the contract). The
            run still ends `contract_violation` with `contract_errors` filled, so the
            miss is never mistaken for an answer; None (the default) means no output.
    """

    name: str
    schema: dict[str, Any]
    strict: bool = True
    max_repairs: int = 2
    model: type[BaseModel] | None = None
    example: dict[str, Any] | None = None
    fallback: Any = None
    _validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise UserError(f"contract name {self.name!r} must be 1-64 letters, digits, _ or -")
        if isinstance(self.max_repairs, bool) or not isinstance(self.max_repairs, int):
            raise UserError(f"contract {self.name!r}: max_repairs must be an int")
        if self.max_repairs < 0:
            raise UserError(f"contract {self.name!r}: max_repairs must be >= 0")
        if not isinstance(self.strict, bool):
            raise UserError(
                f"contract {self.name!r}: strict must be True or False, got {self.strict!r}"
            )
        try:
            schema = prepare_schema(self.schema, strict=self.strict)
        except UserError as exc:
            raise UserError(f"contract {self.name!r}: {exc}") from None
        object.__setattr__(self, "schema", schema)
        # patterns run in linear time: the answer they check is the model's text
        validator = LinearValidator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        object.__setattr__(self, "_validator", validator)
        if self.example is not None:
            check = self.validate(json.dumps(self.example, ensure_ascii=False))
            if not check.ok:
                raise UserError(
                    f"contract {self.name!r}: its example does not match it: {'; '.join(check.errors)}"
                )
            object.__setattr__(self, "example", copy.deepcopy(self.example))
        if self.fallback is not None:
            self._check_fallback()

    def _check_fallback(self) -> None:
        try:
            text = json.dumps(self.fallback, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise UserError(
                f"contract {self.name!r}: fallback must be a JSON value: {exc}"
            ) from None
        if isinstance(self.fallback, dict):
            check = self.validate(text)
            if not check.ok:
                raise UserError(
                    f"contract {self.name!r}: its fallback does not match it: {'; '.join(check.errors)}"
                )
        object.__setattr__(self, "fallback", json.loads(text))  # a copy nobody else holds

    @classmethod
    def from_model(
        cls,
        model: type[BaseModel],
        *,
        name: str | None = None,
        strict: bool = True,
        max_repairs: int = 2,
        example: dict[str, Any] | None = None,
        fallback: Any = None,
    ) -> OutputContract:
        """A contract from a pydantic model: its JSON Schema, made strict, plus its validators.

        Fields with a default must accept None (`x: int | None = None`); a free-form field
        (`dict[str, Any]`) needs `strict=False`.
        """
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise UserError(f"from_model needs a pydantic BaseModel subclass, got {model!r}")
        chosen = name or re.sub(r"[^A-Za-z0-9_-]", "_", model.__name__)[:64]
        try:
            schema = model.model_json_schema()
        except Exception as exc:
            raise UserError(
                f"contract {chosen!r}: {model.__name__} has no JSON Schema: {exc}"
            ) from exc
        return cls(
            name=chosen,
            schema=schema,
            strict=strict,
            max_repairs=max_repairs,
            model=model,
            example=example,
            fallback=fallback,
        )

    @classmethod
    def from_schema(
        cls,
        schema: dict[str, Any],
        *,
        name: str,
        strict: bool = True,
        max_repairs: int = 2,
        example: dict[str, Any] | None = None,
        fallback: Any = None,
    ) -> OutputContract:
        """A contract from a JSON Schema (Draft 2020-12), made strict or refused with why."""
        return cls(
            name=name,
            schema=schema,
            strict=strict,
            max_repairs=max_repairs,
            example=example,
            fallback=fallback,
        )

    def validate(self, text: str) -> ContractCheck:
        """Check a final answer. Never raises on any text; a bug in a pydantic validator
        (an exception other than ValueError / AssertionError) propagates."""
        if not isinstance(text, str):
            raise UserError(
                f"contract {self.name!r}: validate needs the answer text, got {type(text).__name__}"
            )
        value, errors = parse_answer(text)
        if value is None:
            return ContractCheck(errors=errors)
        errors = schema_errors(self._validator, value)
        if errors:
            return ContractCheck(errors=errors)
        instance = None
        if self.model is not None:
            instance, errors = model_errors(self.model, value)
            if errors:
                return ContractCheck(errors=errors)
        return ContractCheck(value=value, instance=instance)

    def repair_message(self, check: ContractCheck) -> str:
        """The user turn that sends a failed answer back: its errors and the format rule."""
        if check.ok:
            raise UserError(
                f"contract {self.name!r}: the answer matched; there is nothing to repair"
            )
        return repair_text(self.name, check.errors)

    def instructions(self) -> str:
        """The output-format text for a system prompt (models without native structured output)."""
        return instructions_text(self.name, self.schema, self.example)
