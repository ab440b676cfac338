"""Long text answers (a sub-agent's report) into the data plane, read by page.

    plane = DataPlane(MemoryDataStore(), owner="alice")
    research = child.as_tool("research", "…", spill=spill_to(plane))
    parent = Agent(model, tools=[research, read_result_tool(plane)])

An answer too large for the parent's context is stored as a snapshot of QRP1 `table`
pages, one row per line (`n`, `text`; a line longer than a row may hold continues in the
next rows under the same `n`). The parent reads page 1, whose header carries the
reference (`x-ref`), a summary and the `next` cursor; `read_result` reads on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

from ..messages import repair_text
from ..tools import ToolSpec, tool
from .plane import DataPlane

__all__ = ["ANSWER_KIND", "read_result_tool", "spill_to"]

ANSWER_KIND = "answer"
_HEAD_ROOM = 1_200  # bytes of a page kept for its header (ids, cursor, summary)


def spill_to(plane: DataPlane) -> Callable[[str, str], str]:
    """A `spill` for `Agent.as_tool`: (answer, sub-agent name) → page 1 of the stored answer."""

    def spill(answer: str, name: str) -> str:
        answer = repair_text(answer)
        rows = list(_rows(answer, _row_chars(plane.pages.page_bytes)))
        lines = rows[-1]["n"]
        try:
            published = plane.publish(
                rows,
                kind_of=ANSWER_KIND,
                source=f"subagent:{name}",
                query={"subagent": name, "sha256": hashlib.sha256(answer.encode()).hexdigest()},
                kind="table",
                extra={
                    "x-summary": f"the answer of {name}: {lines} lines, {len(answer.encode())} bytes; "
                    "read on with read_result and the next cursor"
                },
            )
        except ValueError:  # a row QRP1 could not fit in a page: the gate cuts the text
            return answer
        return published.first.text

    return spill


def read_result_tool(plane: DataPlane, *, name: str = "read_result") -> ToolSpec:
    """A tool that reads a stored result of `plane` by page: page 1 of a reference, or the
    page a `next` cursor names."""

    def read_result(result: str, cursor: str | None = None) -> str:
        """Read a page of a stored result: page 1 without `cursor`, else the page the
        cursor names (the `next` of the page before).

        Args:
            result: the result's reference (`x-ref`), e.g. ref:ref-0a1b2c3d4e5f6789.
            cursor: the `next` of the previous page of this result.
        """
        if cursor is None:
            return plane.first_page(result).text
        return plane.read(cursor, reference=result).text

    return tool(name=name, max_result_bytes=max(plane.pages.page_bytes, 1_000))(read_result)


def _row_chars(page_bytes: int) -> int:
    # a character is at most 4 UTF-8 bytes, and QRP1 may escape some: room for 2x that
    return max(16, (page_bytes - _HEAD_ROOM) // 8)


def _rows(text: str, width: int) -> Iterator[dict[str, object]]:
    for number, line in enumerate(text.split("\n"), 1):
        for start in range(0, max(len(line), 1), width):
            yield {"n": number, "text": line[start : start + width]}
