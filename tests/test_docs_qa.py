"""Long-document QA (seed 003): a corpus of the installed Python's pydoc, tools that pass ids
and never text, a gate that refuses pasted documents, pages read by cursor, a generated
suite that is deterministic and true of the corpus, and the tokens it saves."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from examples.docs_qa import corpus as corpus_module
from examples.docs_qa import make_suite, tools
from examples.docs_qa.corpus import MODULES, Corpus, load_corpus

from cli_support import pi_inprocess, pi_process
from pi_runtime import Agent, ToolError
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.plane import DataPlane
from pi_runtime.messages import ToolCall
from pi_runtime.qrp1 import decode, parse
from pi_runtime.tools import Gate

REPO = Path(__file__).resolve().parents[1]

EXAMPLE = REPO / "examples" / "docs_qa"


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """Rendered once per test process, into a cache folder of the session's own."""
    before = os.environ.get("PI_CACHE_DIR")
    os.environ["PI_CACHE_DIR"] = str(tmp_path_factory.mktemp("pi-cache"))
    try:
        yield load_corpus()
    finally:
        if before is None:
            os.environ.pop("PI_CACHE_DIR", None)
        else:
            os.environ["PI_CACHE_DIR"] = before


@pytest.fixture
def plane(corpus: Corpus) -> Iterator[DataPlane]:
    data = DataPlane(MemoryDataStore(), owner="reader", page_bytes=tools.PAGE_BYTES)
    tools.use_plane(data)
    yield data
    tools.use_plane(None)


