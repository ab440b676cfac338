"""Context: what the model reads each turn (system prompt, token counts)."""

from .prompt import OUTPUT_DISCIPLINE, render_system_prompt
from .tokens import TokenizerUnavailable, count_tokens

__all__ = ["OUTPUT_DISCIPLINE", "TokenizerUnavailable", "count_tokens", "render_system_prompt"]
