"""Output contracts (seed 002 §4): strict schemas, answers checked with JSON paths, repair text.

A contract is what the loop sends as native structured output, checks every final answer
against, and feeds back to the model on failure; each test protects one of those promises.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from examples.contracts.fulfillment import FulfillmentAnswer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, field_validator

from pi_runtime import UserError
from pi_runtime.contract import (
    FULFILLMENT_EXAMPLE,
    FULFILLMENT_INTENTS,
    ContractCheck,
    OutputContract,
    fulfillment_contract,
)

SEED_ANSWER = (
    '{"fulfillment": {"speech": "北京今天晴，气温 18-28 度，东南风 3 级，适合出门。", '
    '"data": {"city": "北京", "weather": "晴", "temp_min": 18, "temp_max": 28}, '
    '"intent": "weather_query", "errors": []}}'
)


def object_schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema in `node` that describes an object (enum/const values are skipped)."""
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield node
        for key, sub in node.items():
            if key in ("properties", "$defs"):
                for child in sub.values():
                    yield from object_schemas(child)
            elif key in ("items", "additionalProperties"):
                yield from object_schemas(sub)
            elif key in ("anyOf", "oneOf", "prefixItems"):
                for child in sub:
                    yield from object_schemas(child)


def assert_strict(schema: dict[str, Any]) -> None:
    objects = list(object_schemas(schema))
    assert objects, "no object schema found: the walk is broken"
    for node in objects:
        assert node["additionalProperties"] is False, node
        assert node["required"] == list(node["properties"]), node


def refs_with_siblings(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "$ref" in node and len(node) > 1:
            found.append(node)
        for sub in node.values():
            found.extend(refs_with_siblings(sub))
    elif isinstance(node, list):
        for sub in node:
            found.extend(refs_with_siblings(sub))
    return found


def seed_with(**changes: Any) -> str:
    answer = copy.deepcopy(FULFILLMENT_EXAMPLE)
    answer["fulfillment"].update(changes)
    return json.dumps(answer, ensure_ascii=False)


# --- models used by the tests --------------------------------------------------------------


class Room(BaseModel):
    room_id: int
    name: str


class Booking(BaseModel):
    room: Room = Field(description="the room booked")
    attendees: list[Room]
    note: str | None = None
    backup: Room | None = None


class Todo(BaseModel):
    title: str
    priority: int

    @field_validator("title")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("title must not be blank")
        return value


class Todos(BaseModel):
    todos: list[Todo]


# --- building contracts: strict schemas ----------------------------------------------------


def test_from_model_closes_every_object_and_requires_every_property() -> None:
    contract = OutputContract.from_model(Booking)

    assert contract.name == "Booking"
    assert contract.strict is True
    assert_strict(contract.schema)
    assert "$defs" in contract.schema  # nested models are kept as definitions, closed too


def test_from_model_optional_field_becomes_required_and_nullable() -> None:
    contract = OutputContract.from_model(Booking)

    assert "note" in contract.schema["required"]
    assert "default" not in contract.schema["properties"]["note"]
    missing = contract.validate(
        '{"room": {"room_id": 1, "name": "A"}, "attendees": [], "backup": null}'
    )
    given_null = contract.validate(
        '{"room": {"room_id": 1, "name": "A"}, "attendees": [], "note": null, "backup": null}'
    )

    assert missing.errors == ("$.note: missing (the contract requires it)",)
    assert given_null.ok
    assert isinstance(given_null.instance, Booking)
    assert given_null.instance.note is None


def test_from_model_inlines_a_reference_that_carries_a_description() -> None:
    """Strict providers refuse `{"$ref": ..., "description": ...}`; the target is inlined."""
    contract = OutputContract.from_model(Booking)

    room = contract.schema["properties"]["room"]
    assert refs_with_siblings(contract.schema) == []
    assert room["description"] == "the room booked"
    assert room["properties"]["room_id"] == {"type": "integer"}
    assert room["additionalProperties"] is False


def test_from_model_drops_titles_and_defaults() -> None:
    text = json.dumps(OutputContract.from_model(Booking).schema)

    assert '"title"' not in text
    assert '"default"' not in text


def test_from_model_field_with_a_non_null_default_is_a_user_error() -> None:
    class WithDefault(BaseModel):
        city: str
        days: int = 3

    with pytest.raises(UserError, match=r"'days'.*optional.*does not accept null.*int \| None"):
        OutputContract.from_model(WithDefault)


def test_from_model_free_form_dict_needs_strict_false() -> None:
    class Loose(BaseModel):
        data: dict[str, Any]

    with pytest.raises(UserError, match=r"#/properties/data is an open object.*strict=False"):
        OutputContract.from_model(Loose)
    contract = OutputContract.from_model(Loose, strict=False)
    assert contract.strict is False
    assert contract.validate('{"data": {"anything": [1, 2]}}').ok
    assert not contract.validate('{"data": {}, "more": 1}').ok  # the root is still closed


def test_from_model_refuses_what_is_not_a_pydantic_model() -> None:
    with pytest.raises(UserError, match="BaseModel subclass"):
        OutputContract.from_model(dict)  # type: ignore[arg-type]


def test_from_model_name_defaults_to_a_provider_safe_class_name() -> None:
    assert OutputContract.from_model(Todos).name == "Todos"
    assert OutputContract.from_model(Todos, name="todo_list").name == "todo_list"


def test_from_schema_closes_open_by_default_objects_and_requires_nullable_optionals() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "title": "City"},
            "date": {"type": ["string", "null"]},
            "hours": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"h": {"type": "integer"}},
                    "required": ["h"],
                },
            },
        },
        "required": ["city", "hours"],
    }

    contract = OutputContract.from_schema(schema, name="forecast")

    assert_strict(contract.schema)
    assert contract.schema["required"] == ["city", "date", "hours"]
    assert "title" not in contract.schema["properties"]["city"]


