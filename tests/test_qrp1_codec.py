"""QRP1 gives back exactly what was encoded, and refuses what it cannot read.

"Exactly" is stricter than `==`: in Python `1 == 1.0 == True` and `0.0 == -0.0`, so
round trips are compared with `assert_same`, which also checks types and float spelling.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_runtime.qrp1 import (
    PageInfo,
    QRPDecodeError,
    QRPEncodeError,
    choose_kind,
    decode,
    encode,
    parse,
)
from pi_runtime.qrp1.escape import json_text
from pi_runtime.qrp1.timefmt import TimeFormat, from_ms

# ---------------------------------------------------------------- helpers


def assert_same(got: Any, want: Any, path: str = "$") -> None:
    """Equal values of the same JSON types; floats compared by repr (so -0.0 != 0.0)."""
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, float):
        assert float.__repr__(got) == float.__repr__(want), path
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), path
        for key in want:
            assert_same(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{path}[{index}]")
    else:
        assert got == want, path


def round_trip(value: Any, **kwargs: Any) -> str:
    text = encode(value, **kwargs)
    assert_same(decode(text), value)
    return text


def json_bound(value: Any, kind: str) -> int:
    """Bytes of the compact-JSON document: what an encoding may never exceed."""
    return len(f"QRP1|{kind}|body=json\n{json_text(value)}".encode())


# ---------------------------------------------------------------- strategies

SPECIAL_CHARS = [",", "|", "\\", '"', "\n", "\r", "=", ":", "#", "[", "{", " ", "\t", "\x00",
                 "\x1f", "\x7f", "\x85", "\u2028", "\u2029", "\ud800", "\udfff", "é", "中",
                 "🙂"]  # fmt: skip
TRICKY_STRINGS = ["", " ", "null", "true", "false", "0", "-0", "1", "1.0", "1e5", "01", " 1",
                  "1 ", '""', '"', '"a"', "#3 a:int", "[1]", "{}", "NaN", "Infinity", "-",
                  "\\", "a\\,b", "x=1", "QRP1|table", "\n", "\r\n", "\\u0041", "\\n"]  # fmt: skip

chars = st.one_of(st.characters(), st.sampled_from(SPECIAL_CHARS))


def as_json_reads(text: str) -> str:
    """The string json.loads would give: it joins a high and a low surrogate into one."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


hostile_text = st.one_of(
    st.text(chars, max_size=12),
    st.lists(st.one_of(chars, st.sampled_from(TRICKY_STRINGS)), max_size=6).map("".join),
).map(as_json_reads)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 0.1, 100.0]),
)
ints = st.one_of(
    st.integers(),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**100, -(10**300)]),
)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, hostile_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)
    ),
    max_leaves=12,
)
COLUMN_VALUES = [
    st.one_of(st.none(), ints),
    st.one_of(st.none(), floats),
    st.one_of(ints, floats),
    st.one_of(st.none(), st.booleans()),
    st.one_of(st.none(), hostile_text),
    json_values,
    st.just("constant"),
    st.just(None),
]


