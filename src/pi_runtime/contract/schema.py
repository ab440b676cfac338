"""Contract schemas in the strict form providers' structured output decoding accepts.

The rules (OpenAI strict structured outputs; Anthropic's structured outputs ask the same):

- the root is an object (`"type": "object"`);
- every object lists its properties and is closed (`additionalProperties: false`); an
  object with properties and no `additionalProperties` is closed here, as a contract
  never wants keys it did not name (closing only narrows what is accepted);
- every property is required; an optional property that accepts null becomes required
  (the model writes null where it would have left the key out), any other optional
  property is refused: requiring it would force the model to invent a value it may not
  have, and making it nullable would hand the caller nulls it never declared;
- `$ref` is local (`#/...`: nothing is ever downloaded) and stands alone: a `$ref` with
  sibling keywords (pydantic's `description`) is replaced by its target plus the siblings;
- `title` and `default` are dropped: noise for the model, meaningless when all is required.

An *open object* (no listed properties, `additionalProperties` true or a schema, or
`patternProperties`) has keys no decoder can know in advance, and strict decoding refuses
it. A contract built with `strict=False` may keep open objects: it is still validated in
full and every other object stays closed, but the provider is asked to follow the schema
without enforcing it (see `OutputContract.strict`).
"""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..exceptions import UserError

DRAFT_URI = "https://json-schema.org/draft/2020-12/schema"

# Keywords strict decoding cannot honour (OpenAI's documented unsupported set).
UNSUPPORTED_STRICT = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "propertyNames",
)

_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONES = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_DROPPED = ("title", "default")


def pointer(*parts: str | int) -> str:
    """A JSON Pointer fragment (`#/properties/a~1b`) naming a place in a schema."""
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return "#" + "".join(f"/{p}" for p in escaped)


def prepare_schema(schema: Any, *, strict: bool) -> dict[str, Any]:
    """A strict copy of `schema`; UserError saying where and why when it cannot be one."""
    if not isinstance(schema, dict):
        raise UserError(
            f"a contract schema must be a JSON Schema object, got {type(schema).__name__}"
        )
    declared = schema.get("$schema", DRAFT_URI)
    if not isinstance(declared, str) or declared.rstrip("#") != DRAFT_URI:
        raise UserError(
            f"contract schemas are JSON Schema Draft 2020-12; $schema says {declared!r} "
            f"(drop it or set it to {DRAFT_URI!r})"
        )
    try:
        out = _strict_copy(schema, strict=strict)
    except RecursionError:
        raise UserError("the schema is nested too deeply to check") from None
    except OverflowError as exc:  # a `pattern` like "a{99999999999}": not an re.error
        raise UserError(
            f"not a valid JSON Schema (Draft 2020-12): a regex in it cannot be compiled: {exc}"
        ) from None
    _check_root(out)
    _check_reference_cycles(out)
    return out