def test_from_schema_does_not_change_the_callers_schema() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    before = copy.deepcopy(schema)

    OutputContract.from_schema(schema, name="a")

    assert schema == before


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "objekt"}, r"not a valid JSON Schema \(Draft 2020-12\) at #/type"),
        ({"type": "object", "required": "a"}, r"not a valid JSON Schema .* at #/required"),
        ({"type": "array", "items": {"type": "string"}}, r"root .* must be `\"type\": \"object\"`"),
        ({"properties": {"a": {"type": "string"}}}, r"root .* must be"),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": []},
            r"property 'a' at # is optional and does not accept null",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}},
            r"property 'a' at # is optional .* Make it required, or let it be null",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]},
            r"requires 'b' but does not define it",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "https://example.com/a.json"}},
                "required": ["a"],
            },
            r"#/properties/a refers to 'https://example.com/a.json'.*only use local references",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/missing"}},
                "required": ["a"],
            },
            r"refers to '#/\$defs/missing', which the schema does not define",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "object"}}, "required": ["a"]},
            r"#/properties/a is an open object",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"allOf": [{"type": "string"}]}},
                "required": ["a"],
            },
            r"#/properties/a uses 'allOf'.*strict=False",
        ),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
            r"Draft 2020-12; \$schema says",
        ),
        ([{"type": "object"}], r"must be a JSON Schema object, got list"),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/a"}},
                "required": ["a"],
                "$defs": {
                    "a": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "null"}]},
                    "b": {"$ref": "#/$defs/a"},
                },
            },
            r"references loop .* \(#/\$defs/a -> #/\$defs/b -> #/\$defs/a\)",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/a"}},
                "required": ["a"],
                "$defs": {"a": {"$ref": "#/$defs/a", "description": "me"}},
            },
            r"references loop .* \(#/\$defs/a -> #/\$defs/a\)",
        ),
    ],
)
def test_from_schema_refuses_a_schema_that_cannot_be_strict(schema: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        OutputContract.from_schema(schema, name="bad")


def nested_properties(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (nested_properties(400), r"the schema is nested too deeply to check"),
        (
            {
                "type": "object",
                "properties": {"s": {"type": "string", "pattern": "a{99999999999}"}},
                "required": ["s"],
            },
            r"not a valid JSON Schema .*: a regex in it cannot be compiled: the repetition",
        ),
    ],
    ids=["400-deep", "overflowing-pattern"],
)
def test_a_hostile_schema_is_a_user_error_not_a_crash(schema: Any, message: str) -> None:
    with pytest.raises(UserError, match=rf"^contract 'bad': {message}"):
        OutputContract.from_schema(schema, name="bad")


