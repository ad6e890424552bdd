"""Interlock: an event-sourced agent service whose tools may pause for a human's yes.

The authoring API lives here; the client is `interlock.client`, the service `interlock.domain`.
"""

from interlock.domain.chat.messages import Message, Part
from interlock.domain.chat.policies import Approval, ToolMatch
from interlock.domain.chat.stages import Stage
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.middleware import ToolInvocation, ToolNext
from interlock.domain.runtime.models import FunctionModel, ModelRequest, ModelResponse
from interlock.domain.runtime.subagents import agent_tool
from interlock.domain.runtime.tools import ToolContext, tool

__all__ = [
    "Agent",
    "Approval",
    "FunctionModel",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "Stage",
    "ToolContext",
    "ToolInvocation",
    "ToolMatch",
    "ToolNext",
    "agent_tool",
    "tool",
]
