"""Agent files: one TOML file that defines an agent for its whole life.

    model = "scripted:script.json"          # any model spec; paths relative to this file
    instructions = "You answer weather questions."   # or [instructions] role = …, task = …
    tools = ["tools:TOOLS"]                 # MODULE:ATTR, importable from this file's folder
                                            # (from above its package, if it is in one)
    allow = ["get_weather"]
    approval = ["cancel_booking"]           # calls wait for a person: `pi approve` / `pi reject`
    tool_choice = "get_weather"             # the first call of each request only
    output = "contract.json"                # a JSON Schema file (or [output] schema = …,
                                            # name, strict, max_repairs, fallback)
    mode = "plan"                           # react (default), plan or auto; with
                                            # max_replans, step_max_steps
    [limits]
    max_steps = 8

    [subagents.research]                    # another agent file, called as a tool
    agent = "research.toml"                 # {"task": "…"}; see `loop.subagent`
    description = "Finds facts on the web and reports them with sources."
    keep_history = false                    # a fresh conversation per call (default)

    [mcp.files]                             # an MCP server's tools (see docs/mcp.md)
    command = ["python", "server.py"]       # stdio, run in this file's folder; or url = "…"
    timeout_s = 30                          # and allow, block, prefix, env, headers, …

Paths are resolved against the file's folder, the output schema is read in, and the
result is an `AgentDefinition` that no longer depends on the file (a sub-agent's file
is read in too). A mistake is one `UserError` naming the file, the line when it can be
found, and the key; a file that includes itself, directly or through others, is one, and
so are sub-agents nested past `MAX_SUBAGENT_DEPTH` levels or past `MAX_SUBAGENTS` in all
(see `loop._subagent_rule`). A file named twice in one read is read once.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ._subagent_rule import MAX_SUBAGENT_DEPTH
from .definition import AgentDefinition, DefinitionError, absolute_model


def read_agent_file(path: str | Path) -> AgentDefinition:
    """The agent defined by the TOML file at `path`, its tools importable and checked."""
    return _read(Path(path).expanduser(), (), {})


def parse_toml(text: str) -> dict[str, Any]:
    """`text` parsed as TOML; a ValueError saying why not, in one line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ValueError("nested too deeply") from None


def _read(
    file: Path, within: tuple[Path, ...], done: dict[Path, AgentDefinition]
) -> AgentDefinition:
    """The agent file at `file`. `within` holds the files that include it as a sub-agent,
    outermost first; `done` the files this read has read already, by resolved path (a file
    named twice, by one agent or by two, is read once)."""
    try:
        # utf-8-sig: editors on Windows start a file with a byte order mark
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"agent file {file}: cannot read it: {exc}") from None
    try:
        data = parse_toml(text)
    except ValueError as exc:
        raise UserError(f"agent file {file}: not valid TOML: {exc}") from None
    base = file.resolve().parent
    try:
        definition = AgentDefinition.from_dict(_resolved(data, base, file, within, done))
        definition.load_tools()
    except DefinitionError as exc:
        raise UserError(_where(file, text, exc.key) + f"{exc.key}: {exc.problem}") from None
    done[file.resolve()] = definition
    return definition


def agent_error(definition: AgentDefinition, exc: DefinitionError) -> UserError:
    """`exc` as a UserError naming the agent file (and line) when there is one."""
    if definition.source is None:
        return exc
    file = Path(definition.source)
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        text = ""
    return UserError(_where(file, text, exc.key) + f"{exc.key}: {exc.problem}")


def _resolved(
    data: dict[str, Any],
    base: Path,
    file: Path,
    within: tuple[Path, ...],
    done: dict[Path, AgentDefinition],
) -> dict[str, Any]:
    """The file's table with its paths resolved and its sub-agents' files read in."""
    out = dict(data)
    if "source" in out or "import_path" in out:
        key = "source" if "source" in out else "import_path"
        raise DefinitionError(key, "is set by Pi, not by an agent file")
    model = out.get("model")
    if isinstance(model, str):
        out["model"] = absolute_model(model, base)
    if "output" in out:
        out["output"] = _output(out["output"], base)
    if "subagents" in out:
        out["subagents"] = _subagents(out["subagents"], base, (*within, file.resolve()), done)
    if isinstance(out.get("mcp"), dict):
        out["mcp"] = {name: _mcp_server(entry, base) for name, entry in out["mcp"].items()}
    out["import_path"] = str(_import_root(base))
    out["source"] = str(file.resolve())
    return out


