"""`@tool`: a Python function becomes a strict, model-facing tool spec.

The schema is what the model reads and what the gate checks arguments against, so it
must say exactly what the function accepts: types from hints, words from the docstring,
no extra keys anywhere, and nothing the runtime fills in itself.
"""

from __future__ import annotations

import asyncio
import json
import typing
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

import pi_runtime
from pi_runtime import ToolCall, ToolSpec, UserError, tool
from pi_runtime.tools import IDEMPOTENCY_PARAM, Gate


class Line(BaseModel):
    sku: str
    qty: int


class Dimensions(BaseModel):
    width_cm: float
    height_cm: float


class Parcel(BaseModel):
    label: str
    size: Dimensions
    lines: list[Line]


class Address(TypedDict):
    street: str
    city: str


class _TypingPoint(typing.TypedDict):
    x: int


class _Opaque:
    """A plain class pydantic cannot describe as JSON."""


def object_nodes(schema: Any, path: str = "#") -> dict[str, dict[str, Any]]:
    """Every object-typed sub-schema of `schema`, keyed by where it sits."""
    found: dict[str, dict[str, Any]] = {}
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            found[path] = schema
        for key, value in schema.items():
            found.update(object_nodes(value, f"{path}/{key}"))
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found.update(object_nodes(value, f"{path}/{i}"))
    return found


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    assert ref.startswith("#/$defs/"), ref
    return schema["$defs"][ref.removeprefix("#/$defs/")]


# --- schema from type hints -------------------------------------------------------------


def test_parameter_types_come_from_type_hints() -> None:
    @tool
    def convert(
        amount: float,
        count: int,
        currency: str,
        rounded: bool,
        tags: list[str],
        unit: Literal["c", "f"],
        note: str | None = None,
    ) -> str:
        return ""

    props = convert.parameters["properties"]
    assert props["amount"]["type"] == "number"
    assert props["count"]["type"] == "integer"
    assert props["currency"]["type"] == "string"
    assert props["rounded"]["type"] == "boolean"
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["unit"]["enum"] == ["c", "f"]
    assert {"type": "null"} in props["note"]["anyOf"]
    assert convert.parameters["type"] == "object"


def test_schema_has_no_titles_for_the_model_to_read() -> None:
    @tool
    def ship(parcel: Parcel) -> str:
        return ""

    assert "title" not in json.dumps(ship.parameters)


def test_required_lists_exactly_the_parameters_without_defaults() -> None:
    @tool
    def search(query: str, limit: int = 10, exact: bool = False, scope: str | None = None) -> str:
        return ""

    schema = search.parameters
    assert schema["required"] == ["query"]
    assert set(schema["properties"]) == {"query", "limit", "exact", "scope"}
    assert schema["properties"]["limit"]["default"] == 10
    assert schema["properties"]["exact"]["default"] is False


def test_tool_with_no_parameters_has_an_empty_closed_object_schema() -> None:
    @tool
    def now() -> str:
        """The current time."""
        return ""

    assert now.parameters["type"] == "object"
    assert now.parameters["properties"] == {}
    assert now.parameters["additionalProperties"] is False
    assert now.parameters.get("required", []) == []


def test_arguments_are_converted_to_the_functions_python_types() -> None:
    @tool
    def ship(parcel: Parcel, copies: int = 1) -> str:
        return ""

    kwargs = ship.validate_python(
        {"parcel": {"label": "a", "size": {"width_cm": 1, "height_cm": 2}, "lines": []}}
    )
    assert isinstance(kwargs["parcel"], Parcel)
    assert isinstance(kwargs["parcel"].size, Dimensions)
    assert kwargs["copies"] == 1


# --- docstrings -------------------------------------------------------------------------


def test_google_docstring_gives_description_and_argument_descriptions() -> None:
    @tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c", days: int = 1) -> str:
        """Current weather and forecast for a city.

        Args:
            city: city name in the user's language,
                for example 北京 or Paris.
            unit (str): temperature unit.
            days: how many days of forecast.

        Returns:
            A short forecast text.

        Raises:
            LookupError: unknown city.
        """
        return ""

    assert get_weather.description == "Current weather and forecast for a city."
    props = get_weather.parameters["properties"]
    assert props["city"]["description"] == (
        "city name in the user's language, for example 北京 or Paris."
    )
    assert props["unit"]["description"] == "temperature unit."
    assert props["days"]["description"] == "how many days of forecast."
    # Sections after Args are not descriptions of anything the model sends.
    assert "Returns" not in get_weather.description
    assert "unknown city" not in json.dumps(get_weather.parameters)


def test_argument_description_lands_on_nested_model_parameters() -> None:
    @tool
    def ship(parcel: Parcel) -> str:
        """Ship a parcel.

        Args:
            parcel: what to ship and how big it is.
        """
        return ""

    assert ship.parameters["properties"]["parcel"]["description"] == (
        "what to ship and how big it is."
    )


