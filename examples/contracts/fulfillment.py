"""Seed 002's `fulfillment` contract as a pydantic model, with a check the schema can't make.

Usage::

    from pi_runtime.contract import OutputContract
    from examples.contracts.fulfillment import FulfillmentAnswer

    contract = OutputContract.from_model(FulfillmentAnswer, name="fulfillment", strict=False)
    check = contract.validate(final_text)
    if check.ok:
        answer = check.instance          # a FulfillmentAnswer
        show(answer.fulfillment.speech)  # to the user
        route(answer.fulfillment.intent, answer.fulfillment.data)  # to the application
    else:
        follow_up = contract.repair_message(check)  # the user turn asking for a fix

`data` is free-form (`dict[str, Any]`), which strict decoding cannot enforce, hence
`strict=False`: the answer is still validated in full and every other object is closed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Intent = Literal["weather_query", "meeting_room_booking", "create_todo", "general_chat"]


class Fulfillment(BaseModel):
    """What the user hears, what the application gets, and why it may have failed."""

    model_config = ConfigDict(extra="forbid")

    speech: str = Field(description="What the user reads: plain, short sentences.")
    data: dict[str, Any] = Field(
        description="Structured results for the application ({} if none); never a copy of speech."
    )
    intent: Intent = Field(description="The user's intent.")
    errors: list[str] = Field(description="What went wrong, one entry each; [] if nothing did.")

    @model_validator(mode="after")
    def _data_is_not_the_speech(self) -> Fulfillment:
        # seed 002 §4.3: without an example, models copy the whole reply into `data`
        if not self.speech.strip():
            raise ValueError("speech must say something to the user")
        if any(isinstance(v, str) and v.strip() == self.speech.strip() for v in self.data.values()):
            raise ValueError("data repeats speech; put structured values in data")
        return self


class FulfillmentAnswer(BaseModel):
    """The whole final answer: `{"fulfillment": {...}}`."""

    model_config = ConfigDict(extra="forbid")

    fulfillment: Fulfillment