@pytest.mark.parametrize("strict", ["no", "false", 1, None])
def test_strict_must_be_true_or_false(strict: Any) -> None:
    with pytest.raises(
        UserError, match=rf"contract 'x': strict must be True or False, got {strict!r}"
    ):
        OutputContract.from_schema({"type": "object", "properties": {}}, name="x", strict=strict)


def test_from_schema_error_names_the_contract() -> None:
    with pytest.raises(UserError, match=r"^contract 'weather_answer': "):
        OutputContract.from_schema({"type": "string"}, name="weather_answer")


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "点"])
def test_contract_name_must_be_provider_safe(name: str) -> None:
    with pytest.raises(UserError, match="must be 1-64 letters, digits"):
        OutputContract.from_schema({"type": "object", "properties": {}}, name=name)


@pytest.mark.parametrize("max_repairs", [-1, 1.5, True])
def test_max_repairs_must_be_a_non_negative_int(max_repairs: Any) -> None:
    with pytest.raises(UserError, match="max_repairs"):
        OutputContract.from_schema(
            {"type": "object"}, name="x", strict=False, max_repairs=max_repairs
        )


def test_recursive_model_builds_and_validates() -> None:
    class Node(BaseModel):
        label: str
        children: list[Node]

    contract = OutputContract.from_model(Node)

    assert_strict(contract.schema)
    assert contract.validate('{"label": "a", "children": [{"label": "b", "children": []}]}').ok
    assert contract.validate('{"label": "a", "children": [{"label": "b"}]}').errors == (
        "$.children[0].children: missing (the contract requires it)",
    )


def test_rebuilding_a_contract_from_its_own_schema_changes_nothing() -> None:
    """Strictifying is idempotent, so `dataclasses.replace(contract, ...)` is safe."""
    for contract in (OutputContract.from_model(Booking), fulfillment_contract()):
        again = dataclasses.replace(contract, max_repairs=5)

        assert again.schema == contract.schema
        assert again.max_repairs == 5


def test_an_example_that_breaks_the_contract_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"its example does not match it: \$\.todos"):
        OutputContract.from_model(Todos, example={"todos": "none"})


# --- validating answers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def fulfillment() -> OutputContract:
    return fulfillment_contract()


@pytest.mark.parametrize(
    "text",
    [
        SEED_ANSWER,
        f"\n  {SEED_ANSWER}\n\n",
        f"```json\n{SEED_ANSWER}\n```",
        f"```JSON\n{SEED_ANSWER}\n```",
        f"```\n{SEED_ANSWER}\n```",
        f"  ```json {SEED_ANSWER}```  ",
    ],
    ids=["plain", "whitespace", "json-fence", "upper-fence", "bare-fence", "one-line-fence"],
)
def test_fulfillment_accepts_the_seed_answer(fulfillment: OutputContract, text: str) -> None:
    check = fulfillment.validate(text)

    assert check.ok, check.errors
    assert check.value == FULFILLMENT_EXAMPLE
    assert check.instance is None  # a schema contract has no pydantic model


def test_fulfillment_rejects_an_intent_outside_the_enum(fulfillment: OutputContract) -> None:
    check = fulfillment.validate(seed_with(intent="weather_inquiry"))

    assert not check.ok
    assert check.value is None
    assert len(check.errors) == 1
    assert check.errors[0].startswith("$.fulfillment.intent: 'weather_inquiry' is not one of")