def gate_call(name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """One call through the real gate; the tool result the model would read, parsed."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    gate = Gate(tools.TOOLS, session_id="docs-qa")
    outcome = asyncio.run(gate.run(ToolCall(id="c1", name=name, raw=raw)))
    assert outcome.message is not None
    return {
        "is_error": outcome.message.is_error,
        "executed": outcome.executed,
        "content": outcome.message.content,
    }


# --- the corpus --------------------------------------------------------------------------


def test_the_corpus_is_over_2_mb_of_this_pythons_pydoc(corpus: Corpus) -> None:
    assert corpus.size_bytes >= 2_000_000
    assert set(corpus.docs) | set(corpus.missing) == set(MODULES)
    assert len(corpus.docs) >= 100
    assert corpus.python == ".".join(map(str, sys.version_info[:3]))
    assert corpus.docs["json"].text.startswith("Python Library Documentation: package json")


def test_the_corpus_holds_nothing_of_this_machine(corpus: Corpus) -> None:
    machine = {sys.prefix, sys.base_prefix, str(Path.home()), str(REPO)}
    for doc in corpus.docs.values():
        assert not [m for m in machine if len(m) > 1 and m in doc.text], doc.id
        assert not re.search(r" at 0x[0-9a-fA-F]{4,}", doc.text), doc.id
        assert "\nFILE\n" not in doc.text and "\nMODULE REFERENCE\n" not in doc.text


@pytest.mark.slow
def test_rendering_again_gives_the_same_corpus_byte_for_byte(corpus: Corpus) -> None:
    fresh = load_corpus(cache=False)
    assert fresh.digest == corpus.digest and fresh.version == corpus.version


def test_a_second_load_reads_the_cache_file_instead_of_rendering(
    corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_render(*args: object) -> dict[str, object]:
        raise AssertionError("rendered again")

    monkeypatch.setattr(corpus_module, "render", no_render)
    monkeypatch.setattr(corpus_module, "_loaded", {})  # forget the in-memory copy only
    assert load_corpus().digest == corpus.digest


def test_sections_name_pydocs_parts_and_members(corpus: Corpus) -> None:
    doc = corpus.docs["json"]
    for name in ("DESCRIPTION", "FUNCTIONS", "CLASSES", "dumps", "loads", "JSONDecoder.decode"):
        assert name in doc.sections
    assert doc.section_text("dumps")[0][1].strip().startswith("dumps(obj, *, skipkeys=False")
    assert doc.section_text("JSONDecoder.decode")[0][1].strip(" |").startswith("decode(self, s")


# --- the tools, through the gate -----------------------------------------------------------


def test_search_finds_the_member_and_returns_ids_and_short_snippets(corpus: Corpus) -> None:
    result = gate_call("search_docs", {"query": "json dumps sort_keys", "limit": 3})
    assert not result["is_error"]
    rows = decode(result["content"])
    assert len(rows) == 3
    assert {"doc_id": "json", "section": "dumps"} in [
        {"doc_id": r["doc_id"], "section": r["section"]} for r in rows
    ]
    assert all(len(r["snippet"]) <= 160 for r in rows)
    assert len(result["content"].encode()) < 2_000  # json's pydoc alone is 23 kB


def test_a_pasted_document_is_refused_by_the_gate_before_any_tool_runs(corpus: Corpus) -> None:
    document = corpus.docs["typing"].text  # ~94 kB, as seed 003 §1's model pastes it
    for name, arguments in [
        ("analyze_text", {"doc_id": "typing", "question": document}),
        ("search_docs", {"query": document}),
        ("read_doc", {"doc_id": "typing", "section": document}),
    ]:
        result = gate_call(name, arguments)
        error = json.loads(result["content"])
        assert result["is_error"] and not result["executed"]
        assert error["kind"] == "arguments_too_large", error
        assert str(tools.MAX_ARG_BYTES) in error["message"] and error["hint"]


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("search_docs", {"query": "x" * 201}, "query"),
        ("search_docs", {"query": "json", "limit": 0}, "limit"),
        ("search_docs", {"query": "json", "limit": 21}, "limit"),
        ("analyze_text", {"doc_id": "json", "question": "q", "text": "the document"}, "text"),
        ("read_doc", {"doc_id": "json; rm -rf /"}, "doc_id"),
    ],
)
def test_each_field_limit_is_refused_with_a_structured_error(
    corpus: Corpus, name: str, arguments: dict[str, Any], field: str
) -> None:
    result = gate_call(name, arguments)
    error = json.loads(result["content"])
    assert result["is_error"] and not result["executed"]
    assert error["kind"] == "invalid_arguments" and field in error["message"], error


def test_the_schemas_state_the_limits_the_model_must_keep(corpus: Corpus) -> None:
    search = tools.search_docs.parameters["properties"]
    assert search["query"]["maxLength"] == 200
    assert (search["limit"]["minimum"], search["limit"]["maximum"]) == (1, 20)
    analyze = tools.analyze_text.parameters
    assert set(analyze["properties"]) == {"doc_id", "question"}  # an id, never the text
    assert analyze["additionalProperties"] is False


def test_read_doc_pages_by_cursor_round_trip_to_the_whole_document(
    corpus: Corpus, plane: DataPlane
) -> None:
    doc = corpus.docs["json"]
    pages = [tools.read_doc.function(doc_id="json")]
    while (cursor := parse(pages[-1]).header.next) is not None:
        again = tools.read_doc.function(doc_id="json", cursor=cursor)
        assert tools.read_doc.function(doc_id="json", cursor=cursor) == again  # byte for byte
        pages.append(again)
    assert len(pages) > 3 and all(len(p.encode()) <= tools.PAGE_BYTES for p in pages)
    rows = [row for page in pages for row in decode(page)]
    lines: dict[int, str] = {}
    for row in rows:
        lines[row["line"]] = lines.get(row["line"], "") + row["text"]
    assert lines == {n: line for n, line in doc.section_text(None) if line}
    first = parse(pages[0]).header
    assert first.extra["x-summary"].startswith("json whole document:")
    assert "FUNCTIONS" in first.extra["x-sections"].split(",")


def test_a_cursor_is_bound_to_its_document_section_and_signature(
    corpus: Corpus, plane: DataPlane
) -> None:
    cursor = parse(tools.read_doc.function(doc_id="typing")).header.next
    assert cursor is not None
    with pytest.raises(ToolError, check=lambda e: e.kind == "cursor_mismatch"):
        tools.read_doc.function(doc_id="typing", section="DATA", cursor=cursor)
    with pytest.raises(ToolError, check=lambda e: e.kind == "cursor_mismatch"):
        tools.read_doc.function(doc_id="ast", cursor=cursor)
    tampered = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
    with pytest.raises(ToolError, check=lambda e: e.kind == "cursor_invalid"):
        tools.read_doc.function(doc_id="typing", cursor=tampered)


def test_unknown_documents_and_sections_say_what_exists(corpus: Corpus, plane: DataPlane) -> None:
    with pytest.raises(ToolError) as caught:
        tools.read_doc.function(doc_id="jsno")
    assert caught.value.kind == "not_found" and "json" in (caught.value.hint or "")
    with pytest.raises(ToolError) as caught:
        tools.read_doc.function(doc_id="json", section="dumsp")
    assert caught.value.kind == "not_found" and "dumps" in (caught.value.hint or "")


def test_analyze_text_reads_the_document_by_id_and_finds_the_signature(corpus: Corpus) -> None:
    result = gate_call(
        "analyze_text", {"doc_id": "json", "question": "What is the default of sort_keys in dumps?"}
    )
    rows = decode(result["content"])
    assert rows[0]["section"] == "dumps" and "sort_keys=False" in rows[0]["text"]
    assert len(result["content"].encode()) <= 4_000


# --- the agent -----------------------------------------------------------------------------


def test_the_scripted_agent_answers_from_what_the_tools_returned(
    corpus: Corpus, plane: DataPlane, tmp_path: Path
) -> None:
    agent = Agent.from_file(EXAMPLE / "agent.toml", trace_dir=tmp_path)
    result = agent.run_sync("In json, what does dumps do with sort_keys, and what is its default?")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    results = [m for m in result.messages if getattr(m, "role", "") == "tool"]
    assert [r.name for r in results] == ["search_docs", "read_doc", "analyze_text"]
    assert not any(r.is_error for r in results)
    seen = "\n".join(r.content for r in results)
    assert "sort_keys=False" in seen and "sorted by key" in seen
    assert "sort_keys defaults to False" in (result.output or "")
    assert len(seen.encode()) < 8_000  # the json document is 23 kB; it never enters whole


# --- the suite ------------------------------------------------------------------------------


def test_the_suite_generator_is_deterministic(corpus: Corpus) -> None:
    assert make_suite.render_suite(corpus) == make_suite.render_suite(corpus)


def test_the_committed_suite_is_what_this_python_generates(corpus: Corpus) -> None:
    committed = (EXAMPLE / "suite.toml").read_text(encoding="utf-8")
    minor = re.search(r"pydoc of Python (\d+\.\d+)", committed)
    assert minor is not None
    if minor.group(1) != ".".join(corpus.python.split(".")[:2]):
        pytest.skip(f"suite.toml was generated on Python {minor.group(1)}")
    assert committed == make_suite.render_suite(corpus)


def test_every_expected_answer_occurs_in_the_corpus(corpus: Corpus) -> None:
    suite = tomllib.loads(make_suite.render_suite(corpus))
    assert suite["agent"] == "agent.toml" and (EXAMPLE / suite["agent"]).is_file()
    found = make_suite.cases(corpus)
    assert len(suite["case"]) == len(found) >= 30
    assert len({c["name"] for c in suite["case"]}) == len(found)
    for entry, case in zip(suite["case"], found, strict=True):
        assert set(entry) == {"name", "prompt", "expect_tools", "expect_output", "expect_stop"}
        assert entry["expect_tools"] == [{"name": "search_docs"}]
        assert entry["expect_stop"] == "final_answer"
        source = "\n".join(line for _, line in corpus.docs[case.doc_id].section_text(case.section))
        if case.name.startswith("module-"):
            assert case.doc_id in corpus.docs and case.section in corpus.docs[case.doc_id].sections
            assert re.search(entry["expect_output"], f"It is in {case.doc_id}.")
        else:
            assert re.search(entry["expect_output"], source.split("\n")[0]), case.name
        assert not re.search(entry["expect_output"], "I don't know."), case.name


def test_make_suite_check_fails_on_a_stale_file(
    corpus: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "suite.toml"
    stale.write_text("agent = 'agent.toml'\n", encoding="utf-8")
    monkeypatch.setattr(make_suite, "SUITE", stale)
    assert make_suite.main(["--check"]) == 1
    assert make_suite.main([]) == 0 and make_suite.main(["--check"]) == 0
    assert make_suite.main(["--bogus"]) == 2


# --- the benchmark ----------------------------------------------------------------------------


def test_bench_docs_counts_context_tokens_of_both_designs(corpus: Corpus, tmp_path: Path) -> None:
    ran = pi_inprocess("bench", "docs", "--limit", "3", "--json", "--out", str(tmp_path), cwd=REPO)

    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["bench"] == "docs" and result["questions"] == 3
    for row in result["rows"]:
        assert {"case", "doc_id", "doc_bytes", "pi_tokens", "naive_tokens", "ratio"} <= set(row)
        assert row["ratio"] == round(row["naive_tokens"] / row["pi_tokens"], 2)
        # the naive side carries the whole document twice (a result, then arguments)
        assert row["naive_peak"] > 2 * row["doc_bytes"] / 8
    pi = sum(r["pi_tokens"] for r in result["rows"])
    naive = sum(r["naive_tokens"] for r in result["rows"])
    assert result["ratio"] == round(naive / pi, 2)
    assert result["naive_calls_refused_by_gate"] == 3
    assert (tmp_path / "docs.json").is_file() and (tmp_path / "docs.csv").is_file()


def test_bench_docs_outside_a_checkout_says_where_to_run_it(tmp_path: Path) -> None:
    ran = pi_process("bench", "docs", "--limit", "1", cwd=tmp_path)  # a fresh interpreter
    assert ran.returncode == 2 and "run it from the Pi checkout" in ran.stderr
