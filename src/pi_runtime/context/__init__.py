"""Context: what the model reads each turn — prompts, token counts, the layered builder."""

from .budget import Budget
from .builder import BuiltContext, ContextBuilder, MemoryLayer
from .consumed import withheld_notice
from .note import message_text
from .presets import INJECTION_REPLY, PRESETS, Preset
from .prompt import (
    OUTPUT_DISCIPLINE,
    SUBAGENT_DISCIPLINE,
    PromptParts,
    as_parts,
    prompt_values,
    render_system_prompt,
    runtime_block,
    tool_summary,
)
from .roles import ROLES, Role, RolePrompt, render_role
from .summary import ModelSummariser, Summariser, model_summariser
from .templates import PromptTemplate, load_template
from .tokens import TokenizerUnavailable, count_tokens

__all__ = [
    "INJECTION_REPLY",
    "OUTPUT_DISCIPLINE",
    "PRESETS",
    "ROLES",
    "SUBAGENT_DISCIPLINE",
    "Budget",
    "BuiltContext",
    "ContextBuilder",
    "MemoryLayer",
    "ModelSummariser",
    "Preset",
    "PromptParts",
    "PromptTemplate",
    "Role",
    "RolePrompt",
    "Summariser",
    "TokenizerUnavailable",
    "as_parts",
    "count_tokens",
    "load_template",
    "message_text",
    "model_summariser",
    "prompt_values",
    "render_role",
    "render_system_prompt",
    "runtime_block",
    "tool_summary",
    "withheld_notice",
]
