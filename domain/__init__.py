"""Interlock's domain: the Chat aggregate, the turn loop and the authoring API."""

from domain.agent import Agent
from domain.application import Interlock
from domain.chat import Chat
from domain.decisions import RespondEntry, RestartEntry
from domain.messages import Message, Part, ToolRequest, ToolResponse
from domain.models import FunctionModel, ModelRequest, ModelResponse, ToolDefinition, Usage
from domain.results import Interrupt, StreamEvent, TurnResult
from domain.tools import Tool, ToolContext, tool

__all__ = [
    "Agent",
    "Chat",
    "FunctionModel",
    "Interlock",
    "Interrupt",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "RespondEntry",
    "RestartEntry",
    "StreamEvent",
    "Tool",
    "ToolContext",
    "ToolDefinition",
    "ToolRequest",
    "ToolResponse",
    "TurnResult",
    "Usage",
    "tool",
]