def test_extra_property_is_reported_at_its_own_path(fulfillment: OutputContract) -> None:
    answer = json.loads(SEED_ANSWER)
    answer["fulfillment"]["confidence"] = 0.9
    answer["note"] = "x"

    check = fulfillment.validate(json.dumps(answer))

    assert check.errors == (
        "$.fulfillment.confidence: not allowed (the contract has no such property)",
        "$.note: not allowed (the contract has no such property)",
    )


def test_missing_fields_are_reported_at_their_paths(fulfillment: OutputContract) -> None:
    check = fulfillment.validate('{"fulfillment": {"speech": "hi", "data": {}}}')

    assert check.errors == (
        "$.fulfillment.errors: missing (the contract requires it)",
        "$.fulfillment.intent: missing (the contract requires it)",
    )


def test_wrong_types_name_the_nested_path(fulfillment: OutputContract) -> None:
    check = fulfillment.validate(seed_with(errors=["ok", 3], speech=None))

    assert check.errors == (
        "$.fulfillment.errors[1]: 3 is not of type 'string'",
        "$.fulfillment.speech: None is not of type 'string'",
    )


def test_free_form_data_still_accepts_any_object_but_not_other_values(
    fulfillment: OutputContract,
) -> None:
    assert fulfillment.validate(seed_with(data={"rooms": [{"id": 1}], "n": None})).ok
    assert fulfillment.validate(seed_with(data=[1])).errors == (
        "$.fulfillment.data: [1] is not of type 'object'",
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "$: the answer is empty; expected a JSON object"),
        ("```json\n\n```", "$: the answer is empty; expected a JSON object"),
        (
            "北京今天晴。",
            "$: the answer is not valid JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        (SEED_ANSWER + "\n希望对你有帮助！", "$: text after the JSON object: '希望对你有帮助！'"),
        ("好的，结果如下：" + SEED_ANSWER, "$: text before the JSON object: '好的，结果如下：'"),
        (f"Here it is:\n```json\n{SEED_ANSWER}\n```", "$: text before the JSON object"),
        (f"```python\n{SEED_ANSWER}\n```", "$: text before the JSON object: '```python'"),
        ('{"fulfillment": {"speech": "cut', "$: the answer is not valid JSON: Unterminated string"),
        ("[1, 2]", "$: expected a JSON object, got an array"),
        ('"just text"', "$: expected a JSON object, got a string"),
        ('{"a": NaN}', "$: the answer is not valid JSON: NaN is not JSON"),
        ('{"a": 1, "a": 2}', "$: the answer is not valid JSON: duplicate key 'a'"),
        ('{"a": "\\ud800"}', "$: the answer holds an unpaired UTF-16 surrogate"),
        ('{"a": "\ud800"}', "$: the answer holds an unpaired UTF-16 surrogate"),
        ("[" * 100_000, "$: the answer is nested deeper than 64 levels"),
        ('{"a": ' * 70 + "1" + "}" * 70, "$: the answer is nested deeper than 64 levels"),
        ('{"a": ' + "9" * 5000 + "}", "$: the answer is not valid JSON: Exceeds the limit"),
    ],
    ids=[
        "empty",
        "empty-fence",
        "prose",
        "trailing-prose",
        "leading-prose",
        "prose-then-fence",
        "other-language-fence",
        "cut-off",
        "array",
        "string",
        "nan",
        "duplicate-key",
        "escaped-lone-surrogate",
        "raw-lone-surrogate",
        "deep-brackets",
        "deep-objects",
        "huge-integer",
    ],
)
def test_answers_that_are_not_one_json_object_are_refused_at_the_root(
    fulfillment: OutputContract, text: str, error: str
) -> None:
    check = fulfillment.validate(text)

    assert not check.ok
    assert len(check.errors) == 1
    assert check.errors[0].startswith(error), check.errors