def test_explicit_description_overrides_the_docstring() -> None:
    @tool(description="Look a word up in the dictionary.")
    def lookup(word: str) -> str:
        """Something else entirely."""
        return ""

    assert lookup.description == "Look a word up in the dictionary."


def test_function_without_docstring_is_described_by_its_name() -> None:
    @tool
    def list_orders(customer_id: str) -> str:
        return ""

    assert list_orders.description == "list_orders"
    assert "description" not in list_orders.parameters["properties"]["customer_id"]


def test_definition_is_what_the_model_is_offered() -> None:
    @tool(name="weather.get")
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return ""

    definition = get_weather.definition
    assert definition.name == "weather.get"
    assert definition.description == "Weather for a city."
    assert definition.parameters == get_weather.parameters


# --- strictness -------------------------------------------------------------------------


def test_schema_is_closed_at_every_object_level() -> None:
    @tool
    def ship(parcel: Parcel, to: Address, extra_lines: list[Line] | None = None) -> str:
        return ""

    schema = ship.parameters
    nodes = object_nodes(schema)
    # The walk must really reach the nested levels, or the check below proves nothing.
    assert {"#", "#/$defs/Parcel", "#/$defs/Dimensions", "#/$defs/Line", "#/$defs/Address"} <= (
        set(nodes)
    )
    open_nodes = [
        path for path, node in nodes.items() if node.get("additionalProperties") is not False
    ]
    assert open_nodes == []


def test_nested_models_refuse_unknown_keys_in_the_schema() -> None:
    @tool
    def ship(parcel: Parcel, to: Address) -> str:
        return ""

    parcel = resolve(ship.parameters, ship.parameters["properties"]["parcel"])
    size = resolve(ship.parameters, parcel["properties"]["size"])
    address = resolve(ship.parameters, ship.parameters["properties"]["to"])
    assert parcel["additionalProperties"] is False
    assert size["additionalProperties"] is False
    assert address["additionalProperties"] is False


def test_top_level_arguments_model_forbids_extra_keys() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValidationError):
        add.validate_python({"a": 1, "b": 2, "c": 3})


def test_a_mapping_parameter_keeps_its_value_schema() -> None:
    # dict[str, int] is an object whose extra keys ARE the data: closing it would make
    # the parameter unusable.
    @tool
    def set_stock(levels: dict[str, int]) -> str:
        return ""

    assert set_stock.parameters["properties"]["levels"]["additionalProperties"] == {
        "type": "integer"
    }


# --- idempotency key --------------------------------------------------------------------


def test_idempotency_key_parameter_is_hidden_from_the_model() -> None:
    @tool(idempotent=False)
    def send_email(to: str, body: str, idempotency_key: str | None = None) -> str:
        return ""

    assert IDEMPOTENCY_PARAM == "idempotency_key"
    assert "idempotency_key" not in send_email.parameters["properties"]
    assert "idempotency_key" not in send_email.parameters.get("required", [])
    assert send_email.parameters["required"] == ["to", "body"]
    assert send_email.takes_idempotency_key is True
    assert "idempotency_key" not in send_email.arguments_model.model_fields


def test_idempotency_key_parameter_needs_no_type_hint() -> None:
    @tool(idempotent=False)
    def charge(amount_cents: int, idempotency_key=None) -> str:  # type: ignore[no-untyped-def]
        return ""

    assert charge.takes_idempotency_key is True
    assert list(charge.parameters["properties"]) == ["amount_cents"]


def test_tool_without_idempotency_key_parameter_does_not_take_one() -> None:
    @tool
    def read(path: str) -> str:
        return ""

    assert read.takes_idempotency_key is False


# --- decorator forms and options --------------------------------------------------------


def test_bare_decorator_makes_a_spec_with_default_options() -> None:
    @tool
    def ping(host: str) -> str:
        return host

    assert isinstance(ping, ToolSpec)
    assert ping.name == "ping"
    assert ping.idempotent is True
    assert ping.max_arg_bytes == 64_000
    assert ping.timeout_s == 60.0
    assert ping.retries == 2
    assert ping.max_result_bytes == 16_000


def test_decorator_options_are_stored_on_the_spec() -> None:
    @tool(
        name="orders.create",
        idempotent=False,
        max_arg_bytes=2_048,
        timeout_s=5,
        retries=0,
        max_result_bytes=512,
    )
    def create_order(sku: str, qty: int) -> str:
        return ""

    assert create_order.name == "orders.create"
    assert create_order.idempotent is False
    assert create_order.max_arg_bytes == 2_048
    assert create_order.timeout_s == 5
    assert create_order.retries == 0
    assert create_order.max_result_bytes == 512


def test_decorator_with_empty_parentheses_equals_bare_decorator() -> None:
    @tool()
    def ping(host: str) -> str:
        return host

    @tool
    def ping2(host: str) -> str:
        return host

    assert ping.parameters == ping2.parameters
    assert (ping.idempotent, ping.timeout_s, ping.retries) == (True, 60.0, 2)


def test_timeout_can_be_disabled() -> None:
    @tool(timeout_s=None)
    def slow(x: int) -> int:
        return x

    assert slow.timeout_s is None


