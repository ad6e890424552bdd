"""The seed's banking agent, played by a deterministic FunctionModel.

userApproval always interrupts (the client answers with respond); transferMoney moves
money in an in-memory ledger (each chat its own account of $5,000), refuses what checking
cannot cover, and interrupts for amounts over its limit unless restarted with
`resumed_metadata={"override": true}` (or a smaller `replace_input`).

`treasuryBankingAgent` plays the same script under an approval policy instead: a
transfer over the limit is held before it runs until two principals of role `treasury`
approve it, and fails closed after an hour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import BaseModel, Field

from interlock.domain import (
    Agent,
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ToolContext,
    tool,
)
from interlock.domain import Approval as Policy
from interlock.domain import ToolRequest as Request

LIMIT = 1000.0
_TRANSFER = re.compile(r"transfer\s+\$?([0-9]+(?:\.[0-9]+)?)\s+to\s+(\w+)", re.IGNORECASE)


class UserApprovalInput(BaseModel):
    action: str = Field(description="The action to be approved")
    details: str = Field(description="Details about the action")


class Approval(BaseModel):
    approved: bool
    feedback: str | None = None


class TransferInput(BaseModel):
    amount: float = Field(gt=0)
    to_account: str = Field(min_length=1)


class TransferResult(BaseModel):
    status: str
    balance: float


OPENING = {"checking": 5000.0, "savings": 0.0}


class InsufficientFundsError(Exception):
    """The demo bank's refusal: checking cannot cover the transfer (the model is told)."""


@dataclass
class Ledger:
    """Each chat's own account (from OPENING: one demo cannot drain another's) plus the
    idempotency keys already applied (a repeat is dropped)."""

    accounts: dict[str, dict[str, float]] = field(default_factory=dict)
    applied: dict[str, TransferResult] = field(default_factory=dict)
    transfers: int = 0

    def balances(self, chat: str) -> dict[str, float]:
        return self.accounts.setdefault(chat, dict(OPENING))

    def check_cover(self, chat: str, amount: float) -> None:
        held = self.balances(chat)["checking"]
        if amount > held:
            raise InsufficientFundsError(
                f"checking holds ${held:,.2f}, the transfer needs ${amount:,.2f}")

    def transfer(self, chat: str, key: str, amount: float, to: str) -> TransferResult:
        if key in self.applied:
            return self.applied[key]
        self.check_cover(chat, amount)
        balances = self.balances(chat)
        balances["checking"] -= amount
        balances[to] = balances.get(to, 0.0) + amount
        self.transfers += 1
        self.applied[key] = TransferResult(status="done", balance=balances["checking"])
        return self.applied[key]


LEDGER = Ledger()


@tool(
    name="userApproval",
    description="Ask the user for approval before a sensitive action.",
    side_effects=False,
    interrupts=True,
)
async def user_approval(input: UserApprovalInput, ctx: ToolContext) -> Approval:
    ctx.interrupt({"reason": input.action})


@tool(
    name="transferMoney",
    description="Move money from checking to another account.",
    interrupts=True,
)
async def transfer_money(input: TransferInput, ctx: ToolContext) -> TransferResult:
    LEDGER.check_cover(ctx.chat_id, input.amount)  # no approval asked for the impossible
    if input.amount > LIMIT and not (ctx.resumed or {}).get("override"):
        ctx.interrupt({"reason": "over_limit", "limit": LIMIT})
    return LEDGER.transfer(ctx.chat_id, ctx.idempotency_key, input.amount, input.to_account)


def _reply(*parts: Part) -> ModelResponse:
    return ModelResponse(message=Message(role="model", content=list(parts)))


def _last_transfer(request: ModelRequest) -> tuple[float, str] | None:
    for message in reversed(request.messages):
        if message.role == "user":
            match = _TRANSFER.search(message.text)
            return (float(match[1]), match[2].lower()) if match else None
    return None


def banking_script(request: ModelRequest) -> ModelResponse:
    """Plays the banking conversation from the history alone (no hidden state)."""
    last = request.messages[-1]
    if last.role == "user":
        wanted = _last_transfer(request)
        if wanted is None:
            return _reply(Part(text="I can move money between your accounts. What should I do?"))
        amount, to = wanted
        return _reply(
            Part(
                tool_request=Request(
                    name="userApproval",
                    input={"action": "transfer", "details": f"Transfer ${amount:g} to {to}"},
                )
            )
        )
    response = last.content[-1].tool_response
    assert response is not None
    output = response.output if isinstance(response.output, dict) else {}
    if response.name == "userApproval":
        if not output.get("approved"):
            return _reply(Part(text=f"Transfer cancelled. {output.get('feedback') or ''}".strip()))
        amount, to = _last_transfer(request) or (0.0, "savings")
        return _reply(
            Part(
                tool_request=Request(
                    name="transferMoney", input={"amount": amount, "to_account": to}
                )
            )
        )
    if "error" in output:
        return _reply(Part(text=f"The transfer failed: {output['error']}"))
    if output.get("rejected") or output.get("expired") or output.get("withdrawn"):
        why = output.get("reason") or ("it expired" if output.get("expired") else "")
        return _reply(Part(text=f"The transfer was not made: {why}".strip()))
    return _reply(
        Part(text=f"Done. Your checking balance is now ${output.get('balance', 0):,.2f}.")
    )


banking = Agent(
    name="bankingAgent",
    system="If the user wants to transfer money, ALWAYS use userApproval.",
    tools=[user_approval, transfer_money],
    model=FunctionModel(banking_script, name="banking-script"),
    description="Moves money between accounts after the user approves.",
)

OVER_LIMIT = Policy(when=lambda t: t.amount > LIMIT, roles=["treasury"], quorum=2,
                    expires_in=timedelta(hours=1))


@tool(name="transferMoney", description="Move money from checking to another account.")
async def treasury_transfer(input: TransferInput, ctx: ToolContext) -> TransferResult:
    return LEDGER.transfer(ctx.chat_id, ctx.idempotency_key, input.amount, input.to_account)


treasury_banking = Agent(
    name="treasuryBankingAgent",
    system="If the user wants to transfer money, ALWAYS use userApproval.",
    tools=[user_approval, treasury_transfer],
    model=FunctionModel(banking_script, name="banking-script"),
    description="Moves money; transfers over the limit need two treasury approvers.",
    approvals={"transferMoney": OVER_LIMIT},
)

AGENTS = [banking, treasury_banking]
