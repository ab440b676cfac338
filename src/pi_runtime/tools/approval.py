"""Calls that wait for a person: what a pending approval is, and how it is bound.

A tool needing approval (`@tool(requires_approval=True)`, or named in an agent's
`approval` list) has its call checked by the gate like any other (size, truncation,
JSON, schema) but not run: the gate answers with a `PendingApproval`. A person then
approves it (possibly with edited arguments, checked again the same way) or rejects it.

The fingerprint is the SHA-256 of the call's canonical arguments (key order, whitespace
and number spelling removed), so a decision can be bound to exactly what was reviewed:
arguments that changed since are refused, never silently run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import UserError
from ..messages import redact
from ..messages.canonical import canonical_json
from .arguments import ArgumentSchema, BadArguments, check_arguments
from .spec import ToolSpec


def fingerprint(arguments: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of `arguments` as canonical JSON: what an approval is bound to."""
    body = canonical_json(dict(arguments))
    return hashlib.sha256(body.encode(errors="surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A checked tool call waiting for a person's decision.

    Attributes:
        call_id: the model's tool call id; the decision's result answers it.
        tool: the tool's name.
        arguments: the call's arguments, as checked against the tool's schema.
        fingerprint: `fingerprint(arguments)`.
    """

    call_id: str
    tool: str
    arguments: dict[str, Any]
    fingerprint: str

    @classmethod
    def of(cls, call_id: str, tool: str, arguments: Mapping[str, Any]) -> PendingApproval:
        return cls(
            call_id=call_id,
            tool=tool,
            arguments=dict(arguments),
            fingerprint=fingerprint(arguments),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingApproval:
        """One from its `to_dict` form (UserError if a field is missing or mistyped)."""
        call_id, tool = data.get("call_id"), data.get("tool")
        arguments, digest = data.get("arguments"), data.get("fingerprint")
        if not (
            isinstance(call_id, str)
            and isinstance(tool, str)
            and isinstance(arguments, dict)
            and isinstance(digest, str)
        ):
            raise UserError(
                "a pending approval is {call_id, tool, arguments (an object), fingerprint}"
            )
        return cls(call_id=call_id, tool=tool, arguments=arguments, fingerprint=digest)

    @property
    def intact(self) -> bool:
        """Whether `arguments` still hash to `fingerprint` (nothing changed them since)."""
        return fingerprint(self.arguments) == self.fingerprint

    def to_dict(self) -> dict[str, Any]:
        """`{call_id, tool, arguments, fingerprint}`, as `RunResult` JSON lists it."""
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "fingerprint": self.fingerprint,
        }


def check_edited(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """Arguments a person edited, checked as the gate checks a model's (size, JSON,
    schema, the function's own validation); UserError saying what is wrong."""
    if not isinstance(arguments, Mapping):
        raise UserError(f"edited arguments of {spec.name!r} must be a JSON object")
    try:
        raw = json.dumps(dict(arguments), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(f"edited arguments of {spec.name!r} are not plain JSON: {exc}") from None
    size = len(raw.encode(errors="surrogatepass"))
    if size > spec.max_arg_bytes:
        raise UserError(
            f"edited arguments of {spec.name!r} are {size} bytes; it accepts at most "
            f"{spec.max_arg_bytes}"
        )
    checked = check_arguments(spec, ArgumentSchema.of(spec.parameters), raw)
    if isinstance(checked, BadArguments):
        raise UserError(f"edited arguments of {spec.name!r}: {redact(checked.message)}")
    return checked.arguments