def test_tool_can_be_applied_as_a_plain_call() -> None:
    def double(x: int) -> int:
        return 2 * x

    spec = tool(double)
    assert spec.function is double
    assert spec.function(x=4) == 8


def test_async_function_is_detected() -> None:
    @tool
    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        return url

    @tool
    def fetch_sync(url: str) -> str:
        return url

    assert fetch.is_async is True
    assert fetch_sync.is_async is False
    assert asyncio.run(fetch.function(url="u")) == "u"


def test_tool_and_tool_spec_are_public() -> None:
    assert pi_runtime.tool is tool
    assert pi_runtime.ToolSpec is ToolSpec
    assert issubclass(UserError, pi_runtime.PiError)


# --- misuse is a UserError --------------------------------------------------------------


def test_parameter_without_type_hint_is_a_user_error() -> None:
    def lookup(word, lang: str = "en") -> str:  # type: ignore[no-untyped-def]
        return ""

    with pytest.raises(UserError, match=r"'word'.*type hint"):
        tool(lookup)


def test_var_positional_parameter_is_a_user_error() -> None:
    def total(*numbers: int) -> int:
        return sum(numbers)

    with pytest.raises(UserError, match=r"\*args"):
        tool(total)


def test_var_keyword_parameter_is_a_user_error() -> None:
    def configure(**options: str) -> str:
        return ""

    with pytest.raises(UserError, match=r"\*\*kwargs"):
        tool(configure)


@pytest.mark.parametrize(
    "bad_name",
    ["has space", "9lives", "x" * 65, "semi;colon", "名字", "slash/name"],
)
def test_bad_tool_name_is_a_user_error(bad_name: str) -> None:
    def f(x: int) -> int:
        return x

    with pytest.raises(UserError, match="tool name"):
        tool(name=bad_name)(f)


@pytest.mark.parametrize("good_name", ["a", "get_weather", "weather.get", "x-y", "_p", "x" * 64])
def test_good_tool_names_are_accepted(good_name: str) -> None:
    def f(x: int) -> int:
        return x

    assert tool(name=good_name)(f).name == good_name


def test_lambda_without_a_name_is_a_user_error() -> None:
    with pytest.raises(UserError, match="<lambda>"):
        tool(lambda: 1)


@pytest.mark.parametrize(
    "options",
    [
        {"max_arg_bytes": 0},
        {"max_arg_bytes": -1},
        {"max_result_bytes": 0},
        {"max_result_bytes": -100},
        {"retries": -1},
        {"timeout_s": 0},
        {"timeout_s": -0.5},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_non_positive_sizes_and_negative_retries_are_user_errors(options: dict[str, Any]) -> None:
    def f(x: int) -> int:
        return x

    with pytest.raises(UserError, match="'f'") as info:
        tool(**options)(f)
    option = next(iter(options))
    assert option in str(info.value)


def test_unresolvable_type_hint_is_a_user_error() -> None:
    def f(x: NoSuchType) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 0

    with pytest.raises(UserError, match="type hints"):
        tool(f)


def test_type_without_a_json_schema_is_a_user_error() -> None:
    def f(x: _Opaque) -> int:
        return 0

    with pytest.raises(UserError, match="JSON Schema"):
        tool(f)


def test_typing_typed_dict_on_old_python_is_a_user_error_not_a_crash() -> None:
    # pydantic refuses typing.TypedDict before 3.12; the user must hear it as misuse.
    def f(p: _TypingPoint) -> int:
        return 0

    try:
        spec = tool(f)
    except UserError as exc:
        assert "'f'" in str(exc)
        assert "TypedDict" in str(exc)
    else:
        assert (
            resolve(spec.parameters, spec.parameters["properties"]["p"])["additionalProperties"]
            is False
        )


def test_non_callable_is_a_user_error() -> None:
    with pytest.raises(UserError, match="function"):
        tool(42)  # type: ignore[call-overload]


def test_positional_only_parameters_are_refused_or_callable_by_the_gate() -> None:
    # The gate calls tools with keyword arguments. A positional-only parameter must
    # either be refused at definition or still be passed correctly; blaming the model
    # with `invalid_arguments` for a schema-valid call is wrong.
    def square(x: int, /) -> int:
        return x * x

    try:
        spec = tool(square)
    except UserError:
        return
    gate = Gate([spec], session_id="s")
    outcome = asyncio.run(gate.run(ToolCall(id="c1", name="square", raw='{"x": 3}')))
    assert not outcome.is_error, outcome.message.content
    assert outcome.message.content == "9"


@dataclass
class _Point:
    x: int
    y: int


def test_dataclass_parameter_is_closed_and_described() -> None:
    @tool
    def plot(p: _Point) -> str:
        """Plot a point.

        Args:
            p: where.
        """
        return ""

    point = resolve(plot.parameters, plot.parameters["properties"]["p"])
    assert point["additionalProperties"] is False
    assert set(point["required"]) == {"x", "y"}
