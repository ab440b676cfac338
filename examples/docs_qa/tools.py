"""Long-document QA tools that pass identifiers, never text (seed 003).

    pi run "What does json.dumps do with sort_keys, and what is its default?" \
        --agent examples/docs_qa/agent.toml

- `search_docs(query, limit)` → document ids, sections and a short snippet each;
- `read_doc(doc_id, section, cursor)` → the section's lines as QRP1 pages of at most
  `PAGE_BYTES`, through the data plane: page 1 carries a summary and `next`, a signed
  cursor bound to the document, section and corpus version;
- `analyze_text(doc_id, question)` → the passages of that document that answer the
  question. It takes the id: the text stays here, never in the model's arguments.

Every argument is bounded (a query ≤ 200 characters, `limit` 1–20, ids ≤ 64) and each
call's arguments ≤ `MAX_ARG_BYTES` in all, so the gate refuses a pasted document before any
tool runs. The corpus is the installed Python's own pydoc (corpus.py).

Pages live in `$PI_DOCS_DB` (a store URL) or in memory; `$PI_DOCS_OWNER` names the owner.
"""

from __future__ import annotations

import difflib
import os
import threading
from typing import Annotated, Any

from pydantic import Field

from pi_runtime import ToolError, tool
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.plane import DataPlane
from pi_runtime.data.storage import DataStore
from pi_runtime.qrp1 import encode

from .corpus import Corpus, Doc, load_corpus
from .index import Index, analyze

PAGE_BYTES = 3_000
MAX_ARG_BYTES = 1_024
MAX_LINE_CHARS = 400
DOC_KIND = "doc"
SORT = "line asc"

DocId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")]
Query = Annotated[str, Field(min_length=1, max_length=200)]
Limit = Annotated[int, Field(ge=1, le=20)]
Section = Annotated[str, Field(min_length=1, max_length=100)]
Question = Annotated[str, Field(min_length=1, max_length=300)]
Cursor = Annotated[str, Field(min_length=1, max_length=200)]

_lock = threading.Lock()
_plane: DataPlane | None = None
_library: tuple[Corpus, Index] | None = None


def library() -> tuple[Corpus, Index]:
    """The corpus and its index, made on first use (the corpus from the cache if kept)."""
    global _library
    with _lock:
        if _library is None:
            corpus = load_corpus()
            _library = (corpus, Index(corpus))
        return _library


def plane() -> DataPlane:
    """The tools' data plane, made on first use from the environment."""
    global _plane
    with _lock:
        if _plane is None:
            url = os.environ.get("PI_DOCS_DB")
            store: DataStore
            if url:
                from pi_runtime.durable import open_store

                store = open_store(url)
            else:
                store = MemoryDataStore()
            owner = os.environ.get("PI_DOCS_OWNER", "reader")
            _plane = DataPlane(store, owner=owner, page_bytes=PAGE_BYTES)
        return _plane


def use_plane(new: DataPlane | None) -> None:
    """Make the tools use `new` (None: made again from the environment on next use)."""
    global _plane
    with _lock:
        _plane = new


def _doc(doc_id: str) -> Doc:
    corpus, _ = library()
    doc = corpus.docs.get(doc_id)
    if doc is None:
        near = difflib.get_close_matches(doc_id, list(corpus.docs), n=3)
        raise ToolError(
            f"no document {doc_id!r}",
            kind="not_found",
            hint=(f"Did you mean {', '.join(near)}? " if near else "")
            + "Ids are module names from search_docs, e.g. json or email.message.",
        )
    return doc


def _section(doc: Doc, section: str | None) -> str | None:
    if section is None or section in doc.sections:
        return section
    near = difflib.get_close_matches(section, list(doc.sections), n=5, cutoff=0.5)
    tops = [s for s in doc.sections if s.isupper()]
    raise ToolError(
        f"{doc.id} has no section {section!r}",
        kind="not_found",
        hint=(f"Close: {', '.join(near)}. " if near else "")
        + f"Sections: {', '.join(tops)}; or a member name from search_docs.",
    )


def _rows(doc: Doc, section: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number, line in doc.section_text(section):
        for at in range(0, len(line), MAX_LINE_CHARS):  # blank lines are left out
            rows.append({"line": number, "text": line[at : at + MAX_LINE_CHARS]})
    return rows


@tool(max_arg_bytes=MAX_ARG_BYTES, max_result_bytes=4_000)
def search_docs(query: Query, limit: Limit = 5) -> str:
    """Search the Python standard library's documentation. Returns document ids, sections
    and a short snippet each (QRP1 table); read more with read_doc or analyze_text.

    Args:
        query: a few keywords, e.g. "json dumps sort_keys" (at most 200 characters).
        limit: how many results, 1 to 20.
    """
    corpus, index = library()
    hits = index.search(query, limit)
    rows = [
        {"doc_id": h.doc_id, "section": h.section, "score": h.score, "snippet": h.snippet}
        for h in hits
    ]
    if not rows:
        raise ToolError(
            f"nothing matches {query!r}",
            kind="not_found",
            hint="Use other keywords: names of functions, classes or modules work best.",
        )
    return encode(rows, kind="table", source=f"pydoc:python-{corpus.python}")


@tool(max_arg_bytes=MAX_ARG_BYTES, max_result_bytes=PAGE_BYTES + 500)
def read_doc(doc_id: DocId, section: Section | None = None, cursor: Cursor | None = None) -> str:
    """Read a document's section as pages of numbered lines (QRP1 table). Page 1 says how
    long it is; `next` in its header reads on (pass it as cursor, same doc_id and section).

    Args:
        doc_id: a document id from search_docs, e.g. json.
        section: a member (dumps, JSONDecoder.decode) or a section (DESCRIPTION, DATA);
            omitted: the whole document, from the start.
        cursor: the `next` of the previous page.
    """
    corpus, _ = library()
    doc = _doc(doc_id)
    name = _section(doc, section)
    locator = {"doc_id": doc_id, "section": name or ""}
    if cursor is not None:
        return plane().read(cursor, query=locator, sort=SORT, version=corpus.version).text
    rows = _rows(doc, name)
    size = sum(len(r["text"].encode()) + 1 for r in rows)
    tops = ",".join(s for s in doc.sections if s.isupper())
    extra = {"x-summary": f"{doc_id} {name or 'whole document'}: {len(rows)} lines, {size} bytes"}
    if name is None or name.isupper():
        extra["x-sections"] = tops
    published = plane().publish(
        rows,
        kind_of=DOC_KIND,
        source=f"pydoc:{doc_id}",
        query=locator,
        sort=SORT,
        version=corpus.version,
        kind="table",
        extra=extra,
    )
    return published.first.text


@tool(max_arg_bytes=MAX_ARG_BYTES, max_result_bytes=4_000)
def analyze_text(doc_id: DocId, question: Question) -> str:
    """Find the signatures and sentences of one document that answer a question. Give the
    document's id, never its text: the tool reads the document itself.

    Args:
        doc_id: a document id from search_docs, e.g. json.
        question: what you want to know, e.g. "default of sort_keys in dumps".
    """
    doc = _doc(doc_id)
    found = analyze(doc, question)
    if not found:
        raise ToolError(
            f"nothing in {doc_id} matches the question",
            kind="not_found",
            hint="Name the function or class you mean, or search_docs for another document.",
        )
    rows = [{"section": f.section, "line": f.line, "text": f.text[:MAX_LINE_CHARS]} for f in found]
    return encode(rows, kind="table", source=f"analyze:{doc_id}")


TOOLS = [search_docs, read_doc, analyze_text]
