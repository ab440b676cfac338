"""Guardrails: checks at a run's transition points (seed 001 §3.6, §10).

A guardrail takes a value and returns `Allow()`, `Deny(reason)` or `Rewrite(value)`:

    from pi_runtime import Agent, Allow, Deny, Guardrails
    from pi_runtime.guardrails import sql_select_only

    def no_secrets(text: str) -> Allow | Deny:
        return Deny("asks for credentials") if "password" in text.lower() else Allow()

    agent = Agent(model, tools=[run_sql],
                  guardrails=Guardrails(input=[no_secrets], tools={"run_sql": [sql_select_only]}))

Input checks guard the user's message, output checks the final answer (a deny ends the
run `security`), tool checks a call's arguments (a deny refuses the call with
`permission_denied`; the model reads why). See docs/guardrails.md.
"""

from .chain import Guardrails, Screened, Stage, Trip, screen
from .refs import check_ref, load_callable
from .sql import SqlSelectOnly, select_problem, sql_select_only
from .verdicts import Allow, Deny, Guardrail, Rewrite, Verdict, guardrail_name

__all__ = [
    "Allow",
    "Deny",
    "Guardrail",
    "Guardrails",
    "Rewrite",
    "Screened",
    "SqlSelectOnly",
    "Stage",
    "Trip",
    "Verdict",
    "check_ref",
    "guardrail_name",
    "load_callable",
    "screen",
    "select_problem",
    "sql_select_only",
]
