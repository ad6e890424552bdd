"""`interlock verify` detects each kind of tampering and passes on an untouched store."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import pytest

from interlock.cli.main import main
from interlock.domain import Interlock
from tests.projections.flows import banking_flows
from tests.projections.tamper import EventsTable

pytestmark = pytest.mark.anyio


def _change_payload(t: EventsTable) -> int:
    state = t.states()[2]
    t.write(2, {**state, "text": state["text"].replace("5000", "9000")})
    return 2


def _delete(t: EventsTable) -> int:
    t.delete(3)
    return 3


def _insert(t: EventsTable) -> int:
    t.insert_before(3, t.states()[2], "interlock:UserMessageSent")
    return 3


def _swap(t: EventsTable) -> int:
    states = t.states()
    t.write(3, states[4])
    t.write(4, states[3])
    return 3


def _reseal(t: EventsTable) -> int:
    t.write(2, {**t.states()[2], "text": "transfer $1 to savings"})
    t.reseal(b"a guessed secret")
    return 1


@pytest.mark.parametrize("tamper", [_change_payload, _delete, _insert, _swap, _reseal])
async def test_verify_names_the_first_broken_version(
    app: Interlock, store: str, tamper: Callable[[EventsTable], int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    chats, _ = await banking_flows(app)
    victim = chats[1]
    broken = tamper(EventsTable(store, victim))
    assert main(["verify", "--all", "--store", store]) == 1
    assert main(["verify", str(victim), "--store", store]) == 1
    assert main(["verify", str(chats[0]), "--store", store]) == 0
    out = capsys.readouterr().out
    assert f"chat {victim}: broken at version {broken}" in out
    assert out.count("broken at version") == 2


async def test_verify_passes_on_an_untouched_store(
    app: Interlock, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    assert main(["verify", "--all", "--store", store]) == 0
    assert main(["verify", str(chats[1]), "--store", store]) == 0
    total = app.recorder.max_notification_id()
    assert f"checked {total} events: all chains verify" in capsys.readouterr().out


async def test_verify_uses_the_configured_secret(
    app: Interlock, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    chats, _ = await banking_flows(app)
    monkeypatch.setenv("INTERLOCK_SECRET", "another-secret")
    assert main(["verify", str(UUID(str(chats[0]))), "--store", store]) == 1