def test_an_enormous_value_is_quoted_short(fulfillment: OutputContract) -> None:
    check = fulfillment.validate(seed_with(intent="x" * 100_000))

    assert len(check.errors) == 1
    assert check.errors[0].startswith("$.fulfillment.intent: 'xxx")
    assert len(check.errors[0]) < 400


def test_many_errors_are_capped_with_a_count() -> None:
    contract = OutputContract.from_schema(
        {
            "type": "object",
            "properties": {"xs": {"type": "array", "items": {"type": "integer"}}},
            "required": ["xs"],
        },
        name="ints",
    )

    check = contract.validate(json.dumps({"xs": ["a"] * 50}))

    assert len(check.errors) == 21
    assert check.errors[-1] == "... and 30 more errors"


def test_keys_that_are_not_identifiers_are_quoted_in_paths() -> None:
    contract = OutputContract.from_schema(
        {
            "type": "object",
            "properties": {"温度 max": {"type": "integer"}},
            "required": ["温度 max"],
        },
        name="t",
    )

    assert contract.validate('{"温度 max": "hot"}').errors == (
        "$[\"温度 max\"]: 'hot' is not of type 'integer'",
    )


def test_declared_formats_are_checked() -> None:
    contract = OutputContract.from_schema(
        {
            "type": "object",
            "properties": {"day": {"type": "string", "format": "date"}},
            "required": ["day"],
        },
        name="d",
    )

    assert contract.validate('{"day": "2025-04-18"}').ok
    assert contract.validate('{"day": "明天"}').errors == ("$.day: '明天' is not a 'date'",)


def test_pydantic_validators_run_for_model_contracts() -> None:
    contract = OutputContract.from_model(Todos)

    blank = contract.validate(
        '{"todos": [{"title": "buy milk", "priority": 1}, {"title": " ", "priority": 2}]}'
    )
    good = contract.validate('{"todos": [{"title": "buy milk", "priority": 1}]}')

    assert blank.errors == ("$.todos[1].title: Value error, title must not be blank",)
    assert good.ok
    assert isinstance(good.instance, Todos)
    assert good.instance.todos[0].title == "buy milk"
    assert good.value == {"todos": [{"title": "buy milk", "priority": 1}]}


def test_schema_errors_come_before_pydantic_runs() -> None:
    """The schema is the contract the provider saw; pydantic only adds to it."""
    contract = OutputContract.from_model(Todos)

    check = contract.validate('{"todos": [{"title": " ", "priority": "high"}]}')

    assert check.errors == ("$.todos[0].priority: 'high' is not of type 'integer'",)


def test_validate_refuses_what_is_not_text(fulfillment: OutputContract) -> None:
    with pytest.raises(UserError, match="validate needs the answer text, got dict"):
        fulfillment.validate(FULFILLMENT_EXAMPLE)  # type: ignore[arg-type]


# --- repair and instructions ---------------------------------------------------------------


def test_repair_message_lists_every_error_and_the_json_only_rule(
    fulfillment: OutputContract,
) -> None:
    check = fulfillment.validate(seed_with(intent="weather_inquiry", extra=1))

    message = fulfillment.repair_message(check)

    assert len(check.errors) == 2
    for error in check.errors:
        assert f"- {error}" in message
    assert "'fulfillment'" in message
    assert "only the JSON object" in message
    assert len(message) < 600


def test_repair_message_of_a_passing_answer_is_a_user_error(fulfillment: OutputContract) -> None:
    with pytest.raises(UserError, match="nothing to repair"):
        fulfillment.repair_message(fulfillment.validate(SEED_ANSWER))


def test_instructions_carry_the_schema_and_the_example_byte_stably(
    fulfillment: OutputContract,
) -> None:
    text = fulfillment.instructions()

    assert json.dumps(fulfillment.schema, ensure_ascii=False, separators=(",", ":")) in text
    assert "北京今天晴" in text  # the seed's example, shown to the model
    assert "only the JSON object" in text
    assert fulfillment_contract().instructions() == text


# --- the fulfillment contract --------------------------------------------------------------


