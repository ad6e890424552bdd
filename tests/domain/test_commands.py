"""Commands of chats and turns are small frozen values; a resume's body hash is the one its
idempotency keys were recorded under before commands existed (stored keys stay valid)."""

from __future__ import annotations

import dataclasses
from uuid import uuid4

import pytest

from interlock.domain.chat.rules import ApproveEntry, RejectEntry, RespondEntry
from interlock.domain.services.commands import Resume

ANSWER = [RespondEntry(ref="r1", name="ask", output={"ok": True})]


@pytest.mark.parametrize(("fields", "recorded"), [
    ({"respond": ANSWER},
     "49da19506989351c1c016f3690c6d41d526eee784e1eeaf3f6447e60b1c6881b"),
    ({"respond": ANSWER, "metadata": {"ticket": "T-1"}, "max_turns": 3},
     "7e6cfe896a7e4fc0d514eba67584e9e0b229ab223eaf06d06419a22d9effc403"),
    ({"votes": [ApproveEntry(ref="p1", name="pay"),
                RejectEntry(ref="p2", name="pay", reason="no")]},
     "e61aa4ae36e8dd66843952adbc383aff6a9a87b90884b804b10576f0a8995a33"),
])
def test_a_resume_hashes_its_body_as_keys_were_recorded(
    fields: dict[str, object], recorded: str
) -> None:
    # the hashes of 866c0f9's Interlock._body_sha256 for the same bodies
    command = Resume(chat_id=uuid4(), actor="tina", idempotency_key="k", **fields)  # type: ignore[arg-type]
    assert command.body_sha256() == recorded
    other = dataclasses.replace(command, chat_id=uuid4(), actor="tom", tenant="acme")
    assert other.body_sha256() == recorded  # who and where are not the body


def test_a_command_is_a_frozen_value() -> None:
    command = Resume(chat_id=uuid4(), actor="tina")
    with pytest.raises(dataclasses.FrozenInstanceError):
        command.actor = "mallory"  # type: ignore[misc]