@st.composite
def tables(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Lists of same-shaped objects with typed, mixed and constant columns."""
    keys = draw(st.lists(hostile_text, max_size=5, unique=True))
    kinds = [draw(st.sampled_from(COLUMN_VALUES)) for _ in keys]
    count = draw(st.integers(0, 6))
    return [{k: draw(v) for k, v in zip(keys, kinds, strict=True)} for _ in range(count)]


@st.composite
def series_rows(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int | None]:
    """Rows with a time field (ISO seconds, ISO ms or epoch ms), regular or not."""
    fmt: TimeFormat = draw(st.sampled_from(["iso", "iso_ms", "ms"]))
    unit = 1000 if fmt == "iso" else 1
    start = draw(st.integers(0, 4_000_000_000)) * unit
    count = draw(st.integers(1, 6))
    regular = draw(st.booleans())
    step = draw(st.integers(1, 10**6)) * unit
    if regular:
        times = [start + k * step for k in range(count)]
    else:
        times = [start + draw(st.integers(-(10**9), 10**9)) * unit for _ in range(count)]
    other = draw(st.sampled_from(COLUMN_VALUES))
    rows = []
    for t in times:
        when: Any = t
        if fmt != "ms":
            when = from_ms(t, fmt)
        rows.append({"time": when, "v": draw(other), "tag": "k"})
    steps = {b - a for a, b in itertools.pairwise(times)}
    fixed = len(steps) == 1 and min(steps) > 0
    return rows, (steps.pop() if fixed else None)


# ---------------------------------------------------------------- round trips


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_value_round_trips_with_the_chosen_kind(value: Any) -> None:
    text = round_trip(value)
    assert len(text.encode()) <= json_bound(value, choose_kind(value))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_same_shaped_objects_round_trip_as_a_table(rows: list[dict[str, Any]]) -> None:
    text = round_trip(rows, kind="table")
    assert len(text.encode()) <= json_bound(rows, "table")
    columnar = encode(rows, kind="table", fallback=False)
    header = parse(columnar).header
    assert header.rows == len(rows) and header.body is None
    assert_same(decode(columnar), rows)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(hostile_text, json_values, max_size=6))
def test_objects_round_trip_as_record_and_receipt(value: dict[str, Any]) -> None:
    round_trip(value, kind="record")
    round_trip(value, kind="receipt")
    assert_same(decode(encode(value, kind="record", fallback=False)), value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(hostile_text, tables(), max_size=3))
def test_records_holding_tables_round_trip(value: dict[str, Any]) -> None:
    assert_same(decode(encode(value, kind="record", fallback=False)), value)


@settings(max_examples=300, deadline=None)
@given(st.text(chars, max_size=40))
def test_any_string_round_trips_as_text(value: str) -> None:
    text = round_trip(value, kind="text")
    assert_same(decode(text + "\n"), value)  # a trailing line break added on the way


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(series_rows())
def test_series_round_trip_regular_or_not(drawn: tuple[list[dict[str, Any]], int | None]) -> None:
    rows, step = drawn
    text = encode(rows, kind="series", fallback=False)
    header = parse(text).header
    assert (header.step_ms is not None) == (step is not None)
    assert_same(decode(text), rows)
    round_trip(rows, kind="series")


def test_pages_of_a_regular_series_share_t0_and_drop_the_time_column() -> None:
    rows = [
        {"time": f"2026-09-08T{h:02d}:00:00Z", "o": 100.0 + h, "closed": True} for h in range(6)
    ]
    pages = [
        encode(
            rows[i : i + 2],
            kind="series",
            t0=rows[0]["time"],
            step_ms=3_600_000,
            page=PageInfo(number=i // 2 + 1, count=3, offset=i, total=6, next=f"c{i}"),
        )
        for i in range(0, 6, 2)
    ]
    headers = [parse(p).header for p in pages]
    assert {h.t0 for h in headers} == {"2026-09-08T00:00:00Z"}
    assert [h.offset for h in headers] == [0, 2, 4]
    header, *body = pages[1].split("\n")
    assert body == ["102", "103"], "no time column, and closed is in the header"
    assert header.endswith("|step_ms=3600000|cols=time:dt_ms,o:f64,closed:bool=true|next=c2")
    assert [r for p in pages for r in decode(p)] == rows


def test_a_cut_short_page_with_an_irregular_step_keeps_dt_ms_from_t0() -> None:
    rows = [{"ts": 1_000, "v": 1}, {"ts": 4_000, "v": 2}, {"ts": 4_500, "v": 3}]
    text = encode(rows[1:], kind="series", t0=0, time_key="ts", fallback=False)
    assert text.split("\n")[1:] == ["4000,2", "4500,3"]
    assert decode(text) == rows[1:]


def test_exact_numbers_keep_their_types() -> None:
    value = {"i": 1, "f": 1.0, "b": True, "neg_zero": -0.0, "big": 2**200, "tiny": 5e-324}
    for kind in ("record", "receipt"):
        decoded = decode(encode(value, kind=kind, fallback=False))
        assert_same(decoded, value)
        assert math.copysign(1.0, decoded["neg_zero"]) == -1.0
    rows = [{"x": 1.0, "n": 1}, {"x": -0.0, "n": 2.5}]
    assert_same(decode(encode(rows, kind="table", fallback=False)), rows)


def test_strings_that_look_like_other_values_stay_strings() -> None:
    value = {s: s for s in TRICKY_STRINGS}
    rows = [{"s": s, "a": s if i % 2 else i} for i, s in enumerate(TRICKY_STRINGS)]
    for kind in ("record", "receipt"):
        round_trip(value, kind=kind, fallback=False)
    assert_same(decode(encode(rows, kind="table", fallback=False)), rows)


def test_strings_a_reader_could_take_for_numbers_are_quoted() -> None:
    value = {"code": "007", "flag": "True", "plus": "+5", "day": "2026-09-08", "v": "v1.2"}
    text = round_trip(value, kind="receipt")
    assert text.split("\n")[1] == 'code="007",flag="True",plus="+5",day=2026-09-08,v=v1.2'


def test_null_and_empty_string_are_different_cells() -> None:
    rows = [{"s": None}, {"s": ""}, {"s": '""'}, {"s": '"'}]
    text = encode(rows, kind="table", fallback=False)
    assert text.split("\n")[1:] == ["", '""', '\\""', '\\"']
    assert decode(text) == rows


def test_separators_and_line_breaks_are_escaped_in_cells() -> None:
    rows = [{"s": "a,b|c\\d\ne\rf"}, {"s": "x"}]
    text = encode(rows, kind="table", fallback=False)
    assert text.split("\n")[1] == "a\\,b\\|c\\\\d\\ne\\rf"
    assert decode(text) == rows


def test_empty_tables_round_trip() -> None:
    for value in ([], [{}], [{}, {}, {}]):
        text = round_trip(value, kind="table", fallback=False)
        assert parse(text).header.rows == len(value)


def test_constant_columns_go_to_the_header() -> None:
    rows = [{"id": i, "currency": "USD", "note": None, "tags": [1, 2]} for i in range(3)]
    text = encode(rows, kind="table")
    assert text.split("\n")[0].endswith("cols=id:int,currency:str=USD,note:any=,tags:any=[1,2]")
    assert text.split("\n")[1:] == ["0", "1", "2"]
    decoded = decode(text)
    assert decoded == rows
    decoded[0]["tags"].append(3)
    assert decoded[1]["tags"] == [1, 2], "constant containers are copied per row"


def test_lists_of_same_shaped_objects_in_a_record_become_sub_tables() -> None:
    value = {"total": 2, "items": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}
    text = encode(value, kind="record")
    assert text.split("\n")[1:] == ["total=2", "items=#2 id:int,name:str", "1,a", "2,b"]
    assert decode(text) == value


def test_header_fields_are_parsed() -> None:
    text = encode(
        [{"a": 1}, {"a": 2}],
        kind="table",
        source="db|orders",
        snapshot="snap-7",
        range="2026-01-01/2026-02-01",
        page=PageInfo(number=2, count=5, offset=2, total=10, next="cur|sor"),
        extra={"x-trace": "t1"},
        fallback=False,
    )
    assert text.split("\n")[0] == (
        "QRP1|table|source=db\\|orders|snapshot=snap-7|range=2026-01-01/2026-02-01|page=2/5"
        "|offset=2|total=10|rows=2|cols=a:int|next=cur\\|sor|x-trace=t1"
    )
    header = parse(text).header
    assert (header.kind, header.source, header.snapshot, header.range) == (
        "table",
        "db|orders",
        "snap-7",
        "2026-01-01/2026-02-01",
    )
    assert (header.page, header.pages, header.offset, header.total, header.rows) == (2, 5, 2, 10, 2)
    assert header.next == "cur|sor" and header.extra == {"x-trace": "t1"}
    assert [(c.name, c.type) for c in header.cols or ()] == [("a", "int")]


def test_larger_than_json_falls_back_to_a_json_body() -> None:
    rows = [{"s": ",,,,,,,,,,,,,,,,"}]
    text = encode(rows, kind="table")
    assert text == 'QRP1|table|body=json\n[{"s":",,,,,,,,,,,,,,,,"}]'
    assert decode(text) == rows
    assert parse(encode(rows, kind="table", fallback=False)).header.body is None


def test_auto_kind_follows_the_shape() -> None:
    series = [{"t": "2026-01-01T00:00:00Z", "v": 1}, {"t": "2026-01-01T00:01:00Z", "v": 2}]
    irregular = [*series, {"t": "2026-01-01T00:07:00Z", "v": 3}]
    assert choose_kind(series) == "series"
    assert choose_kind(irregular) == "table"  # timestamps read better than offsets there
    assert choose_kind([{"a": 1}]) == "table"
    assert choose_kind({"a": 1}) == "record"
    assert choose_kind("x") == "text"
    assert choose_kind(3) == "record"


# ---------------------------------------------------------------- encode errors


@pytest.mark.parametrize(
    ("value", "kind", "message"),
    [
        ({"x": float("nan")}, None, r"\$\.x: nan is not a JSON number"),
        ([1, float("inf")], None, r"\$\[1\]: inf is not a JSON number"),
        ({"t": (1, 2)}, None, r"\$\.t: a tuple is not a JSON value"),
        ({1: "a"}, None, r"object key 1 is a int"),
        ({"s": {1, 2}}, None, r"a set is not a JSON value"),
        (["\ud83d\ude00"], None, r"\$\[0\]: string holds the surrogate pair"),
        (3, "text", r"kind text takes a string, got int"),
        ({"a": 1}, "table", r"kind table takes a list, got dict"),
        ([1], "record", r"kind record takes an object; a list is a table"),
        ("s", "record", r"a string is text"),
        ([1], "receipt", r"kind receipt takes an object, got list"),
        ([{"v": 1}], "series", r"no time field found"),
        ([{"t": "yesterday"}], "series", r"no time field found"),
        ([1, 2], "series", r"objects that all have the same keys"),
        ({"a": 1}, "graph", r"unknown kind 'graph'"),
    ],
)
def test_values_a_kind_cannot_take_are_refused_clearly(value: Any, kind: Any, message: str) -> None:
    with pytest.raises(QRPEncodeError, match=message) as info:
        encode(value, kind=kind)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"t0": 0}, "t0 and step_ms are for a series, not a table"),
        ({"kind": "series", "step_ms": 0}, "step_ms must be a positive integer"),
        ({"kind": "series", "step_ms": 1.5}, "step_ms must be a positive integer"),
        ({"page": PageInfo(number=0)}, "page number must be an integer >= 1"),
        ({"page": PageInfo(number=3, count=2)}, "page count 2 must be >= the page number 3"),
        ({"page": PageInfo(number=1, offset=-1)}, "page offset must be an integer >= 0"),
        ({"page": PageInfo(number=1, total=-5)}, "page total must be an integer >= 0"),
        ({"extra": {"trace": "1"}}, "extra header key 'trace' must look like x-name"),
    ],
)
def test_options_that_would_write_a_bad_header_are_refused(
    kwargs: dict[str, Any], message: str
) -> None:
    rows = [{"ts": 0, "v": 1}, {"ts": 1000, "v": 2}]
    with pytest.raises(QRPEncodeError, match=message):
        encode(rows, **{"kind": "table", **kwargs})


def test_a_wrong_step_is_refused_not_rewritten() -> None:
    rows = [{"ts": 0, "v": 1}, {"ts": 1000, "v": 2}, {"ts": 5000, "v": 3}]
    with pytest.raises(QRPEncodeError, match="row 2 is not at t0"):
        encode(rows, kind="series", step_ms=1000)
    with pytest.raises(QRPEncodeError, match="t0 '2026' must be spelled like"):
        encode(rows, kind="series", t0="2026")


# ---------------------------------------------------------------- decode errors

TABLE = "QRP1|table|rows=2|cols=id:int,name:str\n1,a\n2,b"


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("", 1, 1, "not a QRP1 document"),
        ('{"a": 1}', 1, 1, "not a QRP1 document"),
        ("QRP2|table|rows=0|cols=", 1, 1, "unsupported version QRP2"),
        ("QRP1|chart", 1, 6, "unknown kind 'chart'"),
        ("QRP1|table|rows=0|cols=|color=red", 1, 25, "unknown header key 'color'"),
        ("QRP1|table|rows=0|rows=0|cols=", 1, 19, "duplicate header key 'rows'"),
        ("QRP1|table|rows=-1|cols=", 1, 17, "rows must be a whole number"),
        ("QRP1|table|rows=0", 1, 18, "a table header needs cols"),
        ("QRP1|table|rows=0|cols=a:integer", 1, 26, "unknown column type 'integer'"),
        ("QRP1|table|rows=0|cols=a:int,a:str", 1, 30, "duplicate column 'a'"),
        ("QRP1|text|len=1|rows=1\nx", 1, 17, "'rows' is not allowed in a text"),
        ("QRP1|table|page=3/2|rows=0|cols=", 1, 17, "page 3 is past the last page 2"),
        ("QRP1|table|rows=1|cols=a:dt_ms\n1", 1, 19, "dt_ms columns exist only in a series"),
        ("QRP1|series|rows=1|cols=v:int\n1", 1, 30, "needs t0 and one dt_ms column"),
        ("QRP1|table|rows=1|body=json\n[]", 1, 12, "'rows' is not allowed with body=json"),
        (TABLE.replace("2,b", "2"), 3, 1, "row has 1 cells, expected 2"),
        (TABLE.replace("2,b", "2,b,c"), 3, 1, "row has 3 cells, expected 2"),
        (TABLE.replace("2,b", "x,b"), 3, 1, "column 'id': expected an integer, found 'x'"),
        (TABLE.replace("2,b", "2,b\\q"), 3, 4, "unknown escape"),
        (TABLE.replace("2,b", '2,"b"'), 3, 4, "a second quote"),
        (TABLE.replace("rows=2", "rows=3"), 4, 1, "ends after 2 of 3 rows"),
        (TABLE.replace("rows=2", "rows=1"), 3, 1, "unexpected line after the body"),
        (TABLE.replace("\n", "\r\n"), 1, 39, "raw carriage return"),
        ("QRP1|table|rows=1|cols=a:any\n[1,", 2, 4, "invalid JSON"),
        ("QRP1|table|rows=1|cols=a:any\n[NaN]", 2, 1, "NaN is not a JSON number"),
        ("QRP1|table|rows=1|cols=a:f64\n1e999", 2, 1, "out of the float range"),
        ("QRP1|table|rows=1|cols=a:bool\n1", 2, 1, "expected true or false"),
        ("QRP1|table|rows=1|cols=a:any\na\\,b", 2, 2, "backslash escape is not allowed"),
        ("QRP1|record|fields=2\na=1", 3, 1, "ends after 1 of 2 fields"),
        ("QRP1|record|fields=2\na=1\na=2", 3, 1, "duplicate field 'a'"),
        ("QRP1|record|fields=1\na", 2, 2, "'=' after the field name"),
        ("QRP1|record|fields=1\na=#x a:int", 2, 4, "expected a row count"),
        ("QRP1|record|fields=1\na=#2 v:int\n1", 4, 1, "ends after 1 of 2 rows"),
        ("QRP1|receipt\na=1,a=2", 2, 5, "duplicate field 'a'"),
        ("QRP1|receipt", 2, 1, "needs its line"),
        ("QRP1|text|len=5\nabc", 2, 1, "text has 3 of len=5 characters"),
        ("QRP1|text|len=2\nabc", 2, 3, "continues past len=2"),
        ("QRP1|text|body=json\n[1]", 2, 1, "a text cannot hold a JSON list"),
        ("QRP1|record|body=json\n", 2, 1, "invalid JSON"),
        (
            "QRP1|series|rows=1|t0=2026-01-01T00:00:00Z|cols=t:dt_ms\n1",
            2,
            1,
            "not a whole second",
        ),
        ("QRP1|series|rows=0|t0=yesterday|cols=", 1, 23, "t0 must be an ISO-8601 UTC time"),
    ],
)
def test_malformed_documents_name_line_and_column(
    text: str, line: int, column: int, message: str
) -> None:
    with pytest.raises(QRPDecodeError, match=message) as info:
        decode(text)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert str(info.value).startswith(f"line {line}, column {column}: ")


DIGITS = "9" * 5_000  # past Python's int/str conversion limit of 4,300 digits
DEEP = 50_000  # past the JSON reader's nesting depth


HOSTILE = {
    "rows": (f"QRP1|table|rows={DIGITS}|cols=a:int\n1", 1, 17, "rows has 5000 digits"),
    "offset": (f"QRP1|table|offset={DIGITS}|rows=0|cols=", 1, 19, "offset has 5000 digits"),
    "total": (f"QRP1|table|total={DIGITS}|rows=0|cols=", 1, 18, "total has 5000 digits"),
    "fields": (f"QRP1|record|fields={DIGITS}\na=1", 1, 20, "fields has 5000 digits"),
    "len": (f"QRP1|text|len={DIGITS}\nabc", 1, 15, "len has 5000 digits"),
    "step_ms": (f"QRP1|series|rows=0|cols=|step_ms={DIGITS}", 1, 34, "step_ms has 5000 digits"),
    "page": (f"QRP1|table|page={DIGITS}|rows=0|cols=", 1, 17, "page has 5000 digits"),
    "pages": (f"QRP1|table|page=1/{DIGITS}|rows=0|cols=", 1, 19, "page count has 5000 digits"),
    "sub-table": (f"QRP1|record|fields=1\nk=#{DIGITS} a:int\n1", 2, 4, "row count has 5000"),
    "deep-field": ("QRP1|record|fields=1\nk=" + "[" * DEEP + "]" * DEEP, 2, 3, "nested too deeply"),
    "deep-cell": ("QRP1|table|rows=1|cols=a:any\n" + "[" * DEEP, 2, 1, "nested too deeply"),
    "deep-body": ("QRP1|record|body=json\n" + '{"a":' * DEEP, 2, 1, "nested too deeply"),
    "deep-const": ("QRP1|table|rows=0|cols=a:any=" + "[" * DEEP, 1, 30, "nested too deeply"),
    "inf-body": ("QRP1|record|body=json\n1e400", 2, 1, "'1e400' is out of the float range"),
    "inf-field": ("QRP1|record|fields=1\nk=[1,-1E400]", 2, 3, "'-1E400' is out of the float"),
    "inf-cell": ('QRP1|table|rows=1|cols=a:any\n{"v":2e308}', 2, 1, "out of the float range"),
}


@pytest.mark.parametrize(("text", "line", "column", "message"), HOSTILE.values(), ids=HOSTILE)
def test_hostile_counts_depths_and_numbers_are_decode_errors(
    text: str, line: int, column: int, message: str
) -> None:
    with pytest.raises(QRPDecodeError, match=message) as info:
        decode(text)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)


def test_a_constant_nested_as_deeply_as_json_allows_is_copied_into_every_row() -> None:
    nested: Any = []
    for _ in range(600):  # deeper than a recursive copy goes, within the JSON reader's depth
        nested = [nested]
    text = encode([{"a": nested, "b": 1}, {"a": nested, "b": 2}], kind="table", fallback=False)
    assert "cols=a:any=[[[" in text

    rows = decode(text)

    assert rows == [{"a": nested, "b": 1}, {"a": nested, "b": 2}]
    assert rows[0]["a"] is not rows[1]["a"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables().filter(lambda rows: len(rows) >= 1), st.data())
def test_tampered_documents_never_decode_silently_to_other_rows(
    rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    text = encode(rows, kind="table", fallback=False)
    lines = text.split("\n")
    cut = data.draw(st.integers(1, len(lines) - 1))
    tampered = "\n".join(lines[:cut] + lines[cut + 1 :])  # drop one row
    with pytest.raises(QRPDecodeError):
        decode(tampered)


def test_decode_takes_text_only() -> None:
    with pytest.raises(TypeError, match="decode takes str"):
        decode(b"QRP1|receipt\n")  # type: ignore[arg-type]
