"""MCP without a server: the `[mcp.NAME]` table, schema normalisation, result encoding,
the stored definition, and what importing Pi costs (the SDK stays unloaded)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pi_runtime import Agent, ToolError, UserError
from pi_runtime.loop.agentfile import read_agent_file
from pi_runtime.loop.definition import AgentDefinition, DefinitionError
from pi_runtime.mcp import MCPServer, UnusableSchema, strict_schema
from pi_runtime.mcp.results import result_value
from pi_runtime.testing import ScriptedModel, text

SRC = str(Path(__file__).resolve().parents[1] / "src")


# --- the server table ---------------------------------------------------------------------


def test_a_table_round_trips_through_its_stored_form() -> None:
    server = MCPServer.from_table(
        "files",
        {
            "command": ["python", "server.py"],
            "env": {"API_KEY": "${FILES_KEY}", "LOG_LEVEL": "debug"},
            "timeout_s": 5,
            "allow": ["read"],
            "prefix": "files_",
        },
    )

    table = server.to_table()

    assert MCPServer.from_table("files", table) == server
    assert table["timeout_s"] == 5.0 and table["env"]["API_KEY"] == "${FILES_KEY}"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"command": ["x"], "env": {"GITHUB_TOKEN": "ghp_literal"}}, "env.GITHUB_TOKEN"),
        (
            {"url": "http://127.0.0.1/mcp", "headers": {"Authorization": "Bearer abc"}},
            "Authorization",
        ),
        ({"url": "http://127.0.0.1/mcp?api_key=abc"}, "query parameter"),
        ({"command": ["x"], "headers": {"X": "y"}}, "only a `url` server"),
        ({"url": "http://127.0.0.1/mcp", "cwd": "/tmp"}, "for a `command`"),
        ({"command": ["x"], "allow": ["a"], "block": ["a"]}, "both allowed and blocked"),
        ({"command": ["x"], "allow": "read"}, "list of tool names"),
        ({"command": ["x"], "retries": -1}, "retries"),
        ({"command": ["x"], "max_result_bytes": 10}, "max_result_bytes"),
        ({"command": ["x"], "connect_timeout_s": float("inf")}, "connect_timeout_s"),
        ({"command": []}, "command"),
        ({}, "exactly one of"),
    ],
)
def test_a_bad_server_table_is_a_user_error_naming_the_key(
    options: dict[str, Any], words: str
) -> None:
    with pytest.raises(UserError, match=r"mcp\.s") as caught:
        MCPServer(name="s", **options)
    assert words in str(caught.value)


def test_references_are_resolved_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    server = MCPServer(
        name="s",
        url="https://${MCP_HOST}/mcp",
        headers={"Authorization": "Bearer ${MCP_TOKEN}"},
    )
    monkeypatch.setenv("MCP_HOST", "tools.example")
    monkeypatch.setenv("MCP_TOKEN", "abc123")

    assert server.resolved_url() == "https://tools.example/mcp"
    assert server.resolved_headers() == {"Authorization": "Bearer abc123"}
    assert "abc123" not in repr(server.to_table())
    monkeypatch.delenv("MCP_TOKEN")
    with pytest.raises(UserError, match="MCP_TOKEN is not set"):
        server.resolved_headers()


def test_python_as_the_command_is_the_interpreter_running_pi() -> None:
    server = MCPServer(name="s", command=["python", "server.py", "--flag"])

    assert server.program() == (sys.executable, ["server.py", "--flag"])


def test_an_agent_definition_stores_the_servers_and_builds_them_again() -> None:
    definition = AgentDefinition(
        model="scripted:/x.json", mcp={"files": {"command": ["python", "s.py"], "prefix": "f_"}}
    )

    again = AgentDefinition.from_dict(definition.to_dict())

    assert again.mcp == definition.mcp
    assert again.mcp["files"]["timeout_s"] == 30.0
    assert again.same_agent(definition)
    assert not again.same_agent(AgentDefinition(model="scripted:/x.json"))


def test_a_definition_error_names_the_servers_key() -> None:
    with pytest.raises(DefinitionError) as caught:
        AgentDefinition(mcp={"files": {"command": ["x"], "timeout_s": "soon"}})

    assert caught.value.key == "mcp.files.timeout_s"


def test_an_agent_file_runs_its_stdio_servers_in_its_own_folder(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "agent.toml").write_text(
        '[mcp.a]\ncommand = ["python", "a.py"]\n\n[mcp.b]\ncommand = ["b"]\ncwd = "tools"\n\n'
        '[mcp.c]\nurl = "http://127.0.0.1:9/mcp"\n',
        encoding="utf-8",
    )

    definition = read_agent_file(tmp_path / "agent.toml")

    assert definition.mcp["a"]["cwd"] == str(tmp_path.resolve())
    assert definition.mcp["b"]["cwd"] == str((tmp_path / "tools").resolve())
    assert "cwd" not in definition.mcp["c"]


def test_two_servers_of_one_name_are_refused() -> None:
    with pytest.raises(UserError, match="share the name"):
        Agent(
            ScriptedModel([text("x")]),
            mcp=[MCPServer(name="a", command=["x"]), MCPServer(name="a", command=["y"])],
        )


# --- schemas --------------------------------------------------------------------------------


def test_objects_with_properties_are_closed_free_form_ones_stay_open() -> None:
    schema = strict_schema(
        {
            "type": "object",
            "title": "Args",
            "properties": {
                "query": {"type": "string", "title": "Query"},
                "filter": {"type": "object", "properties": {"city": {"type": "string"}}},
                "options": {"type": "object"},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {}}}},
            },
        }
    )
    check = Draft202012Validator(schema)

    assert schema["additionalProperties"] is False
    assert "title" not in schema and "title" not in schema["properties"]["query"]
    assert not check.is_valid({"query": "x", "unknown": 1})
    assert not check.is_valid({"filter": {"city": "x", "zip": 1}})
    assert not check.is_valid({"tags": [{"k": 1, "v": 2}]})
    assert check.is_valid({"options": {"anything": [1, 2]}})


def test_composed_objects_are_left_as_the_server_wrote_them() -> None:
    raw = {
        "type": "object",
        "allOf": [
            {"properties": {"a": {"type": "string"}}},
            {"properties": {"b": {"type": "string"}}},
        ],
    }

    schema = strict_schema(raw)

    assert Draft202012Validator(schema).is_valid({"a": "x", "b": "y"})
    assert raw["allOf"][0] == {"properties": {"a": {"type": "string"}}}  # not edited in place


def test_a_missing_type_means_an_object_and_local_refs_work() -> None:
    schema = strict_schema(
        {"properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "integer"}}}
    )

    assert Draft202012Validator(schema).is_valid({"p": 3})
    assert not Draft202012Validator(schema).is_valid({"p": "3"})


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"type": "string"}, "must describe an object"),
        ({"type": "object", "properties": {"p": {"$ref": "http://x/y.json"}}}, "refers outside"),
        ({"type": "object", "properties": {"p": {"type": "strang"}}}, "not valid JSON Schema"),
        ({"type": "object", "properties": {"p": {"pattern": "(unclosed"}}}, "regex"),
        ({"type": "object", "properties": {"p": {"pattern": "\\p{L}"}}}, "regex"),
        ({"type": "object", "description": "x" * 70_000}, "bytes"),
        (["not", "an", "object"], "not a JSON object"),
    ],
)
def test_a_schema_pi_cannot_enforce_is_refused_with_the_reason(raw: Any, words: str) -> None:
    with pytest.raises(UnusableSchema, match=words):
        strict_schema(raw)


# --- results --------------------------------------------------------------------------------


def block(kind: str, **fields: Any) -> SimpleNamespace:
    return SimpleNamespace(type=kind, **fields)


def result(*blocks: SimpleNamespace, structured: Any = None, error: bool = False) -> Any:
    return SimpleNamespace(content=list(blocks), structured_content=structured, is_error=error)


def test_structured_content_wins_over_its_text_rendering() -> None:
    value = result_value(result(block("text", text='{"a": 1}'), structured={"a": 1}), tool="t")

    assert value == {"a": 1}


def test_binary_content_becomes_a_short_placeholder() -> None:
    png = base64.b64encode(bytes(300)).decode()
    value = result_value(
        result(
            block("text", text="see"),
            block("image", data=png, mime_type="image/png"),
            block("audio", data=png, mime_type="audio/wav"),
            block("resource_link", uri="file:///r.txt", name="r"),
            block("resource", resource=SimpleNamespace(uri="mem://x", text="inline")),
            block("resource", resource=SimpleNamespace(uri="mem://b", blob=png, mime_type=None)),
            structured={"ignored": True},
        ),
        tool="t",
    )

    assert value.splitlines() == [
        "see",
        "[image: image/png, 300 bytes]",
        "[audio: audio/wav, 300 bytes]",
        "[resource r: file:///r.txt]",
        "inline",
        "[resource: mem://b, unknown type, 300 bytes]",
    ]


def test_an_error_result_is_a_tool_error_in_the_servers_words() -> None:
    with pytest.raises(ToolError) as caught:
        result_value(result(block("text", text="x" * 5000), error=True), tool="t")
    assert caught.value.kind == "tool_error"
    assert len(caught.value.message) == 2000

    with pytest.raises(ToolError, match="without saying"):
        result_value(result(error=True), tool="t")


# --- import cost ----------------------------------------------------------------------------


def test_pi_and_its_cli_load_without_the_mcp_sdk() -> None:
    code = (
        "import sys, contextlib, io\n"
        "sys.argv = ['pi', '--help']\n"
        "import pi_runtime\n"
        "from pi_runtime import MCPServer, Agent\n"
        "MCPServer(name='x', command=['python', 's.py'])\n"
        "from pi_runtime.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main()\n"
        "print(sorted(m for m in ('mcp', 'httpx2', 'anyio') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stdout.strip() == "[]", done.stderr
