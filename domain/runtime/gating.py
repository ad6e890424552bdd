"""Holding calls for approval before they run, as their policies say."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.policies import Approval, PolicyRef
from interlock.domain.chat.state import ToolCall
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.tools import SchemaError, Tool

# The tenant's data policies in force for the agent's tools now, by tool name: each as (its
# compiled policy, the version it is) (domain/policy_book.py).
InForce = Mapping[str, tuple[Approval, PolicyRef]]


def hold_for_approval(chat: Chat, agent: Agent, calls: list[ToolCall], now: datetime,
                      in_force: InForce | None = None) -> list[ToolCall]:
    """Hold each new call whose policy applies; the calls that may run now.

    A tool's data policy in force at `now` (of the chat's tenant) wins over the agent's code
    policy, and the held call records which version it was held under: it is judged by it
    until it is decided, whatever version comes into force meanwhile."""
    runnable = []
    in_force = in_force or {}
    for call in calls:
        policy, ref = agent.policy(call.name) if call.status == "requested" else None, None
        if call.status == "requested" and call.name in in_force:
            policy, ref = in_force[call.name]
        tool = agent.tool(call.name)
        if policy is None or tool is None or not _applies(policy, tool, call):
            runnable.append(call)
            continue
        terms = policy.terms(now, call.requester, _stages_apply(policy, tool, call))
        if ref is not None:
            terms = terms.model_copy(update={"policy": ref})
        chat.hold_for_approval(call.ref, terms)
    return runnable


def _applies(policy: Approval, tool: Tool, call: ToolCall) -> bool:
    """`when` of the validated input; an invalid input is left to fail when it runs."""
    try:
        value = tool.validate_input(call.input)
    except SchemaError:
        return False
    try:
        return policy.applies(value)
    except Exception:  # noqa: BLE001 - the author's `when` failed: fail closed, hold the call
        return True


def _stages_apply(policy: Approval, tool: Tool, call: ToolCall) -> list[bool] | None:
    """Which of a staged policy's stages the held call goes through (each `when` fails
    closed on its own)."""
    return policy.stages_apply(tool.validate_input(call.input)) if policy.stages else None
