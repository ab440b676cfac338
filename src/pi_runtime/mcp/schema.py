"""An MCP tool's `inputSchema` as a schema the gate can enforce strictly.

The gate checks every call's arguments against its tool's JSON Schema before anything
runs; for an MCP tool that schema comes from the server, so it is outside text. It is
checked and normalised here, once, when the tools are listed:

- it must be a valid JSON Schema (2020-12 rules; drafts 4-7 spell the same checks) for
  an object, no larger than `MAX_SCHEMA_BYTES`;
- every `$ref` must point inside the schema (`#/…`): a remote one would be fetched or
  ignored, and Pi does neither;
- objects that list their `properties` and say nothing of other keys are closed
  (`additionalProperties: false`), as Pi closes its own tools' schemas: a key the server
  never named is the model's mistake, and it hears so before the server is called.
  Objects that use `allOf`/`anyOf`/`oneOf`, `$ref`, `patternProperties`,
  `unevaluatedProperties` or `if`, and free-form objects without `properties`, are left
  as the server wrote them (closing them would refuse valid arguments);
- `title`s are dropped (the model reads names and descriptions; titles only cost tokens).

A schema that fails these checks is `UnusableSchema`: the tool is left out (see
`MCPTools`), never offered unchecked.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

MAX_SCHEMA_BYTES = 64_000
_COMBINED = ("allOf", "anyOf", "oneOf", "$ref", "if", "patternProperties", "unevaluatedProperties")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMAS = ("items", "additionalProperties", "contains", "not", "then", "else")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")


class UnusableSchema(ValueError):
    """A tool's input schema that Pi cannot enforce; the message says why."""


def strict_schema(raw: Any) -> dict[str, Any]:
    """`raw` checked, copied and closed as the module docstring says (or UnusableSchema)."""
    if not isinstance(raw, dict):
        raise UnusableSchema(f"the input schema is not a JSON object: {type(raw).__name__}")
    try:
        size = len(json.dumps(raw, ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError) as exc:
        raise UnusableSchema(f"the input schema is not plain JSON: {exc}") from None
    if size > MAX_SCHEMA_BYTES:
        raise UnusableSchema(f"the input schema is {size} bytes; at most {MAX_SCHEMA_BYTES}")
    schema = copy.deepcopy(raw)
    schema.pop("$schema", None)  # older drafts' URIs: the checks below are 2020-12's
    schema.pop("$id", None)  # a base URI would make `#/…` refs resolve elsewhere
    kind = schema.setdefault("type", "object")
    if kind != "object":
        raise UnusableSchema(f"the input schema must describe an object, not {kind!r}")
    _check_refs(schema)
    try:  # its format checks compile every `pattern` with Python's `re`, as calls will
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise UnusableSchema(f"the input schema is not valid JSON Schema: {exc.message}") from None
    _close(schema, top=True)
    return schema


def _check_refs(node: Any) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            raise UnusableSchema(f"the input schema refers outside itself ($ref {ref!r})")
        for value in node.values():
            _check_refs(value)
    elif isinstance(node, list):
        for value in node:
            _check_refs(value)


def _close(schema: dict[str, Any], *, top: bool = False) -> None:
    """Close what can be closed safely, in place; drop titles."""
    if isinstance(schema.get("title"), str):
        del schema["title"]
    kind = schema.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    open_ended = "additionalProperties" in schema or any(k in schema for k in _COMBINED)
    closable = (is_object or "properties" in schema) and not open_ended
    if closable and ("properties" in schema or top):
        schema["additionalProperties"] = False
    for key in _SUBSCHEMA_MAPS:
        table = schema.get(key)
        if isinstance(table, dict):
            for sub in table.values():
                if isinstance(sub, dict):
                    _close(sub)
    for key in _SUBSCHEMAS:
        if isinstance(schema.get(key), dict):
            _close(schema[key])
    if "properties" not in schema:
        # alternatives of a schema with properties of its own see only a part of them,
        # and allOf branches always do: those stay open
        for key in _SUBSCHEMA_LISTS:
            for sub in schema.get(key) or ():
                if isinstance(sub, dict):
                    _close(sub)
