"""Output contracts: a final answer must be one JSON object matching a strict schema.

The loop uses a contract in four moves: send `schema` (with `name` and `strict`) as the
provider's native structured output, or `instructions()` in the system prompt where there
is none; `validate` the final answer; on failure append `repair_message` as a user turn
and ask again, at most `max_repairs` times; then end with `contract_violation`, the
last check's `errors`, and the contract's `fallback` (if any) as the output.
"""

from .fulfillment import FULFILLMENT_EXAMPLE, FULFILLMENT_INTENTS, fulfillment_contract
from .spec import ContractCheck, OutputContract

__all__ = [
    "FULFILLMENT_EXAMPLE",
    "FULFILLMENT_INTENTS",
    "ContractCheck",
    "OutputContract",
    "fulfillment_contract",
]
