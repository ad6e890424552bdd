"""A message value's copy with some fields replaced is what pydantic's `model_copy` makes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import PrivateAttr

from interlock.domain.chat.messages import Message, Part, ToolRequest, ToolResponse


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump(by_alias=True, exclude_unset=True) == b.model_dump(
        by_alias=True, exclude_unset=True)


@pytest.mark.parametrize(("value", "update"), [
    (ToolRequest(name="transfer", input={"amount": 100}), {"ref": "transfer-1"}),
    (Part(tool_request=ToolRequest(name="t", ref="a")), {"metadata": {"interrupt": True}}),
    (Part(text="hi", metadata={"x": 1}), {"tool_response": ToolResponse(name="t", output=2)}),
    (Message(role="tool", content=[Part(text="a")]), {"content": [], "metadata": {"r": 1}}),
    (Message(role="user", content=[Part(text="a")]), {"role": "model"}),
])
def test_a_value_with_fields_replaced_is_its_model_copy(value: Any, update: dict[str, Any]) -> None:
    before = value.model_dump()
    _same(value.replaced(**update), value.model_copy(update=update))
    assert value.model_dump() == before  # the original is left as it was
    with pytest.raises(ValueError, match="frozen"):
        value.replaced(**update).metadata = {}


def test_a_subclass_with_private_state_is_copied_by_pydantic() -> None:
    class Noted(Message):
        _seen: int = PrivateAttr(default=0)

    value = Noted(role="model", content=[])
    value._seen = 3
    copied = value.replaced(role="user")
    assert (copied.role, copied._seen, value.role) == ("user", 3, "model")
