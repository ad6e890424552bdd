"""The client's typed read results match the OpenAPI document field for field."""

from __future__ import annotations

import json
from typing import Any, get_type_hints

import pytest

from interlock.bootstrap import openapi_document
from interlock.client import (
    AsyncChat,
    AsyncClient,
    ChatState,
    Client,
    DecisionRecord,
    InboxItem,
    Page,
)
from interlock.client._sync import Chat

SCHEMAS = json.loads(openapi_document())["components"]["schemas"]  # the app's own document


@pytest.mark.parametrize(("shape", "component"), [
    (ChatState, "ChatPublic"), (DecisionRecord, "DecisionRow"), (InboxItem, "InboxRow"),
    (Page, "Page_DecisionRow_")])
def test_each_shape_has_the_fields_the_api_answers(shape: Any, component: str) -> None:
    schema = SCHEMAS[component]
    assert list(get_type_hints(shape)) == list(schema["properties"])
    assert sorted(shape.__required_keys__) == sorted(schema.get("required", []))


def test_the_read_calls_return_them() -> None:
    for owner in (Client, AsyncClient):
        assert get_type_hints(owner.decisions)["return"] == Page[DecisionRecord]
        assert get_type_hints(owner.interrupts)["return"] == Page[InboxItem]
    for chat in (Chat, AsyncChat):
        assert get_type_hints(chat.state)["return"] is ChatState