def test_fulfillment_contract_is_closed_everywhere_but_data(fulfillment: OutputContract) -> None:
    outer = fulfillment.schema
    inner = outer["properties"]["fulfillment"]

    assert fulfillment.name == "fulfillment"
    assert fulfillment.strict is False  # free-form `data` cannot be enforced while decoding
    assert fulfillment.max_repairs == 2
    assert outer["additionalProperties"] is False and outer["required"] == ["fulfillment"]
    assert inner["additionalProperties"] is False
    assert inner["required"] == ["speech", "data", "intent", "errors"]
    assert inner["properties"]["intent"]["enum"] == list(FULFILLMENT_INTENTS)
    assert inner["properties"]["data"]["additionalProperties"] is True


def test_fulfillment_with_a_data_schema_is_fully_strict() -> None:
    weather = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "weather": {"type": "string"},
            "temp_min": {"type": "integer"},
            "temp_max": {"type": "integer"},
        },
        "required": ["city", "weather", "temp_min", "temp_max"],
    }

    contract = fulfillment_contract(data_schema=weather, max_repairs=1)

    assert contract.strict is True
    assert contract.max_repairs == 1
    assert_strict(contract.schema)
    assert contract.validate(SEED_ANSWER).ok
    assert contract.validate(seed_with(data={"city": "北京"})).errors[0] == (
        "$.fulfillment.data.temp_max: missing (the contract requires it)"
    )


def test_fulfillment_refuses_a_data_schema_that_is_not_an_object() -> None:
    with pytest.raises(UserError, match="data_schema must be a JSON Schema object"):
        fulfillment_contract(data_schema="object")  # type: ignore[arg-type]


def test_pydantic_fulfillment_example_matches_the_schema_contract() -> None:
    contract = OutputContract.from_model(
        FulfillmentAnswer, name="fulfillment", strict=False, example=FULFILLMENT_EXAMPLE
    )

    good = contract.validate(SEED_ANSWER)
    bad_intent = contract.validate(seed_with(intent="weather_inquiry"))

    assert good.ok
    assert isinstance(good.instance, FulfillmentAnswer)
    assert good.instance.fulfillment.data["temp_max"] == 28
    assert bad_intent.errors[0].startswith("$.fulfillment.intent: 'weather_inquiry' is not one of")


def test_pydantic_fulfillment_refuses_speech_copied_into_data() -> None:
    """Seed 002 §4.3: models copy the whole reply into `data`; the model's validator catches it."""
    contract = OutputContract.from_model(FulfillmentAnswer, name="fulfillment", strict=False)
    speech = FULFILLMENT_EXAMPLE["fulfillment"]["speech"]

    check = contract.validate(seed_with(data={"answer": speech}))

    assert check.errors == (
        "$.fulfillment: Value error, data repeats speech; put structured values in data",
    )


# --- properties ----------------------------------------------------------------------------

_MODEL_CONTRACT = OutputContract.from_model(Todos)
_FULFILLMENT = fulfillment_contract()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def _assert_well_formed(check: ContractCheck) -> None:
    assert check.ok == (check.value is not None)
    assert all(e.startswith("$") for e in check.errors)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.text(max_size=200))
def test_validate_never_raises_on_arbitrary_text(text: str) -> None:
    for contract in (_FULFILLMENT, _MODEL_CONTRACT):
        _assert_well_formed(contract.validate(text))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    json_values,
    st.sampled_from(["", " ", "```json\n", "```", "ok: "]),
    st.sampled_from(["", "\n", "\n```", "```", " thanks"]),
)
def test_validate_never_raises_on_json_like_answers(value: Any, before: str, after: str) -> None:
    text = before + json.dumps(value, ensure_ascii=False) + after
    for contract in (_FULFILLMENT, _MODEL_CONTRACT):
        _assert_well_formed(contract.validate(text))


