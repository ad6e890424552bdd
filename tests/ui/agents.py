"""An agent whose tool's output schema has every shape the console's forms must draw."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, Field

from interlock.domain import (
    Agent,
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ToolContext,
    ToolRequest,
    tool,
)
from tests.api.agents import AGENTS as API_AGENTS


class Subject(BaseModel):
    subject: str


class Address(BaseModel):
    city: str = Field(min_length=2)
    zip: str = Field(pattern=r"^[0-9]{5}$", description="Five digits")


class Line(BaseModel):
    item: str
    qty: int = Field(ge=1, le=10)


class Review(BaseModel):
    level: Literal["low", "high"]
    note: str | None = Field(default=None, max_length=20, description="Why, in a few words")
    score: float = Field(default=0.5, ge=0, le=1)
    due: date
    urgent: bool | None = None
    notify: bool = False
    address: Address
    lines: list[Line] = []
    tags: list[str] = []
    extra: dict[str, Any] = {}


@tool(name="review", description="Ask a person to review a subject.", side_effects=False,
      interrupts=True)
async def review(input: Subject, ctx: ToolContext) -> Review:
    ctx.interrupt({"reason": "review"})


def forms_script(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool":
        part = last.content[0].tool_response
        text = f"reviewed: {part.output if part else None}"
        return ModelResponse(message=Message(role="model", content=[Part(text=text)]))
    request_part = Part(tool_request=ToolRequest(name="review", input={"subject": last.text}))
    return ModelResponse(message=Message(role="model", content=[request_part]))


forms = Agent(name="formsAgent", system="Reviews with a person.", tools=[review],
              model=FunctionModel(forms_script, name="forms-script"))

AGENTS = [*API_AGENTS, forms]
