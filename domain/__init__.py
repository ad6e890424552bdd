"""Interlock's domain: the Chat aggregate, the turn loop and the authoring API."""

from interlock.domain.agent import Agent
from interlock.domain.application import Interlock
from interlock.domain.approval_rules import ApproveEntry, EditEntry, RejectEntry
from interlock.domain.approvals import Approval, Decider
from interlock.domain.chat import Chat
from interlock.domain.decisions import RespondEntry, RestartEntry
from interlock.domain.messages import Message, Part, ToolRequest, ToolResponse
from interlock.domain.models import (
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ToolDefinition,
    Usage,
)
from interlock.domain.results import Interrupt, StreamEvent, TurnResult
from interlock.domain.subagents import agent_tool
from interlock.domain.tool_middleware import ToolInvocation, ToolMiddleware, ToolNext
from interlock.domain.tools import Tool, ToolContext, interrupt, tool

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
