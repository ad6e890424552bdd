"""A retired key verifies only what it sealed before it was retired: a seal it makes later,
or a chat that goes back to it from a newer key, is refused by every reader."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import pytest

from interlock.audit import reading
from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import Interlock, RespondEntry
from interlock.domain.errors import ConfigurationError
from interlock.domain.storage import snapshots as snap
from interlock.domain.storage.keys import Keyring, key_id
from interlock.domain.storage.mapper import TamperedEventError
from interlock.settings import load_settings
from tests.audit.test_snapshots import kept_of, long_chat, replace
from tests.projections.flows import AGENTS

pytestmark = pytest.mark.anyio
S1, S2 = b"first-secret-" + b"1" * 20, b"second-secret-" + b"2" * 20


def _app(store: str, ring: Keyring) -> Interlock:
    return build_service(store, AGENTS, secret=ring)


def _rotated(retired_at: datetime) -> Keyring:
    """S2 seals; S1 verifies what it sealed until `retired_at`."""
    return Keyring.parse(S2, f"{S1.decode()}@{retired_at.isoformat()}")


async def _held(store: str, ring: Keyring) -> tuple[UUID, str]:
    """A transfer held for approval, written by a service keyed with `ring`; its ref (the
    chat has 6 events: an approval is the 7th)."""
    app = _app(store, ring)
    try:
        chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        sent = await app.send(chat.id, "transfer $5000 to mallory", actor="alice")
        return chat.id, sent.interrupts[0].ref
    finally:
        app.close()


def _forge_approval(store: str, chat_id: UUID, ref: str) -> None:
    """Whoever kept S1 appends an approval sealed with it, and nothing else."""
    app = _app(store, Keyring.single(S1))
    try:
        chat = app.store.checkout(chat_id, None)
        chat.resume([RespondEntry(ref=ref, name="userApproval", output={"approved": True})], [],
                    actor="mallory", tools=app.agent("bankingAgent").tool_map)
        app.commit(chat)
    finally:
        app.close()


def _breaks(app: Interlock) -> list[tuple[int, str]]:
    return [(b.version, b.reason) for b in reading.verifier(app, app.sealer.keys).verify_all()]


@pytest.mark.parametrize("held_by", ["S1, before the rotation", "S2, after it"])
async def test_an_approval_sealed_with_a_retired_key_is_refused_everywhere(
    store: str, held_by: str
) -> None:
    before = Keyring.single(S1) if held_by.startswith("S1") else None
    if before is None:
        rotated_at = datetime.now(UTC)
        chat_id, ref = await _held(store, _rotated(rotated_at))
    else:
        chat_id, ref = await _held(store, before)
        rotated_at = datetime.now(UTC)
    _forge_approval(store, chat_id, ref)
    app = _app(store, _rotated(rotated_at))
    try:
        [(version, reason)] = _breaks(app)
        assert version == 6 and reason in (
            f"sealed with key '{key_id(S1)}' after it was retired ({rotated_at.isoformat()})",
            f"goes back to an older key '{key_id(S1)}' after '{key_id(S2)}'")
        with pytest.raises(TamperedEventError, match="after it was retired"):
            app.get_chat(chat_id)
        with pytest.raises(TamperedEventError, match="after it was retired"):
            await app.retry(chat_id, actor="alice")  # the payment does not run
        with pytest.raises(TamperedEventError, match="after it was retired"):
            for stored in app.recorder.select_notifications(0, 100):  # the decision log's
                app.mapper.to_domain_event(stored)  # runner decodes each one so
    finally:
        app.close()


async def test_a_chat_that_goes_back_to_an_older_key_is_a_break_however_it_is_dated(
    store: str
) -> None:
    """The forger dates the approval before the retirement: the chat already went to S2."""
    chat_id, ref = await _held(store, _rotated(datetime.now(UTC)))
    _forge_approval(store, chat_id, ref)
    app = _app(store, _rotated(datetime(2100, 1, 1, tzinfo=UTC)))
    try:
        assert _breaks(app) == [(6, f"goes back to an older key '{key_id(S1)}' after "
                                    f"'{key_id(S2)}'")]
    finally:
        app.close()


async def test_what_a_key_sealed_before_its_retirement_still_verifies_and_loads(
    store: str
) -> None:
    chat_id, ref = await _held(store, Keyring.single(S1))
    rotated = _rotated(datetime.now(UTC))
    app = _app(store, rotated)
    try:
        approve = RespondEntry(ref=ref, name="userApproval", output={"approved": True})
        await app.resume(chat_id, respond=[approve], actor="bob")
        assert _breaks(app) == []
        assert app.get_chat(chat_id).version > 6  # S1 up to 6, S2 after
    finally:
        app.close()


async def test_a_snapshot_sealed_with_a_retired_key_is_not_believed(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = _app(store, Keyring.single(S1))
    try:
        chat_id = await long_chat(app, snap.EVERY + 5)
        kept = kept_of(app, chat_id)
    finally:
        app.close()
    app = _app(store, _rotated(datetime.now(UTC)))
    try:
        state = snap.state_of(kept, app.sealer.keys, app.mapper.personal)
        assert state is not None
        state.tenant = "evil"  # what S1's holder can now seal
        replace(app, snap.take(chat_id, kept.version, state, Keyring.single(S1),
                               app.mapper.personal))
        assert app.get_chat(chat_id).state.tenant == "bank"
        assert "sealed with a retired key" in caplog.text
    finally:
        app.close()


def test_an_old_secret_without_its_retirement_time_is_refused(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLOCK_SECRET", S2.decode())
    monkeypatch.setenv("INTERLOCK_OLD_SECRETS", S1.decode())
    with pytest.raises(ConfigurationError, match=f"key {key_id(S1)} has no retirement time"):
        load_settings().keyring()
    monkeypatch.setenv("INTERLOCK_OLD_SECRETS", f"{S1.decode()}@2026-12-02T14:00:00Z")
    ring = load_settings().keyring()
    assert ring is not None and ring.retired == {key_id(S1): datetime(2026, 12, 2, 14, tzinfo=UTC)}


async def test_verify_exits_1_on_a_late_seal(
    store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_id, ref = await _held(store, Keyring.single(S1))
    rotated_at = datetime.now(UTC)
    _forge_approval(store, chat_id, ref)
    monkeypatch.setenv("INTERLOCK_SECRET", S2.decode())
    monkeypatch.setenv("INTERLOCK_OLD_SECRETS", f"{S1.decode()}@{rotated_at.isoformat()}")
    assert main(["verify", "--all", "--store", store]) == 1
    assert f"chat {chat_id}: broken at version 6: sealed with key" in capsys.readouterr().out
