"""Tool retrieval: past a threshold, offer the model only the tools a request needs.

`ToolRetriever.select(query, tools)` ranks tools by embedding similarity (the shipped
all-MiniLM-L6-v2, computed offline with NumPy) or, when that model is unavailable, by
BM25, and returns a `Selection` to record in the trace.
"""

from .embedder import Embedder, EmbedderUnavailable, MiniLMEmbedder, default_embedder
from .selector import Selection, ToolRetriever, retrieval_query, tool_text

__all__ = [
    "Embedder",
    "EmbedderUnavailable",
    "MiniLMEmbedder",
    "Selection",
    "ToolRetriever",
    "default_embedder",
    "retrieval_query",
    "tool_text",
]
