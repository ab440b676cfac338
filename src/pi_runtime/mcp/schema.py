"""An MCP tool's `inputSchema` as a schema the gate can enforce strictly.

The gate checks every call's arguments against its tool's JSON Schema before anything
runs; for an MCP tool that schema comes from the server, so it is outside text. It is
checked and normalised here, once, when the tools are listed:

- it must be a valid JSON Schema (2020-12 rules; drafts 4-7 spell the same checks) for
  an object, no larger than `MAX_SCHEMA_BYTES` and nested no deeper than
  `MAX_SCHEMA_DEPTH` (checking it, and every call's arguments against it, recurses);
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
import re
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..messages import clipped, depth_within
from ..tools.linear_pattern import is_linear

MAX_SCHEMA_BYTES = 64_000
MAX_SCHEMA_DEPTH = 48
"""JSON levels (objects and lists) a schema may nest: far more than a tool's arguments
need, and shallow enough that checking a call against it cannot exhaust the stack."""
_COMBINED = ("allOf", "anyOf", "oneOf", "$ref", "if", "patternProperties", "unevaluatedProperties")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMAS = ("items", "additionalProperties", "contains", "not", "then", "else")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")


class UnusableSchema(ValueError):
    """A tool's input schema that Pi cannot enforce; the message says why."""


def strict_schema(raw: Any) -> dict[str, Any]:
    """`raw` checked, copied and closed as the module docstring says (or UnusableSchema)."""
    try:
        return _strict(raw)
    except (RecursionError, OverflowError, re.error) as exc:
        # what the limits do not catch, e.g. a `pattern` of `a{99999999999}`: `re` overflows
        raise UnusableSchema(
            f"the input schema cannot be checked: {type(exc).__name__}: {exc}"
        ) from None


def _strict(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise UnusableSchema(f"the input schema is not a JSON object: {type(raw).__name__}")
    if not depth_within(raw, MAX_SCHEMA_DEPTH):
        raise UnusableSchema(f"the input schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")
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


_IN_PLACE = ("allOf", "anyOf", "oneOf")
"""Keywords whose schemas apply to the same value (with `not`, `if`, `then`, `else`,
`dependentSchemas` and `$ref`): a loop through only these never ends."""
_VALUES = ("const", "enum", "default", "examples")
"""Keywords holding values, not schemas: a `$ref` key inside one is data."""
_BY_NAME = (*_SUBSCHEMA_MAPS, "patternProperties")
"""Keywords holding schemas by name: a key inside one is a name, not a keyword."""


def _check_refs(schema: dict[str, Any]) -> None:
    """Every `$ref` points at a part of the schema, and no chain of them comes back to
    where it began without going into the value (`properties`, `items`, …): checking a
    call against such a loop recurses without end. A loop through a property, as in a
    tree, ends where the arguments do."""
    nodes: dict[str, dict[str, Any]] = {}
    held: set[str] = set()  # every part's path: a `$ref` may name `true` or `false`
    anchors: dict[str, str] = {}
    # (path, part, whether the part is a table of schemas by name: `properties`, …)
    stack: list[tuple[str, Any, bool]] = [("", schema, False)]
    while stack:
        path, node, by_name = stack.pop()
        held.add(path)
        if isinstance(node, list):
            stack.extend((f"{path}/{i}", item, False) for i, item in enumerate(node))
        elif isinstance(node, dict) and by_name:  # a property may be named `default`
            stack.extend((f"{path}/{_escape(k)}", v, False) for k, v in node.items())
        elif isinstance(node, dict):
            nodes[path] = node
            if isinstance(node.get("$anchor"), str):
                anchors[node["$anchor"]] = path
            for key, value in node.items():
                if key not in _VALUES:
                    stack.append((f"{path}/{_escape(key)}", value, key in _BY_NAME))
    edges = {path: _same_value(path, node, held, anchors) for path, node in nodes.items()}
    _no_loop(edges)
    for node in nodes.values():
        _linear_patterns(node)


def _linear_patterns(node: dict[str, Any]) -> None:
    """Every pattern of the schema `node` runs in linear time: one that needs lookaround
    or a backreference runs on Python's `re`, which may backtrack for seconds over a few
    dozen characters the model writes (`tools.linear_pattern`). A server's schema is not
    trusted with that; a developer's own tools still may."""
    patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
    if isinstance(node.get("patternProperties"), dict):
        patterns += list(node["patternProperties"])
    for pattern in patterns:
        if not is_linear(pattern) and _compiles(pattern):  # (else said as not compiling)
            shown = clipped(pattern, 80)
            raise UnusableSchema(
                f"the input schema's pattern {shown!r} needs lookaround or a backreference, "
                "which could take time exponential in the text the model writes"
            )


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        return False
    return True


def _same_value(
    path: str, node: dict[str, Any], held: set[str], anchors: dict[str, str]
) -> list[str]:
    """The schemas that check the same value as the one at `path`, by their paths."""
    targets = [f"{path}/{key}" for key in ("not", "if", "then", "else") if key in node]
    for key in _IN_PLACE:
        if isinstance(node.get(key), list):
            targets += [f"{path}/{key}/{i}" for i in range(len(node[key]))]
    if isinstance(node.get("dependentSchemas"), dict):
        targets += [f"{path}/dependentSchemas/{_escape(k)}" for k in node["dependentSchemas"]]
    ref = node.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#"):
            raise UnusableSchema(f"the input schema refers outside itself ($ref {ref!r})")
        fragment = unquote(ref[1:])
        target = fragment if fragment.startswith("/") or not fragment else anchors.get(fragment)
        if target is None or target not in held:
            raise UnusableSchema(f"the input schema refers to {ref!r}, which it does not hold")
        targets.append(target)
    return targets


def _no_loop(edges: dict[str, list[str]]) -> None:
    done: set[str] = set()
    for start in edges:
        if start in done:
            continue
        on_path = {start}
        trail = [(start, iter(edges[start]))]
        while trail:
            here, rest = trail[-1]
            step = next(rest, None)
            if step is None:
                trail.pop()
                on_path.discard(here)
                done.add(here)
            elif step in on_path:
                raise UnusableSchema(
                    f"the input schema's #{step} leads back to itself through $ref "
                    "without going into the value: checking a call would never end"
                )
            elif step not in done and step in edges:
                on_path.add(step)
                trail.append((step, iter(edges[step])))


def _escape(key: str) -> str:
    """`key` as one JSON Pointer step."""
    return key.replace("~", "~0").replace("/", "~1")


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
