"""Retention removes whole expired chats, logs them signed, and never a chat kept by policy."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest

from interlock.audit import reading
from interlock.audit.checkpoint_log import RETENTION_ID, RetentionLog
from interlock.audit.retention import delete_chats, expired
from interlock.audit.retention_policy import Entry, Policy, Removal, Rule, make_entry, months_before
from interlock.audit.signing import Signer
from interlock.cli.main import main
from interlock.domain import Interlock, channels
from interlock.domain.channels import EmailChannel
from interlock.domain.chat import events as ev
from interlock.domain.errors import ChatNotFoundError
from interlock.domain.storage.snapshots import EVERY
from tests.audit.test_checkpoints import keys  # noqa: F401 - the fixture
from tests.audit.test_snapshots import long_chat
from tests.projections.tamper import EventsTable

pytestmark = pytest.mark.anyio
POLICY = {"default": {"keep_months": 6, "delete_after_years": 1},
          "tenants": {"archive": {"keep_months": 120, "delete_after_years": 10}}}


async def _chat_at(app: Interlock, monkeypatch: pytest.MonkeyPatch, tenant: str,
                   age: timedelta) -> UUID:
    monkeypatch.setattr(ev, "now", lambda: datetime.now(UTC) - age)
    try:
        chat = app.start_chat("bankingAgent", actor="alice", tenant=tenant)
        await app.send(chat.id, "transfer $50 to savings", actor="alice")
    finally:
        monkeypatch.undo()
    return chat.id


def _policy(tmp_path: Path, policy: object = POLICY) -> str:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(policy))
    return str(path)


async def test_retention_removes_only_expired_chats_and_logs_them(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    old = await _chat_at(app, monkeypatch, "bank", timedelta(days=800))
    eight_months = await _chat_at(app, monkeypatch, "bank", timedelta(days=240))
    archived = await _chat_at(app, monkeypatch, "archive", timedelta(days=800))
    fresh = await _chat_at(app, monkeypatch, "bank", timedelta(0))
    assert main(["audit", "checkpoint", "--key", keys[0], "--store", store]) == 0
    run = ["audit", "retention", "--policy", _policy(tmp_path), "--key", keys[0],
           "--store", store]
    assert main([*run, "--dry-run"]) == 0
    assert f"would remove chat {old} (tenant bank" in capsys.readouterr().out
    assert app.get_chat(old).version > 0  # a dry run removes nothing
    assert main(run) == 0
    assert "removed 1 chat(s)" in capsys.readouterr().out
    for kept in (eight_months, archived, fresh):
        assert app.get_chat(kept).version > 0
    with pytest.raises(ChatNotFoundError):
        app.get_chat(old)
    [entry] = [Entry.from_json(s) for _, s in EventsTable(
        store, RETENTION_ID, purpose="retention").records().values()]
    assert [r.chat_id for r in entry.removals()] == [str(old)]
    assert main(["verify", "--all", "--public-key", keys[1], "--store", store]) == 0
    assert main(["verify", str(old), "--public-key", keys[1], "--store", store]) == 1
    assert "no such chat: removed by retention" in capsys.readouterr().out


async def test_a_deleted_retention_entry_or_an_unlogged_deletion_is_detected(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    await _chat_at(app, monkeypatch, "bank", timedelta(days=800))
    young = await _chat_at(app, monkeypatch, "bank", timedelta(days=1))
    assert main(["audit", "checkpoint", "--key", keys[0], "--store", store]) == 0
    assert main(["audit", "retention", "--policy", _policy(tmp_path), "--key", keys[0],
                 "--store", store]) == 0
    EventsTable(store, young).delete_from(1)  # not retention: an intruder
    assert main(["verify", "--all", "--public-key", keys[1], "--store", store]) == 1
    assert f"chat {young}: deleted: checkpoint 2 lists it" in capsys.readouterr().out
    EventsTable(store, RETENTION_ID, purpose="retention").delete(1)
    assert main(["verify", "--all", "--public-key", keys[1], "--store", store]) == 1
    assert "names retention entry 1, which is missing" in capsys.readouterr().out


def test_a_policy_that_would_remove_chats_younger_than_its_minimum_is_refused(
    tmp_path: Path, sqlite_store: str, keys: tuple[str, str],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = {"default": {"keep_months": 18, "delete_after_years": 1}}
    assert main(["audit", "retention", "--policy", _policy(tmp_path, bad), "--key", keys[0],
                 "--store", sqlite_store]) == 2
    assert "would remove chats younger than keep_months=18" in capsys.readouterr().err


def test_the_minimum_holds_at_the_boundary() -> None:
    now = datetime(2026, 3, 31, 12, tzinfo=UTC)
    rule = Rule(keep_months=6, delete_after_years=1)
    assert months_before(now, 12) == datetime(2025, 3, 28, 12, tzinfo=UTC)
    assert not rule.expired(datetime(2025, 3, 28, 12, tzinfo=UTC), now)
    assert rule.expired(datetime(2025, 3, 28, 11, 59, tzinfo=UTC), now)
    assert not Rule(keep_months=24, delete_after_years=2).expired(
        datetime(2024, 4, 1, tzinfo=UTC), now)


async def test_a_signed_entry_that_removed_a_chat_its_policy_keeps_is_refused(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Even whoever holds the signing key cannot pass off a young chat's removal as lawful."""
    young = await _chat_at(app, monkeypatch, "bank", timedelta(days=150))  # under 6 months
    assert main(["audit", "checkpoint", "--key", keys[0], "--store", store]) == 0
    heads = reading.verifier(app, app.sealer.keys)
    assert heads.verify_all() == []
    version, link = heads.heads()[str(young)]
    signer, log = Signer.load(keys[0]), RetentionLog(app.factory.aggregate_recorder("retention"))
    last = app.get_chat(young).state.updated_at.isoformat()
    log.append(make_entry([Removal(str(young), "bank", version, link, last)], prev=None,
                          policy=Policy.parse(POLICY), at=datetime.now(UTC).isoformat(),
                          key_id=signer.key_id, sign=signer.sign))
    delete_chats(app.recorder, [young])
    assert main(["verify", "--all", "--public-key", keys[1], "--store", store]) == 1
    assert f"retention entry 1: removed chat {young}, which its policy kept" in (
        capsys.readouterr().out)


async def test_retention_removes_a_long_chats_snapshot_with_its_events(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ev, "now", lambda: datetime.now(UTC) - timedelta(days=800))
    try:
        old = await long_chat(app, EVERY + 10)
    finally:
        monkeypatch.undo()
    assert app.snapshot_store is not None and app.snapshot_store.get(old) is not None
    assert main(["audit", "checkpoint", "--key", keys[0], "--store", store]) == 0
    assert main(["audit", "retention", "--policy", _policy(tmp_path), "--key", keys[0],
                 "--store", store]) == 0
    assert app.snapshot_store.get(old) is None
    with pytest.raises(ChatNotFoundError):
        app.get_chat(old)


async def test_retention_expires_chats_not_streams_that_are_no_chat(
    app: Interlock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = await _chat_at(app, monkeypatch, "bank", timedelta(days=800))
    monkeypatch.setattr(channels, "now", lambda: datetime.now(UTC) - timedelta(days=800))
    app.channels.set("bank", "email", EmailChannel(addresses={"tina": "t@bank.test"}),
                    actor="root")
    monkeypatch.undo()
    policy = Policy.parse(POLICY)
    removed = {r.chat_id for r in expired(app, policy, datetime.now(UTC))}
    assert removed == {str(old)}  # the channel stream is as old, and not a chat's to expire
    assert app.channels.get("bank").email() is not None
