"""Sealed snapshots: a long chat loads from its latest state, and only a sealed one that
the log confirms is believed; the library's unsealed snapshots are never read."""

from __future__ import annotations

import logging
import threading
from uuid import UUID

import psycopg
import pytest
from eventsourcing.persistence import PersistenceError

from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import Interlock, RespondEntry
from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.events import ChatSnapshot, TurnFinished
from interlock.domain.chat.state import Calls, ChatState
from interlock.domain.errors import ChatNotFoundError
from interlock.domain.results import TurnResult
from interlock.domain.storage import snapshots as snap
from interlock.domain.storage.keys import Keyring
from interlock.domain.storage.mapper import TamperedEventError
from interlock.stores.erasure_keys import KeyStore
from interlock.stores.tables import table_of
from interlock.stores.urls import store_env
from tests.projections.flows import AGENTS, app_for, banking_flows

pytestmark = pytest.mark.anyio
OLD_STYLE = {"IS_SNAPSHOTTING_ENABLED": "y"}


async def long_chat(app: Interlock, events: int) -> UUID:
    """Approved transfers until the chat has `events` events, then one left pending."""
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    while True:
        sent = await app.send(chat.id, "transfer $50 to savings", actor="alice")
        if app.get_chat(chat.id).version >= events:
            return chat.id
        approve = RespondEntry(ref=sent.interrupts[0].ref, name="userApproval",
                               output={"approved": True})
        await app.resume(chat.id, respond=[approve], actor="bob")


def kept_of(app: Interlock, chat_id: UUID) -> snap.Snapshot:
    """The chat's stored snapshot (it must have one)."""
    assert app.snapshot_store is not None
    kept = app.snapshot_store.get(chat_id)
    assert kept is not None
    return kept


def replace(app: Interlock, forged: snap.Snapshot) -> None:
    """Put `forged` in place of the chat's snapshot, as someone editing the table would."""
    assert app.snapshot_store is not None
    app.snapshot_store.delete([forged.chat_id])
    app.snapshot_store.put(forged)


async def approve_pending(app: Interlock, chat_id: UUID) -> TurnResult:
    """Approve the chat's pending transfer, the chat loaded afresh (not from the cache)."""
    [pending] = app.get_chat(chat_id).pending_interrupts()
    app.chats.take(chat_id)
    return await app.resume(chat_id, respond=[RespondEntry(
        ref=pending.ref, name="userApproval", output={"approved": True})], actor="bob")


def from_log(app: Interlock, chat_id: UUID, version: int | None = None) -> Chat:
    kept, app.snapshot_store = app.snapshot_store, None
    try:
        return app.get_chat(chat_id, version=version)
    finally:
        app.snapshot_store = kept


