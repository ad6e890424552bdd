"""What the chat's rules ask of a tool: check a client's output or edited input against its
schema. The runtime's `Tool` satisfies `ToolSchema`; the chat imports nothing of the runtime."""

from __future__ import annotations

from typing import Any, Protocol


class SchemaError(ValueError):
    """A value failed a tool's input or output schema."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} validation error(s)")
        self.errors = errors


class ToolSchema(Protocol):
    """A tool as the decision rules see it (`runtime.tools.Tool` is one)."""

    @property
    def distinct_approver(self) -> bool:
        """Whether the call's requester may not approve it."""

    def validate_output(self, raw: Any, *, strict: bool = False) -> Any:
        """The output as JSON data; SchemaError if it fails the tool's output schema."""

    def input_json(self, raw: Any, *, strict: bool = False) -> Any:
        """The input as JSON data (defaults filled in); SchemaError if it fails the schema."""

    def validate_input(self, raw: Any, *, strict: bool = False) -> Any:
        """The input as the tool's function takes it (a policy's `when` judges it)."""
