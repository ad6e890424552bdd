"""Messages and parts in Genkit's JSON shape (camelCase on the wire)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "model", "tool"]
_set = object.__setattr__


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    def replaced(self, **update: Any) -> Self:
        """`model_copy(update=update)`: a shallow copy with `update`'s fields, unvalidated.

        A value has no extra fields (`forbid`) and no private ones, so the copy is its
        fields and the set of those given: pydantic's copies the extra and private parts
        too, through `copy.copy` in Python (22,000 instructions a copy against 11,000;
        a served cycle makes about fifteen)."""
        if self.__pydantic_private__ is not None or self.__pydantic_extra__ is not None:
            return self.model_copy(update=update)  # a subclass that has some
        new = type(self).__new__(type(self))
        _set(new, "__dict__", {**self.__dict__, **update})
        _set(new, "__pydantic_fields_set__", self.__pydantic_fields_set__ | update.keys())
        _set(new, "__pydantic_extra__", None)
        _set(new, "__pydantic_private__", None)
        return new


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
