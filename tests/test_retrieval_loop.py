"""Tool retrieval in the loop: past the threshold each call offers the selected tools,
the selection is in the trace, and the gate still serves any allowed tool."""

from __future__ import annotations

from pi_runtime import Agent, tool
from pi_runtime.testing import ScriptedModel
from pi_runtime.tools import ToolSpec
from pi_runtime.tools.retrieval import ToolRetriever


def _tools() -> list[ToolSpec]:
    topics = [
        "weather forecast for a city",
        "send an email",
        "book a meeting room",
        "convert currency",
        "track a parcel",
        "translate text",
        "search files",
        "create a todo item",
    ]
    made = []
    for i, topic in enumerate(topics * 3):

        def fn(q: str) -> str:
            return "ok"

        fn.__name__ = f"tool_{i}"
        made.append(tool(description=f"Use to {topic} (variant {i}).")(fn))
    return made


def test_past_the_threshold_only_selected_tools_are_offered_and_recorded() -> None:
    tools = _tools()
    model = ScriptedModel(
        [{"tool_calls": [{"name": "tool_23", "arguments": {"q": "x"}}]}, {"text": "done"}]
    )
    retriever = ToolRetriever(threshold=10, top_k=4, always_include=["tool_23"], embedder=None)
    result = Agent(model, tools=tools, tool_retrieval=retriever, trace_dir=False).run_sync(
        "please send an email to my boss"
    )
    assert result.status == "completed"
    offered = [d.name for d in model.requests[0].tools]
    assert 4 <= len(offered) <= 5 and "tool_23" in offered
    selections = [e for e in result.events if e.kind == "tool_selection"]
    assert (
        selections and selections[0].method == "bm25" and selections[0].selected == tuple(offered)
    )
    assert any(
        "email" in tools[int(n.split("_")[1])].description for n in offered if n != "tool_23"
    )
    # the call ran even though retrieval decides per call what the model sees
    assert [m.tool_call_id for m in result.messages if m.role == "tool"] == ["call_0_0"]


def test_under_the_threshold_every_tool_is_offered() -> None:
    tools = _tools()[:5]
    model = ScriptedModel([{"text": "hi"}])
    retriever = ToolRetriever(threshold=10, embedder=None)
    Agent(model, tools=tools, tool_retrieval=retriever, trace_dir=False).run_sync("hello")
    assert [d.name for d in model.requests[0].tools] == [t.name for t in tools]
