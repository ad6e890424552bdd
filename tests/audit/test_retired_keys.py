"""A retired key verifies only what it sealed before it was retired: a seal it makes later,
or a chat that goes back to it from a newer key, is refused by every reader."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from interlock.audit import reading, rotation
from interlock.audit.checkpoint_log import (
    ChainsBrokenError,
    CheckpointLog,
    KeysNotRotatedError,
    take_checkpoint,
)
from interlock.audit.checkpoints import Checkpoint, make_checkpoint, sorted_heads
from interlock.audit.signing import Signer
from interlock.bootstrap import build_app, build_service
from interlock.cli.audit_export import event_lines, write_manifest
from interlock.cli.main import main
from interlock.domain import Interlock, RespondEntry
from interlock.domain.errors import ConfigurationError
from interlock.domain.storage import snapshots as snap
from interlock.domain.storage.keys import Keyring, key_id
from interlock.domain.storage.mapper import TamperedEventError
from interlock.examples.banking import LEDGER
from interlock.settings import load_settings
from tests.audit.test_snapshots import kept_of, long_chat, replace
from tests.projections.flows import AGENTS
from tests.review.test_evidence import verifier as verifier_tool

pytestmark = pytest.mark.anyio
STALE = timedelta(0)  # the forged approval's turn counts as abandoned: retry would run it
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
        sent = await app.send(chat.id, "transfer $50 to mallory", actor="alice")
        return chat.id, sent.interrupts[0].ref
    finally:
        app.close()


def _rotate(store: str, ring: Keyring, signer: Signer | None = None) -> Checkpoint:
    """`interlock audit rotate` with these keys: the rotation checkpoint."""
    signer = signer or Signer.generate()
    app = _app(store, ring)
    try:
        return rotation.rotate(app, key_id=signer.key_id, sign=signer.sign, now=_now)
    finally:
        app.close()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _forge_approval(store: str, chat_id: UUID, ref: str, dated: datetime | None = None) -> None:
    """Whoever kept S1 appends an approval sealed with it (dated `dated`), and nothing else."""
    app = _app(store, Keyring.single(S1))
    try:
        chat = app.store.checkout(chat_id, None)
        chat.resume([RespondEntry(ref=ref, name="userApproval", output={"approved": True})], [],
                    actor="mallory", tools=app.agent("bankingAgent").tool_map)
        if dated is not None:
            chat.pending_events = [e.model_copy(update={"timestamp": dated})
                                   for e in chat.pending_events]
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
    _rotate(store, _rotated(rotated_at))
    _forge_approval(store, chat_id, ref)
    app = _app(store, _rotated(rotated_at))
    try:
        [(version, reason)] = _breaks(app)
        assert version == 7 and reason in (
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
        assert _breaks(app) == [(7, f"goes back to an older key '{key_id(S1)}' after "
                                    f"'{key_id(S2)}'")]
    finally:
        app.close()


async def test_what_a_key_sealed_before_its_retirement_still_verifies_and_loads(
    store: str
) -> None:
    chat_id, ref = await _held(store, Keyring.single(S1))
    rotated = _rotated(datetime.now(UTC))
    _rotate(store, rotated)
    app = _app(store, rotated)
    try:
        approve = RespondEntry(ref=ref, name="userApproval", output={"approved": True})
        await app.resume(chat_id, respond=[approve], actor="bob")
        assert _breaks(app) == []
        assert app.get_chat(chat_id).version > 7  # S1 up to 6, S2 from 7
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
    _rotate(store, _rotated(datetime.now(UTC)))
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
    store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path
) -> None:
    chat_id, ref = await _held(store, Keyring.single(S1))
    rotated_at = datetime.now(UTC)
    monkeypatch.setenv("INTERLOCK_SECRET", S2.decode())
    monkeypatch.setenv("INTERLOCK_OLD_SECRETS", f"{S1.decode()}@{rotated_at.isoformat()}")
    key = tmp_path / "cp.pem"
    assert main(["audit", "keygen", "--private", str(key)]) == 0
    assert main(["audit", "rotate", "--key", str(key), "--store", store]) == 0
    assert "rotation checkpoint 1: " in capsys.readouterr().out
    _forge_approval(store, chat_id, ref)
    assert main(["verify", "--all", "--store", store]) == 1
    assert f"chat {chat_id}: broken at version 7: sealed with key" in capsys.readouterr().out


def _checkpoint(app: Interlock, signer: Signer) -> Checkpoint:
    """`interlock audit checkpoint` (also what `audit evidence` and signed exports take)."""
    return take_checkpoint(CheckpointLog(rotation.recorder_of(app)),
                           reading.verifier(app, app.sealer.keys), key_id=signer.key_id,
                           sign=signer.sign, now=_now)


@pytest.mark.parametrize("since", ["no checkpoint since the rotation",
                                   "a checkpoint signed since"])
async def test_an_approval_a_retired_key_seals_after_the_rotation_pays_nothing_however_dated(
    store: str, since: str
) -> None:
    """Issue 40: S1's holder, with write access, appends an approval sealed by S1 and dated
    a second before S1's retirement to a chat still on S1. Past the chat's head in the
    rotation checkpoint only S2 seals: every load, verify and checkpoint refuses it."""
    chat_id, ref = await _held(store, Keyring.single(S1))
    retired_at = datetime.now(UTC)
    ring, signer = _rotated(retired_at), Signer.generate()
    assert _rotate(store, ring, signer).statement["keys"] == {
        "active": key_id(S2), "retired": {key_id(S1): retired_at.isoformat()}, "rotation": 1}
    app = _app(store, ring)
    try:
        log = CheckpointLog(rotation.recorder_of(app))
        if since.startswith("a checkpoint"):
            assert _checkpoint(app, signer).statement["keys"]["rotation"] == 1
        signed, paid = len(log.all()), LEDGER.transfers
        _forge_approval(store, chat_id, ref, dated=retired_at - timedelta(seconds=1))
        refused = (f"sealed with key '{key_id(S1)}' after rotation checkpoint 1: past it only "
                   "the active key seals")
        with pytest.raises(TamperedEventError, match="after rotation checkpoint 1"):
            app.get_chat(chat_id)
        with pytest.raises(TamperedEventError, match="after rotation checkpoint 1"):
            await app.retry(chat_id, actor="alice", stale_after=STALE)
        assert app.store.get_many([chat_id]) == {}
        assert LEDGER.transfers == paid  # the payment did not run
        assert _breaks(app) == [(7, refused)]
        with pytest.raises(ChainsBrokenError) as refusal:
            _checkpoint(app, signer)
        [(version, reason)] = [(b.version, b.reason) for b in refusal.value.breaks]
        assert version == 7 and reason in (  # the checkpoint's own rule may say it first
            refused, f"sealed with key '{key_id(S1)}' after a checkpoint signed once it was "
                     "retired")
        assert len(log.all()) == signed  # nothing signed the forgery into history
    finally:
        app.close()


async def test_without_a_rotation_checkpoint_nothing_a_retired_key_sealed_is_acted_on(
    store: str
) -> None:
    """An operator retires S1 in the settings but never runs `audit rotate`: the server
    refuses to start, loads refuse S1's events, no checkpoint is signed."""
    chat_id, ref = await _held(store, Keyring.single(S1))
    retired_at = datetime.now(UTC)
    _forge_approval(store, chat_id, ref, dated=retired_at - timedelta(seconds=1))
    app, paid = _app(store, _rotated(retired_at)), LEDGER.transfers
    try:
        assert rotation.not_rotated(app.sealer.keys) == (
            f"retired key(s) {key_id(S1)} are not covered by a rotation checkpoint: nothing "
            "would tell their holder's new events from old ones; run `interlock audit rotate "
            "--key FILE` with these settings first (docs/audit.md, \"Keys and rotation\")")
        with pytest.raises(TamperedEventError, match="no rotation checkpoint covers"):
            await app.retry(chat_id, actor="alice", stale_after=STALE)
        assert LEDGER.transfers == paid
        with pytest.raises(KeysNotRotatedError, match=f"retired key\\(s\\) {key_id(S1)} are "
                                                      "not covered by a rotation checkpoint"):
            _checkpoint(app, Signer.generate())
    finally:
        app.close()


