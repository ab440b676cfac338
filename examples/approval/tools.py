"""Customer-support tools for the human-approval demo: an order lookup that runs at once,
and a refund that moves money, so a person approves each call first (the agent file
lists it under `approval`). Closing an account is marked in code instead.

    pi run "Order A-1001 arrived broken, please refund it" --session support-1 \
        --agent examples/approval/agent.toml        # exit 3: awaiting_approval
    pi session show support-1                     # the call, its arguments, fingerprint
    pi approve support-1 call_0_1                 # runs it once, continues the session
    pi reject support-1 call_0_1 --reason "…"     # or: the model hears why, and goes on

Refunds are appended to a ledger file (`$PI_REFUND_LEDGER`, default
`.pi/refunds.jsonl`), keyed by the call's idempotency key, as a payment provider would:
the same key twice refunds once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pi_runtime import ToolError, tool

ORDERS = {
    "A-1001": {"order_id": "A-1001", "item": "ceramic teapot", "paid": 48.0, "status": "delivered"},
    "A-1002": {"order_id": "A-1002", "item": "tea towels", "paid": 12.5, "status": "shipped"},
}


def ledger_path() -> Path:
    return Path(os.environ.get("PI_REFUND_LEDGER", ".pi/refunds.jsonl"))


def ledger() -> list[dict[str, object]]:
    """Every refund made so far."""
    path = ledger_path()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@tool
def lookup_order(order_id: str) -> dict[str, object]:
    """An order: its item, what was paid and where it is.

    Args:
        order_id: e.g. A-1001.
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise LookupError(f"no order {order_id}")
    return order


@tool(idempotent=False)
def refund(order_id: str, amount: float, reason: str, idempotency_key: str) -> dict[str, object]:
    """Refund money for an order (needs a person's approval).

    Args:
        order_id: the order to refund.
        amount: how much, at most what was paid.
        reason: why, in a few words.
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise LookupError(f"no order {order_id}")
    if not 0 < amount <= float(str(order["paid"])):
        raise ToolError(f"amount must be more than 0 and at most {order['paid']}")
    for entry in ledger():
        if entry["key"] == idempotency_key:  # already refunded under this call
            return {
                "refund_id": entry["refund_id"],
                "order_id": order_id,
                "amount": entry["amount"],
            }
    entry = {
        "refund_id": f"R-{len(ledger()) + 1:04d}",
        "order_id": order_id,
        "amount": amount,
        "reason": reason,
        "key": idempotency_key,
    }
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return {"refund_id": entry["refund_id"], "order_id": order_id, "amount": amount}


@tool(requires_approval=True, idempotent=False)
def close_account(customer_id: str) -> str:
    """Close a customer's account for good (always needs a person's approval).

    Args:
        customer_id: the customer.
    """
    return f"account {customer_id} closed"


TOOLS = [lookup_order, refund, close_account]
