"""Context: what the model reads each turn — prompts, token counts, the layered builder."""

from .budget import Budget
from .builder import (
    BuiltContext,
    ContextBuilder,
    MemoryLayer,
    Summariser,
    message_text,
    model_summariser,
)
from .prompt import (
    OUTPUT_DISCIPLINE,
    SUBAGENT_DISCIPLINE,
    PromptParts,
    render_system_prompt,
    runtime_block,
    tool_summary,
)
from .templates import PromptTemplate, load_template
from .tokens import TokenizerUnavailable, count_tokens

__all__ = [
    "OUTPUT_DISCIPLINE",
    "SUBAGENT_DISCIPLINE",
    "Budget",
    "BuiltContext",
    "ContextBuilder",
    "MemoryLayer",
    "PromptParts",
    "PromptTemplate",
    "Summariser",
    "TokenizerUnavailable",
    "count_tokens",
    "load_template",
    "message_text",
    "model_summariser",
    "render_system_prompt",
    "runtime_block",
    "tool_summary",
]
