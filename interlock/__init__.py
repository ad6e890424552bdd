"""Interlock: an event-sourced agent service whose tools may pause for a human's yes.

The authoring API lives here; the client is `interlock.client`, the service `interlock.domain`.
"""

from interlock.domain.agent import Agent
from interlock.domain.approvals import Approval
from interlock.domain.messages import Message, Part
from interlock.domain.models import FunctionModel, ModelRequest, ModelResponse
from interlock.domain.subagents import agent_tool
from interlock.domain.tool_middleware import ToolInvocation, ToolNext
from interlock.domain.tools import ToolContext, tool

__all__ = [
    "Agent",
    "Approval",
    "FunctionModel",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "ToolContext",
    "ToolInvocation",
    "ToolNext",
    "agent_tool",
    "tool",
]
