"""Snapshots are gone: nothing a load reads sits outside the chain."""

from __future__ import annotations

import pytest

from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.domain.errors import ChatNotFoundError
from interlock.domain.events import ChatSnapshot
from interlock.domain.persistence import TamperedEventError
from interlock.stores.urls import store_env
from tests.projections.flows import AGENTS, banking_flows

pytestmark = pytest.mark.anyio
OLD_STYLE = {"IS_SNAPSHOTTING_ENABLED": "y"}


async def test_no_snapshot_is_taken_however_long_the_chat(app: Interlock) -> None:
    chats, _ = await banking_flows(app)
    assert app.snapshots is None
    assert type(app).snapshotting_intervals == {}
    assert app.get_chat(chats[1]).state.tenant == "bank"


async def test_a_forged_snapshot_left_in_the_store_is_never_believed(store: str) -> None:
    """An old store's snapshot table, edited to move a chat to another tenant."""
    writer = Interlock(AGENTS, env={**store_env(store), **OLD_STYLE})
    try:
        chats, _ = await banking_flows(writer)
        chat = writer.get_chat(chats[0])
        chat.state.tenant = "intruder"
        assert writer.snapshots is not None
        writer.snapshots.put([ChatSnapshot.take(chat)])
        with pytest.raises(TamperedEventError, match="not a sealed event class"):
            writer.get_chat(chats[0])  # a store configured to read snapshots refuses them
    finally:
        writer.close()
    reader = build_service(store, AGENTS)
    try:
        assert reader.get_chat(chats[0], tenant="bank").state.tenant == "bank"
        with pytest.raises(ChatNotFoundError):
            reader.get_chat(chats[0], tenant="intruder")
    finally:
        reader.close()
