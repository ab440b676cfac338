"""Pi's exceptions, and the signals tools raise to the runtime.

Errors::

    PiError
    ├── UserError                 misuse before a run starts (bad spec, bad tool definition)
    │   └── DependencyUnavailable an optional package Pi needs is missing or broken
    │       ├── TokenizerUnavailable   the o200k_base token counter (also `RuntimeError`)
    │       └── EmbedderUnavailable    the MiniLM embedder of tool retrieval
    └── ModelError                a model call failed; `transient` says whether to retry

Elsewhere, kept beside the code that raises them (each a `PiError`):
`qrp1.QRPError` (→ `QRPEncodeError`, `QRPDecodeError`; also `ValueError`) and
`durable.errors.StoreError` (→ `NotFound`, `Conflict`, `LeaseLost`, `StoreUnavailable`).

Control signals, outside the error tree: a tool raises one to tell the runtime how its
failure should be treated, and the runtime never lets one escape a run, so catching
`PiError` never swallows them (and catching them never hides a Pi error)::

    ToolFailure
    ├── ToolError             semantic: goes back to the model as {kind, message, hint}
    ├── TransientError        retried with backoff, then goes back to the model
    ├── UnrecoverableError    the run stops with `tool_error`
    └── SecurityViolation     the run stops with `security` and an audit event

Tools may also raise plain exceptions: the runtime classifies them (`TimeoutError`,
`ConnectionError` are transient; `LookupError` is `not_found`; anything else is semantic).
Runs never raise these at their caller: every ending is a `RunResult`.
"""

from __future__ import annotations

__all__ = [
    "DependencyUnavailable",
    "EmbedderUnavailable",
    "ModelError",
    "PiError",
    "SecurityViolation",
    "TokenizerUnavailable",
    "ToolError",
    "ToolFailure",
    "TransientError",
    "UnrecoverableError",
    "UserError",
]


class PiError(Exception):
    """Base of every exception Pi defines."""


class UserError(PiError):
    """Pi was used wrongly: raised before a run starts, never during one."""


class DependencyUnavailable(UserError):
    """An optional package Pi needs is not installed, incomplete, or not the expected one.

    The message ends with the command that installs it.
    """


class TokenizerUnavailable(DependencyUnavailable, RuntimeError):
    """The shipped o200k_base file is missing, unreadable, or not the expected one."""


class EmbedderUnavailable(DependencyUnavailable):
    """The embedding model cannot be used here: not installed, incomplete, or not the expected one."""


class ModelError(PiError):
    """A model call failed.

    Args:
        message: what went wrong, in words a user can act on.
        transient: True when the same call may succeed later (rate limit, 5xx, timeout).
        retry_after_s: the provider's hint of when to retry, if it gave one.
    """

    def __init__(
        self, message: str, *, transient: bool = False, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient
        self.retry_after_s = retry_after_s


class ToolFailure(Exception):
    """A failure a tool raises on purpose, carrying what the model should read.

    A signal to the runtime, not a Pi error: it is not a `PiError`.
    """

    default_kind = "tool_error"

    def __init__(self, message: str, *, kind: str | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or self.default_kind
        self.hint = hint


class ToolError(ToolFailure):
    """Semantic failure: the model can fix it (bad value, nothing found, …)."""


class TransientError(ToolFailure):
    """Temporary failure: the runtime retries with backoff before telling the model."""

    default_kind = "transient"


class UnrecoverableError(ToolFailure):
    """A failure the model cannot fix (lost database, expired key): the run stops."""

    default_kind = "unrecoverable"


class SecurityViolation(ToolFailure):
    """An attempt the runtime must not serve (injection, forbidden access): the run stops."""

    default_kind = "security"
