"""The one exception hierarchy `exceptions.py` draws: errors under `PiError`, and the
signals tools raise to the runtime kept outside it."""

from __future__ import annotations

import pytest

import pi_runtime
from pi_runtime.context import TokenizerUnavailable
from pi_runtime.exceptions import (
    DependencyUnavailable,
    PiError,
    SecurityViolation,
    ToolError,
    ToolFailure,
    TransientError,
    UnrecoverableError,
    UserError,
)
from pi_runtime.tools.retrieval import EmbedderUnavailable


@pytest.mark.parametrize("unavailable", [TokenizerUnavailable, EmbedderUnavailable])
def test_a_missing_optional_package_is_a_pi_user_error(unavailable: type[Exception]) -> None:
    assert issubclass(unavailable, DependencyUnavailable)
    assert issubclass(unavailable, UserError)
    assert issubclass(unavailable, PiError)


def test_the_tokenizer_error_is_still_a_runtime_error_for_older_handlers() -> None:
    assert issubclass(TokenizerUnavailable, RuntimeError)


@pytest.mark.parametrize(
    "signal", [ToolFailure, ToolError, TransientError, UnrecoverableError, SecurityViolation]
)
def test_tool_signals_are_outside_the_error_tree(signal: type[Exception]) -> None:
    assert issubclass(signal, ToolFailure)
    assert not issubclass(signal, PiError)
    with pytest.raises(ToolFailure):
        raise signal("no such city", hint="try another")


def test_catching_pi_errors_does_not_swallow_a_tool_signal() -> None:
    with pytest.raises(ToolError):
        try:
            raise ToolError("no such city")
        except PiError:  # pragma: no cover - the point is that this does not run
            pytest.fail("a tool signal was caught as a Pi error")


def test_the_public_package_exports_the_same_classes() -> None:
    assert pi_runtime.ToolError is ToolError
    assert pi_runtime.PiError is PiError