def _import_root(folder: Path) -> Path:
    """Where tool modules import from: the file's folder, or, when that folder is inside
    a package, the folder holding the outermost package (so `examples/weather/agent.toml`
    names `examples.weather.tools:TOOLS`, as code importing it would)."""
    root = folder
    while (root / "__init__.py").is_file() and root.parent != root:
        root = root.parent
    return root


def _output(value: Any, base: Path) -> Any:
    """`output = "schema.json"` or `[output] schema = "schema.json"`: the schema read in."""
    table = {"schema": value} if isinstance(value, str) else value
    if not isinstance(table, dict) or not isinstance(table.get("schema"), str):
        raise DefinitionError("output", "must name a JSON Schema file (or a table with `schema`)")
    path = (base / table["schema"]).resolve()
    try:
        schema = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError("output", f"cannot read {path}: {exc}") from None
    except ValueError as exc:
        raise DefinitionError("output", f"{path} is not JSON: {exc}") from None
    except RecursionError:
        raise DefinitionError("output", f"{path} is nested too deeply to read") from None
    if not isinstance(schema, dict):
        raise DefinitionError("output", f"{path} must hold a JSON Schema object")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:64] or "output"
    return {"name": name, **table, "schema": schema}


def _mcp_server(entry: Any, base: Path) -> Any:
    """A stdio server runs in the file's folder (or its `cwd`, relative to the file)."""
    if not isinstance(entry, dict) or "command" not in entry:
        return entry  # the definition's rule says what is wrong
    cwd = entry.get("cwd", ".")
    if not isinstance(cwd, str) or not cwd:
        return entry
    return {**entry, "cwd": str((base / Path(cwd).expanduser()).resolve())}


def _subagents(
    value: Any, base: Path, chain: tuple[Path, ...], done: dict[Path, AgentDefinition]
) -> Any:
    """`[subagents.NAME] agent = "file.toml"`: each file read in, relative to this one."""
    if not isinstance(value, dict):
        return value  # the definition's rule says what is wrong
    out = {}
    for name, entry in value.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("agent"), str):
            out[name] = entry
            if isinstance(entry, dict) and "agent" in entry:
                raise DefinitionError(f"subagents.{name}.agent", "must name another agent file")
            continue
        key = f"subagents.{name}.agent"
        path = (base / Path(entry["agent"]).expanduser()).resolve()
        if path in chain:
            loop = " → ".join(p.name for p in (*chain[chain.index(path) :], path))
            raise DefinitionError(key, f"the agent files include each other: {loop}")
        if len(chain) > MAX_SUBAGENT_DEPTH:
            files = " → ".join(p.name for p in (*chain, path))
            raise DefinitionError(
                key, f"sub-agents nest more than {MAX_SUBAGENT_DEPTH} levels deep: {files}"
            )
        child = done.get(path)
        if child is None:
            try:
                child = _read(path, chain, done)
            except UserError as exc:
                raise DefinitionError(key, str(exc)) from None
        out[name] = {**entry, "agent": child}  # checked: the definition stores it as it is
    return out


def _where(file: Path, text: str, key: str) -> str:
    """`FILE:LINE: ` for the line that sets `key` (dotted), or `FILE: `."""
    line = _line_of(text, key)
    return f"{file}:{line}: " if line else f"{file}: "


def _line_of(text: str, key: str) -> int | None:
    *tables, name = key.split(".")
    section = ".".join(tables)
    current = ""
    setting = re.compile(rf"\s*(\"{re.escape(name)}\"|{re.escape(name)})\s*=")
    header = re.compile(r"\s*\[+\s*([^\]]+?)\s*\]+")
    for number, line in enumerate(text.split("\n"), 1):
        found = header.match(line)
        if found:
            current = found.group(1).replace(" ", "")
            if not tables and current == name:
                return number  # a whole table is at fault: its header
            continue
        if current == section and setting.match(line):
            return number
    return None