def _strict_copy(schema: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    """`schema` checked against the draft's metaschema and rewritten strict (a copy)."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = pointer(*exc.path)
        raise UserError(
            f"not a valid JSON Schema (Draft 2020-12) at {where}: {exc.message}"
        ) from None
    out = copy.deepcopy(schema)
    out.pop("$schema", None)
    if "$ref" not in out:
        _check_root(out)
    # a root `$ref` (pydantic's recursive models) is inlined by the walk: providers want
    # the root itself to be the object
    _Strictifier(out, strict=strict).walk(out, (), frozenset())
    return out


def _check_root(schema: dict[str, Any]) -> None:
    if schema.get("type") != "object":
        raise UserError(
            'the root of a contract schema must be `"type": "object"`: a final answer is one '
            "JSON object (put any other value in a property)"
        )


class _Strictifier:
    """Rewrites a schema in place into its strict form, walking every subschema once."""

    def __init__(self, root: dict[str, Any], *, strict: bool) -> None:
        self.root = root
        self.strict = strict

    def walk(self, node: Any, path: tuple[str | int, ...], inlining: frozenset[str]) -> None:
        if not isinstance(node, dict):
            return  # `true` / `false` schemas
        while "$ref" in node and len(node) > 1:
            # strict decoders refuse a `$ref` with siblings: inline its target under them
            ref = node["$ref"]
            target = copy.deepcopy(self.resolve(ref, path))  # before clearing: it may be `node`
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node.clear()
            if ref in inlining:
                node["$ref"] = ref  # a recursive definition: keep the reference, lose notes
                break
            if isinstance(target, dict):
                node.update(target)
            node.update(siblings)  # the referring schema's own words take priority
            inlining = inlining | {ref}
        if "$ref" in node:
            self.resolve(node["$ref"], path)
            return  # a plain reference: its target is walked where it is defined
        for key in _DROPPED:
            node.pop(key, None)
        if self.strict:
            for key in UNSUPPORTED_STRICT:
                if key in node:
                    raise UserError(
                        f"{pointer(*path)} uses {key!r}, which strict structured output "
                        "cannot enforce: rewrite it without, or build the contract with "
                        "strict=False"
                    )
        if _is_object(node):
            self.close(node, path)
        for key in _SCHEMA_MAPS:
            if isinstance(node.get(key), dict):
                for name, sub in node[key].items():
                    self.walk(sub, (*path, key, name), inlining)
        for key in _SCHEMA_LISTS:
            if isinstance(node.get(key), list):
                for i, sub in enumerate(node[key]):
                    self.walk(sub, (*path, key, i), inlining)
        for key in _SCHEMA_ONES:
            self.walk(node.get(key), (*path, key), inlining)

    def close(self, node: dict[str, Any], path: tuple[str | int, ...]) -> None:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if isinstance(properties, dict) and "additionalProperties" not in node:
            node["additionalProperties"] = False
        elif properties is None and extra is False:
            node["properties"] = {}
        is_open = node.get("additionalProperties", True) is not False or "patternProperties" in node
        if is_open and self.strict:
            raise UserError(
                f"{pointer(*path)} is an open object (keys not listed in advance); strict "
                "structured output closes every object. List its properties, or build the "
                "contract with strict=False to keep it free-form (validated, not enforced "
                "by the provider)"
            )
        if not isinstance(properties, dict):
            return
        required = node.get("required", [])
        unknown = [name for name in required if name not in properties]
        if unknown and node.get("additionalProperties") is False:
            raise UserError(
                f"{pointer(*path)} requires {unknown[0]!r} but does not define it, and the "
                "object is closed: no answer could match"
            )
        for name, sub in properties.items():
            if name not in required and not self.accepts_null(sub, path, 0):
                raise UserError(
                    f"property {name!r} at {pointer(*path)} is optional and does not accept "
                    "null; a strict contract requires every property. Make it required, or "
                    'let it be null (e.g. JSON Schema `"type": ["integer", "null"]`; pydantic '
                    f"`{name}: int | None = None`)"
                )
        # properties' order, so the model reads the fields in one order everywhere
        node["required"] = [*properties, *(n for n in required if n not in properties)]

    def resolve(self, ref: Any, path: tuple[str | int, ...]) -> Any:
        return _resolve(self.root, ref, pointer(*path))

    def accepts_null(self, schema: Any, path: tuple[str | int, ...], depth: int) -> bool:
        if schema is True or depth > 32:
            return schema is True
        if not isinstance(schema, dict):
            return False
        kind = schema.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            return True
        if None in schema.get("enum", ()) or ("const" in schema and schema["const"] is None):
            return True
        if "$ref" in schema:
            target = self.resolve(schema["$ref"], path)
            if self.accepts_null(target, path, depth + 1):
                return True
        branches = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
        return any(self.accepts_null(s, path, depth + 1) for s in branches)


def _is_object(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def _resolve(root: dict[str, Any], ref: Any, where: str) -> Any:
    """The schema a local `$ref` points at; UserError for remote or dangling references."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise UserError(
            f"{where} refers to {ref!r}: contract schemas may only use local references "
            "(`#/$defs/...`); nothing is downloaded"
        )
    node: Any = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise UserError(f"{where} refers to {ref!r}, which the schema does not define")
    return node


def _in_place_refs(node: Any) -> list[str]:
    """References `node` applies to the same value (not to a property or item of it)."""
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("$ref"), str):
            found.append(item["$ref"])
        for key in ("anyOf", "oneOf", "allOf"):
            stack.extend(item.get(key) or ())
        stack.extend(item.get(key) for key in ("not", "if", "then", "else"))
    return found


def _all_refs(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$ref"), str):
                found.add(item["$ref"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _check_reference_cycles(root: dict[str, Any]) -> None:
    """Refuse a `$ref` that comes back to itself without reading deeper into the answer
    (`{"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}}`): checking any answer against
    it would recurse forever. Recursion through properties or items is fine."""
    edges = {ref: _in_place_refs(_resolve(root, ref, ref)) for ref in sorted(_all_refs(root))}
    state: dict[str, str] = {}  # "open" while on the current path, then "done"
    for start in edges:
        if start in state:
            continue
        path, pending = [start], [iter(edges[start])]
        state[start] = "open"
        while pending:
            nxt = next(pending[-1], None)
            if nxt is None:
                state[path.pop()] = "done"
                pending.pop()
            elif state.get(nxt) == "open":
                loop = " -> ".join([*path[path.index(nxt) :], nxt])
                raise UserError(
                    "the schema's references loop without reading deeper into the answer "
                    f"({loop}): no answer could ever be checked"
                )
            elif nxt not in state:
                state[nxt] = "open"
                path.append(nxt)
                pending.append(iter(edges[nxt]))