def decodes(app: Interlock, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The versions the mapper decodes from now on."""
    seen: list[int] = []
    decode = app.mapper.to_domain_event

    def counted(stored: object) -> object:
        seen.append(stored.originator_version)  # type: ignore[attr-defined]
        return decode(stored)  # type: ignore[arg-type]
    monkeypatch.setattr(app.mapper, "to_domain_event", counted)
    return seen


async def test_a_long_chat_loads_from_its_snapshot_as_its_log_replays_it(
        any_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_for(any_store)
    try:
        chat_id = await long_chat(app, 2 * snap.EVERY + 30)
        kept = kept_of(app, chat_id)
        assert kept.version > snap.EVERY
        seen = decodes(app, monkeypatch)
        loaded = app.get_chat(chat_id)
        assert seen == list(range(kept.version, loaded.version + 1))  # not event 1 on
        assert loaded.snapshotted == kept.version and not loaded.state.messages.decoded
        assert not loaded.state.calls.decoded  # the calls of earlier turns are held as JSON
        whole = from_log(app, chat_id)
        assert list(loaded.state.calls) == list(whole.state.calls)  # their refs without it
        assert loaded.version == whole.version
        assert loaded.state.model_dump() == whole.state.model_dump()
        for version in (kept.version - 1, kept.version, kept.version + 1):
            assert (app.get_chat(chat_id, version=version).state.model_dump()
                    == from_log(app, chat_id, version).state.model_dump())
        assert [c.status for c in loaded.state.calls.values()].count("interrupted") == 1
        done = await approve_pending(app, chat_id)  # loads the chat from its snapshot
        assert done.finish_reason == "stop"
        resumed = app.chats.take(chat_id)
        assert resumed is not None and not resumed.state.calls.decoded  # nor does a resume
        assert app.get_chat(chat_id).state.model_dump() == from_log(
            app, chat_id).state.model_dump()
    finally:
        app.close()


def _forged(kept: snap.Snapshot, how: str, app: Interlock) -> snap.Snapshot:
    if how == "edited":
        return snap.Snapshot(kept.chat_id, kept.version, kept.tip,
                             kept.stored.replace(b'"tenant":"bank"', b'"tenant":"evil"'), kept.seal)
    state = snap.state_of(kept, app.sealer.keys, None)
    assert state is not None
    if how == "resealed":
        state.tenant = "evil"
        return snap.take(kept.chat_id, kept.version, state, Keyring.single(b"not-ours"), None)
    if how == "other chat":
        return snap.Snapshot(kept.chat_id, kept.version - 1, kept.tip, kept.stored, kept.seal)
    state.chain_tip = "2:k:" + "0" * 64 + ":" + "0" * 64  # sealed by us, but not the log's
    return snap.take(kept.chat_id, kept.version, state, app.sealer.keys, None)


@pytest.mark.parametrize("how", ["edited", "resealed", "other chat", "not the log's"])
async def test_a_snapshot_that_is_not_sealed_or_not_the_logs_is_refused_and_the_log_read(
        store: str, how: str, caplog: pytest.LogCaptureFixture) -> None:
    app = app_for(store)
    try:
        chat_id = await long_chat(app, snap.EVERY + 20)
        replace(app, _forged(kept_of(app, chat_id), how, app))
        with caplog.at_level(logging.WARNING, "interlock.snapshots"):
            loaded = app.get_chat(chat_id, tenant="bank")
            app.get_chat(chat_id)
        assert loaded.snapshotted == 0  # read from the log
        assert loaded.state.model_dump() == from_log(app, chat_id).state.model_dump()
        with pytest.raises(ChatNotFoundError):
            app.get_chat(chat_id, tenant="evil")
        assert [r.message for r in caplog.records].count(
            next(r.message for r in caplog.records if "refused" in r.message)) == 1  # once
    finally:
        app.close()


async def test_no_library_snapshot_is_taken_however_long_the_chat(app: Interlock) -> None:
    chats, _ = await banking_flows(app)
    assert app.snapshots is None
    assert type(app).snapshotting_intervals == {}
    assert app.get_chat(chats[1]).state.tenant == "bank"


async def test_a_forged_snapshot_left_in_the_store_is_never_believed(store: str) -> None:
    """An old store's (the library's, unsealed) snapshot table, edited to move a chat to
    another tenant."""
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


async def test_verify_checks_each_snapshot_against_the_log(
        store: str, capsys: pytest.CaptureFixture[str]) -> None:
    app = app_for(store)
    try:
        chat_id = await long_chat(app, snap.EVERY + 20)
        assert main(["verify", "--all", "--store", store]) == 0
        assert main(["verify", str(chat_id), "--store", store]) == 0
        kept = kept_of(app, chat_id)
        replace(app, _forged(kept, "not the log's", app))
        capsys.readouterr()
        assert main(["verify", "--all", "--store", store]) == 1
        assert (f"chat {chat_id}: broken at version {kept.version}: snapshot: the log's event"
                " at its version has another chain") in capsys.readouterr().out
        replace(app, _forged(kept, "edited", app))
        assert main(["verify", str(chat_id), "--no-secret", "--store", store]) == 1
        assert "snapshot: seal does not match the snapshot" in capsys.readouterr().out
    finally:
        app.close()


def _format_1(state: object) -> bytes:
    """The body as the first format wrote it: the calls in the state line."""
    assert isinstance(state, ChatState)
    fields = state.__pydantic_serializer__.to_json(state, exclude={"messages"})
    return (b'{"format":"interlock-snapshot-1","messages":%d}\n' % len(state.messages)
            + fields + b"\n" + state.messages.to_json())


async def test_a_snapshot_of_the_first_format_still_loads(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_for(store)
    try:
        chat_id = await long_chat(app, snap.EVERY + 20)
        kept = kept_of(app, chat_id)
        state = snap.state_of(kept, app.sealer.keys, None)
        with monkeypatch.context() as patched:
            patched.setattr(snap, "_body", _format_1)
            replace(app, snap.take(chat_id, kept.version, state, app.sealer.keys, None))
        app.chats.take(chat_id)
        seen = decodes(app, monkeypatch)
        loaded = app.get_chat(chat_id)
        assert seen[0] == kept.version and loaded.state.calls.decoded
        assert loaded.state.model_dump() == from_log(app, chat_id).state.model_dump()
    finally:
        app.close()


async def test_chats_read_together_start_from_their_snapshots(any_store: str) -> None:
    app = app_for(any_store)
    try:
        long_id = await long_chat(app, snap.EVERY + 20)
        short_id = await long_chat(app, 10)
        together = app.get_chats([long_id, short_id])
        assert together[long_id].snapshotted > 0 and together[short_id].snapshotted == 0
        for chat_id in (long_id, short_id):
            assert together[chat_id].state.model_dump() == from_log(
                app, chat_id).state.model_dump()
    finally:
        app.close()


async def test_a_snapshot_table_that_fails_never_fails_a_turn_or_a_load(
        store: str, caplog: pytest.LogCaptureFixture) -> None:
    """Snapshots are a copy of the log: writes that fail are logged, reads read the log."""
    app = app_for(store)
    try:
        chat_id = await long_chat(app, 10)
        table = table_of(app, "interlock_sealed_snapshots")
        assert table is not None
        table.run(table.sql("DROP TABLE {t}"), ())
        with caplog.at_level(logging.WARNING, "interlock.snapshots"):
            chat_id = await long_chat(app, snap.EVERY + 20)
            app.chats.take(chat_id)
            chat = app.get_chat(chat_id)
        assert chat.state.status == "interrupted" and chat.snapshotted == 0
        finished = [e for e in app.events.get(chat_id) if isinstance(e, TurnFinished)]
        assert all(e.reason != "failed" for e in finished)
        assert "not kept" in caplog.text and "not read" in caplog.text
    finally:
        app.close()


async def test_a_refused_snapshot_makes_way_for_the_next(store: str) -> None:
    """A row no load believes (here: a version the log never reaches) is dropped, so the
    chat's next snapshot is kept, not refused for good by the 'only a later one' rule."""
    app = app_for(store)
    try:
        chat_id = await long_chat(app, snap.EVERY + 20)
        kept = kept_of(app, chat_id)
        assert app.snapshot_store is not None
        app.snapshot_store.put(snap.Snapshot(chat_id, 10**15, kept.tip, kept.stored, kept.seal))
        app.chats.take(chat_id)
        assert app.get_chat(chat_id).snapshotted == 0
        assert app.snapshot_store.get(chat_id) is None
        await approve_pending(app, chat_id)
        again = app.snapshot_store.get(chat_id)
        assert again is not None and kept.version < again.version <= app.get_chat(chat_id).version
    finally:
        app.close()


