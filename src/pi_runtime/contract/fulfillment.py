"""Seed 002's `fulfillment` contract: what the user hears, what the application gets.

```json
{"fulfillment": {"speech": "...", "data": {...}, "intent": "weather_query", "errors": []}}
```

`data` is free-form in the seed (weather figures, a list of rooms, ...), and a free-form
object is exactly what strict decoding cannot enforce. So the default contract has
`strict=False`: every object but `data` is closed and every field required, the whole
answer is validated, and providers follow the schema without enforcing it. Pass
`data_schema` (a closed object schema) to get a fully strict contract the provider can
enforce while decoding.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import UserError
from .spec import OutputContract

FULFILLMENT_INTENTS = ("weather_query", "meeting_room_booking", "create_todo", "general_chat")

FULFILLMENT_EXAMPLE: dict[str, Any] = {
    "fulfillment": {
        "speech": "北京今天晴，气温 18-28 度，东南风 3 级，适合出门。",
        "data": {"city": "北京", "weather": "晴", "temp_min": 18, "temp_max": 28},
        "intent": "weather_query",
        "errors": [],
    }
}
"""The seed's example answer (§4.3): schema fixes the format, the example the meaning."""

_FREE_FORM: dict[str, Any] = {"type": "object", "additionalProperties": True}


def fulfillment_schema(data_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contract's JSON Schema; `data` is free-form unless `data_schema` is given."""
    return {
        "type": "object",
        "properties": {
            "fulfillment": {
                "type": "object",
                "properties": {
                    "speech": {
                        "type": "string",
                        "description": "What the user reads: plain, short sentences.",
                    },
                    "data": {
                        "description": "Structured results for the application ({} if none); "
                        "never a copy of speech.",
                        **(data_schema or _FREE_FORM),
                    },
                    "intent": {
                        "type": "string",
                        "enum": list(FULFILLMENT_INTENTS),
                        "description": "The user's intent.",
                    },
                    "errors": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "What went wrong, one entry each; [] if nothing did.",
                    },
                },
                "required": ["speech", "data", "intent", "errors"],
                "additionalProperties": False,
            }
        },
        "required": ["fulfillment"],
        "additionalProperties": False,
    }


def fulfillment_contract(
    *, data_schema: dict[str, Any] | None = None, max_repairs: int = 2, fallback: Any = None
) -> OutputContract:
    """The `fulfillment` contract, with the seed's example answer attached.

    Args:
        data_schema: a closed object schema for `data`; makes the contract strict. With a
            data schema the seed's example may no longer fit, so none is attached.
        max_repairs: repair turns before the run ends with `contract_violation`.
        fallback: the output when the repairs are spent (see `OutputContract.fallback`).
    """
    if data_schema is not None and not isinstance(data_schema, dict):
        raise UserError(
            f"data_schema must be a JSON Schema object, got {type(data_schema).__name__}"
        )
    return OutputContract.from_schema(
        fulfillment_schema(data_schema),
        name="fulfillment",
        strict=data_schema is not None,
        max_repairs=max_repairs,
        example=None if data_schema is not None else FULFILLMENT_EXAMPLE,
        fallback=fallback,
    )
