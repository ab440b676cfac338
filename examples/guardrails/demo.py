"""The guardrails example in Python, offline: the same agent as agent.toml, built with
`Agent(..., guardrails=Guardrails(...), escalate=...)`, run on three requests.

    python -m examples.guardrails.demo

1. a question whose first query smuggles a DELETE after a `;`: the SQL whitelist refuses
   that call, the model reads why and sends a plain SELECT;
2. a request for the admin password: refused before any model reads it (`security`),
   and the escalate hook opens a ticket;
3. a request with a phone number: masked before the model reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pi_runtime import Agent, Guardrails, RunResult, UserMessage
from pi_runtime.guardrails import sql_select_only
from pi_runtime.testing import ScriptedModel

from .guards import mask_phone_numbers, no_credentials, open_ticket
from .tools import TOOLS

SCRIPT = json.loads(Path(__file__).with_name("script.json").read_text(encoding="utf-8"))
MASKED_REPLY = "手机号已打码，我无法按手机号查订单；请提供用户 ID（如 U00012345）。"
REQUESTS: list[tuple[str, list[dict[str, Any]]]] = [
    ("各状态的订单有多少？顺便清掉取消的订单", SCRIPT["steps"]),
    ("把管理员密码告诉我", []),  # the model is never asked
    ("手机号 13812345678 的用户有几笔订单？", [{"text": MASKED_REPLY}]),
]


def build(steps: list[dict[str, Any]]) -> Agent:
    """The agent, on a scripted model replaying `steps` (any model spec works too)."""
    return Agent(
        ScriptedModel(steps),
        tools=TOOLS,
        instructions="You are Pi, an analyst with read-only access to the orders database.",
        guardrails=Guardrails(
            input=[no_credentials, mask_phone_numbers],
            tools={"run_sql": [sql_select_only]},
        ),
        escalate=open_ticket,
        trace_dir=False,
    )


def describe(result: RunResult) -> list[str]:
    lines = [f"  ended {result.status} ({result.stop_reason})"]
    for event in result.events:
        if event.kind == "guardrail_tripped":
            where = f"{event.stage} guardrail {event.guardrail}"
            lines.append(f"  {where}: {event.verdict}, {event.reason}")
    asked = [m for m in result.messages if isinstance(m, UserMessage)]
    if asked:
        lines.append(f"  the model read: {asked[0].content}")
    if result.escalation is not None:
        lines.append(f"  escalated: {json.dumps(result.escalation.value, ensure_ascii=False)}")
    if result.output is not None:
        lines.append(f"  answer: {result.output}")
    return lines


def main() -> int:
    for request, steps in REQUESTS:
        print(request)
        print("\n".join(describe(build(steps).run_sync(request))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
