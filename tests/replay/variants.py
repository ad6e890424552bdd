"""New versions of the banking agents, each changed in one way a team might change it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from interlock.domain import (
    Agent,
    Approval,
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ToolInvocation,
    ToolNext,
)
from interlock.examples.banking import AGENTS, banking, banking_script, treasury_banking

UNCHANGED = AGENTS
NEW_PROMPT = "Before moving money, ALWAYS ask with userApproval and name the amount."


def prompt_changed() -> list[Agent]:
    return [replace(banking, system=NEW_PROMPT), treasury_banking]


async def to_upper_account(call: ToolInvocation, next: ToolNext) -> Any:
    """A new middleware that normalises the account name before the transfer runs."""
    if call.name == "transferMoney":
        call = call.with_input({**call.input, "to_account": call.input["to_account"].upper()})
    return await next(call)


def tool_input_changed() -> list[Agent]:
    return [replace(banking, tool_middleware=[to_upper_account]), treasury_banking]


def with_fee(request: ModelRequest) -> ModelResponse:
    """The banking script, but a transfer asks for the amount plus a $5 fee."""
    reply = banking_script(request)
    parts = []
    for part in reply.message.content:
        asked = part.tool_request
        if asked is not None and asked.name == "transferMoney":
            asked = asked.model_copy(update={"input": {**asked.input,
                                                       "amount": asked.input["amount"] + 5}})
            part = part.model_copy(update={"tool_request": asked})
        parts.append(part)
    return reply.model_copy(update={"message": reply.message.model_copy(
        update={"content": parts})})


def amount_changed() -> list[Agent]:
    """The model now asks for another amount than the humans approved (a live script)."""
    model = FunctionModel(with_fee, name="banking-script")
    return [replace(banking, model=model), replace(treasury_banking, model=model)]


EVERY_TRANSFER = Approval(when=lambda t: t.amount > 100, roles=["approver"])


def policy_changed() -> list[Agent]:
    """A new policy on the banking agent, a larger quorum on the treasury agent's."""
    treasury = dict(treasury_banking.approvals)
    treasury["transferMoney"] = replace(treasury["transferMoney"], quorum=3)
    return [replace(banking, approvals={"transferMoney": EVERY_TRANSFER}),
            replace(treasury_banking, approvals=treasury)]


# For `--agents tests.replay.variants:NAME` (the CLI loads a module attribute).
PROMPT_CHANGED = prompt_changed()
POLICY_CHANGED = policy_changed()