@settings(max_examples=100, deadline=None)
@given(
    st.text(min_size=1, max_size=40).filter(str.strip),
    st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    st.sampled_from(FULFILLMENT_INTENTS),
    st.lists(st.text(max_size=10), max_size=3),
)
def test_every_well_typed_fulfillment_is_accepted(
    speech: str, data: dict[str, Any], intent: str, errors: list[str]
) -> None:
    answer = {"fulfillment": {"speech": speech, "data": data, "intent": intent, "errors": errors}}

    check = _FULFILLMENT.validate(json.dumps(answer, ensure_ascii=False))

    assert check.ok, check.errors
    assert check.value == answer


_leaf_schemas = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer", "title": "N", "default": 1},
        {"type": "null"},
        {"type": ["string", "null"]},
        {"enum": ["x", None]},
        {"$ref": "#/$defs/a"},
        {"$ref": "#/$defs/a", "description": "see a"},
        {"$ref": "#/$defs/missing"},
        {"type": "object"},
        {"allOf": [{"type": "string"}]},
        True,
    ]
)


def _object(properties: dict[str, Any], required: str, extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object", "properties": properties}
    names = list(properties)
    if required != "absent":
        node["required"] = {"all": names, "none": [], "first": names[:1], "unknown": ["zz"]}[
            required
        ]
    if extra != "absent":
        node["additionalProperties"] = extra
    return node


_object_parts = (
    st.dictionaries(st.sampled_from(["a", "b", "c d"]), st.none(), max_size=3),
    st.sampled_from(["all", "none", "first", "unknown", "absent"]),
    st.sampled_from(["absent", False, True, {"type": "string"}]),
)
contract_like_schemas = st.recursive(
    _leaf_schemas,
    lambda children: (
        st.builds(
            _object,
            st.dictionaries(st.sampled_from(["a", "b", "c d"]), children, max_size=3),
            _object_parts[1],
            _object_parts[2],
        )
        | st.builds(lambda xs: {"anyOf": xs}, st.lists(children, min_size=1, max_size=2))
        | st.builds(lambda x: {"type": "array", "items": x}, children)
    ),
    max_leaves=8,
)
root_schemas = st.builds(
    lambda root, definition: {**root, "$defs": {"a": definition}},
    st.builds(
        _object,
        st.dictionaries(st.sampled_from(["a", "b", "c d"]), contract_like_schemas, max_size=3),
        _object_parts[1],
        _object_parts[2],
    ),
    contract_like_schemas,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    root_schemas,
    st.booleans(),
    st.dictionaries(st.sampled_from(["a", "b", "c d"]), json_values, max_size=3),
)
def test_any_schema_builds_a_sound_contract_or_is_a_user_error(
    schema: dict[str, Any], strict: bool, answer: dict[str, Any]
) -> None:
    try:
        contract = OutputContract.from_schema(schema, name="any", strict=strict)
    except UserError:
        return
    assert contract.schema["type"] == "object"
    assert refs_with_siblings(contract.schema) == []
    assert "title" not in contract.schema and "default" not in json.dumps(contract.schema)
    if strict:
        assert_strict(contract.schema)
    _assert_well_formed(contract.validate(json.dumps(answer)))


def test_a_pattern_is_checked_in_linear_time_against_the_models_answer() -> None:
    # The answer is the model's text: against `^(a+)+$`, Python's backtracking `re`
    # takes time doubling with each `a` (28 held a loop for seconds; 5,000 never end).
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^(a+)+$"},
            "tags": {"type": "object", "patternProperties": {"^(b+)+$": {"type": "integer"}}},
        },
        "required": ["code", "tags"],
    }
    contract = OutputContract.from_schema(schema, name="codes", strict=False)
    hostile = {"code": "a" * 5000 + "!", "tags": {"b" * 5000 + "!": 1, "bb": "x"}}

    check = contract.validate(json.dumps(hostile))

    assert not check.ok
    assert any("does not match" in error for error in check.errors)
    assert any("'x' is not of type 'integer'" in error for error in check.errors)
    assert contract.validate(json.dumps({"code": "aaa", "tags": {"bbb": 2}})).ok
