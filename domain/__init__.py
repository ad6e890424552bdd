"""Interlock's domain: the Chat aggregate, the turn loop and the authoring API."""

from interlock.domain.application import Interlock
from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.messages import Message, Part, ToolRequest, ToolResponse
from interlock.domain.chat.policies import Approval, Decider
from interlock.domain.chat.rules import (
    ApproveEntry,
    EditEntry,
    RejectEntry,
    RespondEntry,
    RestartEntry,
)
from interlock.domain.results import Interrupt, StreamEvent, TurnResult
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.middleware import ToolInvocation, ToolMiddleware, ToolNext
from interlock.domain.runtime.models import (
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ToolDefinition,
    Usage,
)
from interlock.domain.runtime.subagents import agent_tool
from interlock.domain.runtime.tools import Tool, ToolContext, interrupt, tool

__all__ = [
    "Agent",
    "Approval",
    "ApproveEntry",
    "Chat",
    "Decider",
    "EditEntry",
    "FunctionModel",
    "Interlock",
    "Interrupt",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "RejectEntry",
    "RespondEntry",
    "RestartEntry",
    "StreamEvent",
    "Tool",
    "ToolContext",
    "ToolDefinition",
    "ToolInvocation",
    "ToolMiddleware",
    "ToolNext",
    "ToolRequest",
    "ToolResponse",
    "TurnResult",
    "Usage",
    "agent_tool",
    "interrupt",
    "tool",
]
