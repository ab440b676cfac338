"""The layering rule: a module imports only Pi modules of its own layer or a lower one.

Layers bottom-up as implemented (observe sits below loop on purpose: the loop emits its
events into traces; `qrp1` is a pure codec, low so that tools can encode results with it). `exceptions` is importable by every layer; the surfaces and the
top-level package may import anything. Imports are read with `ast`, so lazy imports
inside functions and `TYPE_CHECKING` blocks count too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "pi_runtime"
SRC = Path(__file__).resolve().parents[1] / "src"

SURFACE = 10
LAYERS: dict[str, int] = {
    "exceptions": 0,
    "cachedir": 0,  # a path from the environment, for any layer
    "memo": 0,  # bounded memos, for any layer
    "usercode": 0,  # importing a user's MODULE:ATTR, for any layer
    "userfiles": 0,  # reading a file a user names (never a FIFO or device), for any layer
    "messages": 1,
    "qrp1": 1,
    "models": 2,
    "guardrails": 2,
    "tools": 3,
    "mcp": 3,  # MCP servers' tools as ToolSpecs: beside tools, under the loop
    "context": 4,
    "contract": 5,
    "observe": 6,
    "memory": 6,  # long-term facts: their tools emit observe's events; the loop reads them
    "loop": 7,
    "data": 8,
    "durable": 9,
    "cli": SURFACE,
    "bench": SURFACE,
    "evals": SURFACE,
    "server": SURFACE,
    "testing": SURFACE,
}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def resolve_relative(importer: str, importer_is_package: bool, level: int, name: str | None) -> str:
    """The absolute module `from <level dots><name> import …` refers to."""
    package = importer if importer_is_package else importer.rpartition(".")[0]
    parts = package.split(".")
    if level - 1 > len(parts) - 1:
        raise ValueError(f"{importer}: relative import beyond the top-level package")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base)


def pi_imports(path: Path, root: Path) -> list[Import]:
    """Every `pi_runtime` module `path` imports, relative imports resolved.

    `from pkg import name` counts as importing `pkg.name` when that is a module of the
    source tree, else as importing `pkg` itself.
    """
    importer = module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = resolve_relative(importer, is_package(path), node.level, node.module)
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                targets.append(candidate if module_exists(candidate, root) else base)
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                found.append(Import(importer, target, node.lineno))
    return found


def module_exists(name: str, root: Path) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def layer_of(module: str) -> int:
    """The rank of a `pi_runtime` module; a module of no known layer is an error."""
    parts = module.split(".")
    if parts == [PACKAGE]:
        return SURFACE
    top = parts[1]
    if top not in LAYERS:
        raise LookupError(f"{module}: {PACKAGE}.{top} belongs to no layer; add it to LAYERS")
    return LAYERS[top]


def violations(root: Path) -> list[str]:
    """One sentence per import that breaks the layering rule under `root/pi_runtime`."""
    problems: list[str] = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        for imp in pi_imports(path, root):
            try:
                mine, theirs = layer_of(imp.importer), layer_of(imp.target)
            except LookupError as exc:
                problems.append(str(exc))
                continue
            if theirs > mine:
                problems.append(
                    f"{imp.importer} (layer {mine}) imports {imp.target} (layer {theirs}) "
                    f"at {path.relative_to(root)}:{imp.line}"
                )
    return problems


def source_modules() -> list[Path]:
    return sorted((SRC / PACKAGE).rglob("*.py"))


# --- the rule, applied to the source tree ------------------------------------------------


@pytest.mark.parametrize(
    "path", source_modules(), ids=lambda p: module_name(p, SRC) if isinstance(p, Path) else p
)
def test_module_imports_only_its_layer_or_below(path: Path) -> None:
    importer = module_name(path, SRC)
    mine = layer_of(importer)
    bad = [
        f"{importer} imports {imp.target} (layer {layer_of(imp.target)} > {mine}) "
        f"at line {imp.line}"
        for imp in pi_imports(path, SRC)
        if layer_of(imp.target) > mine
    ]
    assert bad == []


def test_every_top_level_module_belongs_to_a_layer() -> None:
    tops = {
        p.stem if p.is_file() else p.name
        for p in (SRC / PACKAGE).iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert tops - LAYERS.keys() == set()


def test_source_tree_has_no_violations() -> None:
    assert violations(SRC) == []


def test_the_scan_sees_the_imports_that_exist() -> None:
    """Guard against a vacuous pass: known cross-layer imports are found."""
    found = {
        (imp.importer, imp.target) for path in source_modules() for imp in pi_imports(path, SRC)
    }
    assert ("pi_runtime.loop.agent", "pi_runtime.observe") in found
    assert ("pi_runtime.loop.agent", "pi_runtime.exceptions") in found
    assert ("pi_runtime.cli.run", "pi_runtime.loop") in found
    assert ("pi_runtime", "pi_runtime.loop") in found


def test_only_the_benchmarks_import_the_throwaway_postgres_server() -> None:
    """`bench.pgtemp` may `useradd` as root: the runtime and the CLI must never load it."""
    importers = {
        imp.importer
        for path in source_modules()
        for imp in pi_imports(path, SRC)
        if imp.target == "pi_runtime.bench.pgtemp"
    }
    assert importers, "the scan no longer sees bench.jobs import pgtemp"
    assert {m for m in importers if not m.startswith("pi_runtime.bench.")} == set()


# --- the checker itself ------------------------------------------------------------------


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_relative_imports_resolve_against_the_importing_package() -> None:
    assert resolve_relative("pi_runtime.loop.agent", False, 1, "guards") == "pi_runtime.loop.guards"
    assert resolve_relative("pi_runtime.loop.agent", False, 2, "observe") == "pi_runtime.observe"
    assert resolve_relative("pi_runtime.loop", True, 1, "agent") == "pi_runtime.loop.agent"
    assert resolve_relative("pi_runtime.loop", True, 2, None) == "pi_runtime"
    assert resolve_relative("pi_runtime", True, 1, "tools") == "pi_runtime.tools"


def test_a_violation_names_the_module_and_the_import(tmp_path: Path) -> None:
    write(tmp_path, "pi_runtime/__init__.py", "from .loop import run\n")
    write(tmp_path, "pi_runtime/exceptions.py", "")
    write(tmp_path, "pi_runtime/loop/__init__.py", "from .runner import run\n")
    write(tmp_path, "pi_runtime/loop/runner.py", "from ..observe import emit\nrun = 1\n")
    write(tmp_path, "pi_runtime/observe/__init__.py", "from .. import exceptions\n")
    write(
        tmp_path,
        "pi_runtime/messages/__init__.py",
        "def f():\n    from ..tools import gate\n    import pi_runtime.cli.run\n",
    )

    problems = violations(tmp_path)

    assert len(problems) == 2, problems
    assert "pi_runtime.messages (layer 1) imports pi_runtime.tools (layer 3)" in problems[0]
    assert "pi_runtime/messages/__init__.py:2" in problems[0]
    assert "pi_runtime.messages (layer 1) imports pi_runtime.cli.run (layer 10)" in problems[1]


def test_importing_the_top_level_package_from_a_layer_is_a_violation(tmp_path: Path) -> None:
    write(tmp_path, "pi_runtime/__init__.py", "")
    write(tmp_path, "pi_runtime/tools/__init__.py", "from pi_runtime import Agent\n")

    assert violations(tmp_path) == [
        "pi_runtime.tools (layer 3) imports pi_runtime (layer 10) at pi_runtime/tools/__init__.py:1"
    ]


def test_a_module_outside_every_layer_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "pi_runtime/__init__.py", "from .plugins import x\n")
    write(tmp_path, "pi_runtime/plugins.py", "x = 1\n")

    problems = violations(tmp_path)

    assert len(problems) == 1
    assert "pi_runtime.plugins" in problems[0]
    assert "belongs to no layer" in problems[0]