class _NoKey:
    """A key store on which the chat's key row is gone (deleted by hand)."""

    def encrypt_raw(self, *_: object) -> None:
        return None


async def test_a_protected_chat_without_its_key_gets_no_plaintext_snapshot(
        any_store: str) -> None:
    app = app_for(any_store)
    try:
        chat_id = await long_chat(app, 10)
        state = app.get_chat(chat_id).state
        assert snap.take(chat_id, 10, state, app.sealer.keys, _NoKey()) is None  # type: ignore[arg-type]
        assert snap.take(chat_id, 10, state, app.sealer.keys, None) is not None  # unprotected
    finally:
        app.close()


async def test_a_key_store_that_fails_while_sealing_a_snapshot_fails_no_turn(
        store: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The snapshot is taken after its events commit: the key read failing then (its
    database gone away) is logged, and the turn still ends as its events say."""
    app = app_for(store)
    keys = KeyStore.open(app)
    app.protect_personal_data(keys)
    encrypt = keys.encrypt_raw

    def failing(chat_id: UUID, version: int, field: str, plaintext: bytes) -> bytes | None:
        if field.startswith("snapshot-"):
            raise PersistenceError("connection lost")
        return encrypt(chat_id, version, field, plaintext)
    monkeypatch.setattr(keys, "encrypt_raw", failing)
    try:
        with caplog.at_level(logging.WARNING, "interlock.snapshots"):
            chat_id = await long_chat(app, snap.EVERY + 20)
            done = await approve_pending(app, chat_id)
        assert done.finish_reason == "stop"
        assert app.snapshot_store is not None and app.snapshot_store.get(chat_id) is None
        finished = [e for e in app.events.get(chat_id) if isinstance(e, TurnFinished)]
        assert all(e.reason != "failed" for e in finished)
        assert "no snapshot of" in caplog.text and "connection lost" in caplog.text
    finally:
        app.close()


def test_a_long_reader_never_holds_up_a_start_that_moves_the_body_out_of_line(
        pg_store: str, caplog: pytest.LogCaptureFixture) -> None:
    """STORAGE EXTERNAL takes an ACCESS EXCLUSIVE lock; behind a reader it gives up."""
    app = app_for(pg_store)
    table = table_of(app, "interlock_sealed_snapshots")
    assert table is not None
    name = table.name.as_string(None)
    storage = table.sql("SELECT attstorage FROM pg_attribute WHERE attrelid = ?::regclass"
                        " AND attname = 'stored'")
    assert table.run(storage, (name,)) == [("e",)]
    table.run(table.sql("ALTER TABLE {t} ALTER COLUMN stored SET STORAGE EXTENDED"), ())
    app.close()
    url = pg_store.partition("?schema=")[0]
    started: list[Interlock] = []
    with psycopg.connect(url) as reader:  # a transaction left open on the table
        reader.execute(f"SELECT count(*) FROM {name}")
        with caplog.at_level(logging.WARNING, "interlock.snapshots"):
            start = threading.Thread(target=lambda: started.append(app_for(pg_store)))
            start.start()
            start.join(5)
            stuck = start.is_alive()
            reader.rollback()  # a start still waiting gets its lock now: fail, do not hang
            start.join()
        started[0].close()
    assert not stuck, "the start waited behind the reader"
    assert "not stored EXTERNAL yet" in caplog.text and "lock timeout" in caplog.text
    again = app_for(pg_store)  # the next start, nobody in the way
    try:
        table = table_of(again, "interlock_sealed_snapshots")
        assert table is not None and table.run(storage, (name,)) == [("e",)]
    finally:
        again.close()


@pytest.mark.parametrize("still_valid", [True, False], ids=["still valid", "no longer valid"])
async def test_settled_calls_of_another_shape_are_checked_at_load_and_refused_if_bad(
        store: str, monkeypatch: pytest.MonkeyPatch, still_valid: bool) -> None:
    """A snapshot written before ToolCall changed: its settled calls, which a lazy decode
    would only meet in some later command, are decoded at load, where a refusal reads the
    log (the chat loads) instead of failing that command; calls that still validate keep
    the snapshot."""
    app = app_for(store)
    try:
        chat_id = await long_chat(app, snap.EVERY + 20)
        kept = kept_of(app, chat_id)
        state = snap.state_of(kept, app.sealer.keys, None)
        assert state is not None and not state.calls.decoded
        split = Calls.split_json

        def older(calls: Calls, turn: int) -> tuple[list[str], bytes, bytes]:
            refs, held, live = split(calls, turn)
            assert b'"status":"completed"' in held
            if still_valid:
                return refs, held, live
            return refs, held.replace(b'"status":"completed"', b'"status":"done"'), live
        with monkeypatch.context() as patched:
            patched.setattr(Calls, "split_json", older)
            patched.setattr(snap, "calls_shape", lambda: "an-older-shape")
            replace(app, snap.take(chat_id, kept.version, state, app.sealer.keys, None))
        app.chats.take(chat_id)
        loaded = app.get_chat(chat_id)
        if still_valid:  # from the snapshot, its calls checked (decoded) at load
            assert loaded.snapshotted == kept.version and loaded.state.calls.decoded
        else:  # refused at load: read from the log
            assert loaded.snapshotted == 0
        assert loaded.state.model_dump() == from_log(app, chat_id).state.model_dump()
    finally:
        app.close()


async def test_an_encrypted_body_that_does_not_decrypt_is_refused(store: str) -> None:
    """Sealed with our key, yet not what `take` writes: no field, no separator, a field
    that is not text, a cut token. Each is refused, never half-read; the log is read."""
    app = app_for(store)
    keys = KeyStore.open(app)
    app.protect_personal_data(keys)
    try:
        chat_id = await long_chat(app, snap.EVERY + 5)
        kept = kept_of(app, chat_id)
        assert kept.stored.startswith(b"E1:snapshot-")
        assert snap.state_of(kept, app.sealer.keys, keys) is not None
        field = kept.stored.split(b":")[1]
        for stored in (b"E1:", b"E1:no-separator", b"E1:\xff:" + kept.stored[-40:],
                       kept.stored[:-1], b"E1:" + field + b":" + b"short"):
            forged = snap.seal(chat_id, kept.version, kept.tip, stored, app.sealer.keys)
            with pytest.raises(snap.SnapshotRefusedError, match="does not decrypt"):
                snap.state_of(forged, app.sealer.keys, keys)
        replace(app, snap.seal(chat_id, kept.version, kept.tip, b"E1:no-separator",
                               app.sealer.keys))
        app.chats.take(chat_id)
        loaded = app.get_chat(chat_id)
        assert loaded.snapshotted == 0
        assert loaded.state.model_dump() == from_log(app, chat_id).state.model_dump()
    finally:
        app.close()
