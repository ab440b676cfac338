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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..userfiles import MiB, UserFileError, read_user_text, resolved
from ._subagent_rule import MAX_SUBAGENT_DEPTH
from .definition import AgentDefinition, DefinitionError, absolute_model

MAX_AGENT_FILE_BYTES = 4 * MiB
"""The largest agent file or output schema Pi reads: long instructions fit many times."""


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
        text = read_user_text(file, what="agent file", max_bytes=MAX_AGENT_FILE_BYTES)
    except UserFileError as exc:
        raise UserError(f"agent file {file}: cannot read it: {exc.reason}") from None
    try:
        data = parse_toml(text)
    except ValueError as exc:
        raise UserError(f"agent file {file}: not valid TOML: {exc}") from None
    real = resolved(file, what="agent file")
    try:
        definition = AgentDefinition.from_dict(_resolved(data, real, within, done))
        definition.load_tools()
    except DefinitionError as exc:
        raise UserError(_where(file, text, exc.key) + f"{exc.key}: {exc.problem}") from None
    done[real] = definition
    return definition


def agent_error(definition: AgentDefinition, exc: DefinitionError) -> UserError:
    """`exc` as a UserError naming the agent file (and line) when there is one; when the
    faulty value was given over the file's (`--model` on the command line, a
    `from_file` override), the file's line is not blamed for it."""
    if definition.source is None:
        return exc
    file = Path(definition.source)
    if _overridden(definition, file, exc.key):
        return UserError(f"{exc.key}: {exc.problem} (given in place of {file}'s)")
    try:
        text = read_user_text(file, what="agent file", max_bytes=MAX_AGENT_FILE_BYTES)
    except UserError:
        text = ""
    return UserError(_where(file, text, exc.key) + f"{exc.key}: {exc.problem}")


def _overridden(definition: AgentDefinition, file: Path, key: str) -> bool:
    """Whether `definition`'s value at `key` (dotted) is not the one `file` sets."""
    try:
        own = read_agent_file(file)
    except UserError:  # the file changed since, or cannot be read: blame it as before
        return False
    first, *rest = key.split(".")
    mine, theirs = getattr(definition, first, None), getattr(own, first, None)
    for part in rest:
        mine = mine.get(part) if isinstance(mine, dict) else None
        theirs = theirs.get(part) if isinstance(theirs, dict) else None
    return bool(mine != theirs)


def _resolved(
    data: dict[str, Any], file: Path, within: tuple[Path, ...], done: dict[Path, AgentDefinition]
) -> dict[str, Any]:
    """The table of the file at `file` (resolved) with its paths resolved and its
    sub-agents' files read in."""
    base = file.parent
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
        out["subagents"] = _subagents(out["subagents"], base, (*within, file), done)
    if isinstance(out.get("mcp"), dict):
        out["mcp"] = {name: _mcp_server(name, entry, base) for name, entry in out["mcp"].items()}
    out["import_path"] = str(_import_root(base))
    out["source"] = str(file)
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
    path = _path(table["schema"], base, "output")
    try:
        text = read_user_text(path, what="output schema", max_bytes=MAX_AGENT_FILE_BYTES)
    except UserFileError as exc:
        raise DefinitionError("output", f"cannot read {path}: {exc.reason}") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise DefinitionError("output", f"{path} is not JSON: {exc}") from None
    except RecursionError:
        raise DefinitionError("output", f"{path} is nested too deeply to read") from None
    if not isinstance(schema, dict):
        raise DefinitionError("output", f"{path} must hold a JSON Schema object")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:64] or "output"
    return {"name": name, **table, "schema": schema}


def _mcp_server(name: str, entry: Any, base: Path) -> Any:
    """A stdio server runs in the file's folder (or its `cwd`, relative to the file)."""
    if not isinstance(entry, dict) or "command" not in entry:
        return entry  # the definition's rule says what is wrong
    cwd = entry.get("cwd", ".")
    if not isinstance(cwd, str) or not cwd:
        return entry
    return {**entry, "cwd": str(_path(cwd, base, f"mcp.{name}.cwd"))}


def _path(value: str, base: Path, key: str) -> Path:
    """`value`, a path the file names at `key`, resolved against the file's folder."""
    try:
        return resolved(value, base=base, what=key)
    except UserFileError as exc:
        raise DefinitionError(key, f"{value}: {exc.reason}") from None


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
        path = _path(entry["agent"], base, key)
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
    """The number of the line that sets `key` (dotted), or of the header of the table
    `key` names; lines inside multi-line strings set nothing. Linear in `text`: string
    methods only, no pattern that could backtrack."""
    *tables, name = key.split(".")
    section = ".".join(tables)
    current = ""
    for number, line in _code_lines(text):
        header = _header(line)
        if header is not None:
            current = header
            if not tables and current == name:
                return number  # a whole table is at fault: its header
            continue
        if current == section and _sets(line, name):
            return number
    return None


def _header(line: str) -> str | None:
    """The table a `[table]` or `[[table]]` line opens, spaces dropped; None for others."""
    stripped = line.lstrip()
    if not stripped.startswith("["):
        return None
    inside, closed, _ = stripped.lstrip("[").partition("]")
    name = inside.replace(" ", "")
    return name if closed and name.strip() else None


def _sets(line: str, name: str) -> bool:
    """Whether `line` sets the key `name`, bare or quoted."""
    stripped = line.lstrip()
    for spelled in (f'"{name}"', name):
        if stripped.startswith(spelled) and stripped[len(spelled) :].lstrip().startswith("="):
            return True
    return False


def _code_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line of `text` with its number, but lines that start inside a multi-line
    string (a key spelled there sets nothing)."""
    open_quotes = ""  # the quotes of the multi-line string still open, if one is
    for number, line in enumerate(text.split("\n"), 1):
        if not open_quotes:
            yield number, line
        open_quotes = _open_after(line, open_quotes)


def _open_after(line: str, quotes: str) -> str:
    """The quotes of the multi-line string open at the end of `line`, given those open at
    its start ("" for none): strings are skipped, and a comment ends the line."""
    i = 0
    while i < len(line):
        if quotes:
            end = _string_end(line, i, quotes)
            if end < 0:
                return quotes
            i, quotes = end, ""
        elif line[i] == "#":
            return ""
        elif line[i] in "\"'":
            if line.startswith(line[i] * 3, i):
                quotes, i = line[i] * 3, i + 3
            else:
                i = _string_end(line, i + 1, line[i])
                if i < 0:
                    return ""  # not TOML; tomllib has said so already
        else:
            i += 1
    return quotes


def _string_end(line: str, start: int, quotes: str) -> int:
    """Where the string closed by `quotes` ends in `line` (just past them), looking from
    `start`; -1 when it does not end on this line. A backslash escapes in basic strings."""
    at = start
    while (found := line.find(quotes, at)) >= 0:
        # the backslashes before the quotes lie after `at`: line[at - 1] is a quote (or none)
        backslashes = found - at - len(line[at:found].rstrip("\\"))
        if quotes[0] == "'" or backslashes % 2 == 0:
            return found + len(quotes)
        at = found + 1
    return -1