def test_a_server_with_a_retired_key_no_rotation_covers_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("INTERLOCK_SECRET", S2.decode())
    monkeypatch.setenv("INTERLOCK_OLD_SECRETS", f"{S1.decode()}@2026-12-02T14:00:00Z")
    store = f"sqlite:///{tmp_path / 'interlock.db'}"
    with pytest.raises(ConfigurationError, match="refusing to serve: retired key"):
        build_app(load_settings(store=store))
    key = tmp_path / "cp.pem"
    assert main(["audit", "keygen", "--private", str(key)]) == 0
    assert main(["audit", "rotate", "--key", str(key), "--store", store]) == 0
    with TestClient(build_app(load_settings(store=store))) as http:
        assert http.get("/healthz").status_code == 200


async def test_the_offline_verifier_refuses_a_retired_keys_seal_past_the_rotation(
    store: str, tmp_path: Path
) -> None:
    """A checkpoint signed without these rules (before them, or by a careless signer) does
    not make the forgery pass tools/verify_export.py: it reads the retirement times and the
    rotation checkpoint's heads from the signed manifest."""
    chat_id, ref = await _held(store, Keyring.single(S1))
    retired_at = datetime.now(UTC)
    ring, signer = _rotated(retired_at), Signer.generate()
    rotated = _rotate(store, ring, signer)
    public = tmp_path / "cp.pub"
    public.write_text(signer.public.hex())
    _forge_approval(store, chat_id, ref, dated=retired_at - timedelta(seconds=1))
    app = _app(store, ring)
    try:
        verifier = reading.verifier(app, None)  # hashes only: signs whatever is there
        verifier.verify_all()
        careless = make_checkpoint(sorted_heads(verifier.heads()), prev=rotated,
                                   position=verifier.position, created_at=_now(),
                                   key_id=signer.key_id, sign=signer.sign,
                                   keys=rotated.statement["keys"])
        lines = list(event_lines(app, None, None))
    finally:
        app.close()
    export = tmp_path / "events.jsonl"
    export.write_text("".join(lines))
    args = argparse.Namespace(output=str(export), format="events", chat_id=None, tenant=None,
                              since=None, until=None, tool=None, actor=None)
    write_manifest(args, signer, careless, rotated)
    code, out = verifier_tool(str(export), "--public-key", str(public))
    assert code == 1 and (f"chat {chat_id}: version 7: sealed with key '{key_id(S1)}' after "
                          "rotation checkpoint 1: past it only the active key seals") in out
