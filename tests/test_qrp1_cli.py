"""`pi qrp encode` / `pi qrp decode` as other programs use them: stdin, stdout, exit codes.

Most cases run in-process through typer's runner (bytes in, bytes out); the pipe of
lone surrogates also goes through the real console script."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
from typer.testing import CliRunner

from cli_support import PI
from pi_runtime.cli import app


@dataclass(frozen=True)
class Piped:
    returncode: int
    stdout: bytes
    stderr: bytes


def pi_qrp(*args: str, stdin: bytes, process: bool = False) -> Piped:
    """`pi qrp ARGS` with `stdin`, in-process or with `process` as the console script."""
    if process:
        done = subprocess.run(
            [str(PI), "qrp", *args], input=stdin, capture_output=True, timeout=120, check=False
        )
        return Piped(done.returncode, done.stdout, done.stderr)
    result = CliRunner().invoke(app, ["qrp", *args], input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Piped(result.exit_code, result.stdout_bytes, result.stderr_bytes)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


ROUND_TRIPS = [
    [
        {"id": 1, "name": "a,b|c", "price": 9.5, "ok": True},
        {"id": 2, "name": "", "price": 1.0, "ok": None},
    ],
    {"status": "done", "rows": 5000, "note": "30", "nested": {"a": [1, 2.0, None]}},
    "line one\r\nline two\n\n中文 🙂",
    [],
    [1, "two", None, -0.0, 2**80],
    {"empty": "", "null": None, "looks": "true", "num": "1e5", "quote": '"', "slash": "\\"},
]


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=range(len(ROUND_TRIPS)))
def test_encode_then_decode_gives_back_the_same_json(value: Any) -> None:
    encoded = pi_qrp("encode", stdin=compact(value).encode())
    assert encoded.returncode == 0, encoded.stderr.decode()
    assert encoded.stdout.startswith(b"QRP1|")
    decoded = pi_qrp("decode", stdin=encoded.stdout)
    assert decoded.returncode == 0, decoded.stderr.decode()
    assert decoded.stdout.decode() == compact(value) + "\n"


def test_kind_and_series_options_reach_the_header() -> None:
    rows = [{"time": f"2026-09-08T0{h}:00:00Z", "close": 100.5 + h} for h in range(3)]
    encoded = pi_qrp(
        "encode", "--kind", "series", "--source", "bench|x", "--t0", "2026-09-08T00:00:00Z",
        "--step-ms", "3600000", stdin=compact(rows).encode(),
    )  # fmt: skip
    assert encoded.returncode == 0, encoded.stderr.decode()
    header, *body = encoded.stdout.decode().rstrip("\n").split("\n")
    assert header == (
        "QRP1|series|source=bench\\|x|rows=3|t0=2026-09-08T00:00:00Z|step_ms=3600000"
        "|cols=time:dt_ms,close:f64"
    )
    assert body == ["100.5", "101.5", "102.5"]
    assert json.loads(pi_qrp("decode", stdin=encoded.stdout).stdout) == rows


@pytest.mark.parametrize("process", [False, True], ids=["in-process", "console-script"])
def test_lone_surrogates_survive_the_pipe(process: bool) -> None:
    encoded = pi_qrp("encode", "--kind", "text", stdin=b'"a\\ud800b"', process=process)
    assert encoded.returncode == 0, encoded.stderr.decode()
    assert encoded.stdout == b'QRP1|text|body=json\n"a\\ud800b"\n'
    decoded = pi_qrp("decode", stdin=encoded.stdout, process=process)
    assert decoded.stdout == b'"a\\ud800b"\n'


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (("encode",), b"{not json", "stdin is not valid JSON"),
        (("encode",), b'{"a": NaN}', "NaN is not a JSON number"),
        (("encode",), b"\xff\xfe", "stdin is not UTF-8"),
        (("encode", "--kind", "text"), b'{"a": 1}', "kind text takes a string, got dict"),
        (("encode", "--kind", "series"), b'[{"v": 1}]', "no time field found"),
        (("encode", "--kind", "chart"), b"{}", "'chart' is not one of"),
        (("decode",), b'{"a": 1}', "line 1, column 1: not a QRP1 document"),
        (("decode",), b"QRP1|table|rows=3|cols=a:int\n1\n2", "line 4, column 1"),
        (("decode",), b"QRP1|table|rows=1|cols=a:int\nx", "expected an integer"),
        (("decode",), b"QRP9|table", "unsupported version QRP9"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    args: tuple[str, ...], stdin: bytes, message: str
) -> None:
    result = pi_qrp(*args, stdin=stdin)
    assert result.returncode == 2
    assert result.stdout == b""
    assert message in result.stderr.decode()


HOSTILE_DOCUMENTS = {
    "count-digits": (b"QRP1|table|rows=" + b"9" * 5000 + b"|cols=a:int\n1", "column 17: rows has"),
    "deep-json": (b"QRP1|record|fields=1\nk=" + b"[" * 50_000, "nested too deeply"),
    "infinity": (b"QRP1|record|body=json\n1e400", "'1e400' is out of the float range"),
}


@pytest.mark.parametrize(("stdin", "message"), HOSTILE_DOCUMENTS.values(), ids=HOSTILE_DOCUMENTS)
def test_hostile_documents_exit_2_with_one_line_not_a_traceback(stdin: bytes, message: str) -> None:
    result = pi_qrp("decode", stdin=stdin)
    assert result.returncode == 2
    assert result.stdout == b""
    assert message in result.stderr.decode()
    assert result.stderr.decode().startswith("error: not a valid QRP1 document: line ")
    assert result.stderr.count(b"\n") == 1
