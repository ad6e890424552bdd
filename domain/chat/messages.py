"""Messages and parts in Genkit's JSON shape (camelCase on the wire)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "model", "tool"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")


class ToolRequest(_Value):
    ref: str | None = None
    name: str
    input: Any = None


class ToolResponse(_Value):
    ref: str | None = None
    name: str
    output: Any = None


class Part(_Value):
    """One of text, toolRequest or toolResponse, with optional metadata."""

    text: str | None = None
    tool_request: ToolRequest | None = Field(default=None, alias="toolRequest")
    tool_response: ToolResponse | None = Field(default=None, alias="toolResponse")
    metadata: dict[str, Any] | None = None


class Message(_Value):
    role: Role
    content: list[Part]
    metadata: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.content if p.text is not None)

    @property
    def tool_requests(self) -> list[ToolRequest]:
        return [p.tool_request for p in self.content if p.tool_request is not None]

    def wire(self) -> dict[str, Any]:
        """The Genkit-compatible JSON object."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def text_message(role: Role, text: str) -> Message:
    return Message(role=role, content=[Part(text=text)])
