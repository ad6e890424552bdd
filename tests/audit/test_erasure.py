"""Erasure: destroying a chat's key leaves no plaintext anywhere, and everything verifies."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import Interlock, RespondEntry
from interlock.domain.chat.events import ChatEvent, TurnFinished
from interlock.domain.errors import InvalidRequestError
from interlock.domain.storage import snapshots
from interlock.domain.storage.erasure import ERASED, PERSONAL, sealed_body
from interlock.domain.streams import StreamEvent
from interlock.projections import open_views
from interlock.stores.erasure_keys import KeyStore
from tests.audit.test_checkpoints import keys  # noqa: F401 - the fixture
from tests.audit.test_export import standalone
from tests.projections.flows import AGENTS
from tests.projections.tamper import EventsTable

pytestmark = pytest.mark.anyio
SECRET = "zebulonquartz"  # the data subject's name, in every kind of personal field


@pytest.fixture
def protected(store: str) -> Iterator[Interlock]:
    app = build_service(store, AGENTS)
    app.protect_personal_data(KeyStore.open(app))
    yield app
    app.close()


async def _subject_chat(app: Interlock, subject: str = SECRET) -> UUID:
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank",
                          metadata={"customer": subject})
    result = await app.send(chat.id, f"transfer $5000 to {subject}", actor="alice")
    approve = RespondEntry(ref=result.interrupts[0].ref, name="userApproval",
                           output={"approved": True, "feedback": f"ok for {subject}"})
    await app.resume(chat.id, respond=[approve], actor="bob")
    return chat.id


def _views(app: Interlock, store: str) -> str:
    models = open_views(app)
    try:
        models.catch_up()
        return json.dumps([r.view.dump() for r in models.runners], default=str)
    finally:
        models.close()


async def test_after_erasure_no_plaintext_is_left_and_everything_verifies(
    protected: Interlock, store: str, keys: tuple[str, str], tmp_path: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    chat_id = await _subject_chat(protected)
    await _subject_chat(protected, "dave")
    stored = b"".join(s for _, s in EventsTable(store, chat_id).records().values())
    assert SECRET.encode() not in stored  # encrypted at rest from the start
    assert SECRET in _views(protected, store)  # readable while the key lives
    assert main(["audit", "checkpoint", "--key", keys[0], "--store", store]) == 0
    events_before = protected.recorder.max_notification_id()
    pending = protected.get_chat(chat_id).pending_interrupts()

    assert main(["audit", "erase", str(chat_id), "--store", store]) == 0
    # the events stay; what was pending is withdrawn first, and ends the turn (D31); then
    # the chat records that its erasure began (no fork of it from then on)
    kinds = [type(e).__name__ for e in protected.chat_events(chat_id)]
    closing = kinds[-3:-1] if pending else []
    assert kinds[-1] == "ErasureBegun"
    assert protected.recorder.max_notification_id() == events_before + len(closing) + 1
    assert closing in ([], ["InterruptWithdrawn", "TurnFinished"])
    assert main(["verify", "--all", "--public-key", keys[1], "--store", store]) == 0
    reader = build_service(store, AGENTS)
    reader.protect_personal_data(KeyStore.open(reader))
    try:
        state = reader.get_chat(chat_id).state
        assert state.messages[0].text == ERASED and state.metadata == {}
        assert SECRET not in _views(reader, store)
        assert "dave" in _views(reader, store)  # other chats keep their data
    finally:
        reader.close()
    export = tmp_path / "events.jsonl"
    assert main(["audit", "export", "--format", "events", "-o", str(export), "--key", keys[0],
                 "--store", store]) == 0
    assert standalone(str(export), "--public-key", keys[1]) == (0, "export verifies\n")
    decisions = tmp_path / "decisions.csv"
    assert main(["audit", "export", "-o", str(decisions), "--store", store]) == 0
    assert SECRET not in export.read_text() + decisions.read_text()
    assert main(["replay", str(chat_id), "--store", store]) == 0
    out = capsys.readouterr().out
    assert "personal data of this chat was erased at" in out and SECRET not in out
    assert SECRET not in caplog.text


async def test_a_null_that_reads_back_null_once_erased_is_not_encrypted(
    protected: Interlock, store: str
) -> None:
    chat_id = await _subject_chat(protected)
    records = EventsTable(store, chat_id).records()
    stored = {v: json.loads(state) for v, (_, state) in records.items()}
    finished = [stored[e.originator_version] for e in protected.chat_events(chat_id)
                if isinstance(e, TurnFinished)]
    assert finished and all(s["error"] is None and "$personal" not in s for s in finished)
    [responded] = [s for _, s in sorted(stored.items()) if "input_sha256" in s
                   and "output" in s]
    assert responded["metadata"] is None and set(responded["output"]) == {"$erasable"}
    assert protected.get_chat(chat_id).state.calls[responded["ref"]].output == {
        "approved": True, "feedback": f"ok for {SECRET}"}
    cipher = protected.mapper.personal
    assert isinstance(cipher, KeyStore)
    cipher.erase(chat_id)
    last = protected.chat_events(chat_id)[-1]
    more = TurnFinished(originator_id=chat_id, originator_version=last.originator_version + 1,
                        timestamp=last.timestamp, reason="stop")
    with pytest.raises(InvalidRequestError, match="was erased"):  # nothing to seal, still no
        sealed_body(more, cipher)


async def test_views_apply_what_this_process_committed_without_decoding_it_again(
    protected: Interlock, store: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    models = open_views(protected)
    protected.commit_listeners.append(models.committed)  # as the live runner does
    decoded: list[int] = []
    decode = protected.mapper.to_domain_event
    monkeypatch.setattr(protected.mapper, "to_domain_event",
                        lambda stored: decoded.append(1) or decode(stored))
    try:
        await _subject_chat(protected)
        models.catch_up()
        assert decoded == []  # every event was handed over by its commit
        handed = [r.view.dump() for r in models.runners]
        assert SECRET in json.dumps(handed, default=str)
        for runner in models.runners:
            runner.rebuild()  # from the log alone, every event decoded
        assert decoded != []
        assert [r.view.dump() for r in models.runners] == handed  # the same rows, exactly
    finally:
        models.close()


async def test_a_chat_erased_before_the_views_apply_its_commit_reads_back_erased(
    protected: Interlock, store: str,
) -> None:
    """The events a commit hands to the views stand in for the log only while decoding the
    log would give them: once the chat is erased, the views read the placeholders."""
    models = open_views(protected)
    protected.commit_listeners.append(models.committed)
    try:
        chat_id = await _subject_chat(protected)
        cipher = protected.mapper.personal
        assert isinstance(cipher, KeyStore)
        cipher.erase(chat_id)
        models.catch_up()
        rows = json.dumps([r.view.dump() for r in models.runners], default=str)
        assert SECRET not in rows
    finally:
        models.close()


async def test_a_chat_stored_in_plaintext_cannot_be_erased_by_key(
    app: Interlock, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    assert main(["audit", "erase", str(chat.id), "--store", store]) == 2
    assert "stored in plaintext" in capsys.readouterr().err
    assert [type(e).__name__ for e in app.chat_events(chat.id)] == ["ChatStarted"]  # nothing
    done = await app.send(chat.id, "Transfer $5 to savings.", actor="alice")  # nor refused
    assert done.finish_reason == "interrupted"
    unknown = uuid4()  # said so: not mistaken for a chat kept in plaintext
    assert main(["audit", "erase", str(unknown), "--store", store]) == 2
    assert f"chat {unknown} not found" in capsys.readouterr().err


async def test_a_chat_begun_in_plaintext_stays_so_once_protection_is_on(
    app: Interlock, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    reader = build_service(store, AGENTS)
    reader.protect_personal_data(KeyStore.open(reader))
    try:
        await reader.send(chat.id, f"transfer $50 to {SECRET}", actor="alice")
    finally:
        reader.close()
    stored = b"".join(s for _, s in EventsTable(store, chat.id).records().values())
    assert SECRET.encode() in stored and b'"$personal"' not in stored  # no half-erasable chat
    assert main(["audit", "erase", str(chat.id), "--store", store]) == 2
    assert "stored in plaintext" in capsys.readouterr().err


_NOT_PERSONAL = {"agent", "tenant", "actor", "ref", "name", "usage", "reason", "terms", "vote",
                 "outcome", "expires_at", "fingerprint", "input_sha256", "replaced_input_sha256",
                 "edited_input_sha256", "request_key", "request_sha256", "source_id",
                 "source_version", "fork_id", "version",
                 "as_part",  # a flag: the respond came as a raw Genkit part
                 "requests",  # a reply's requests: refs and tool names, as ToolRequested's
                 "stage", "next_stage", "stages_apply",  # a staged policy's positions
                 "for_actor", "delegation_id"}  # a delegated vote: a principal, as actor is


def test_every_event_field_that_can_hold_personal_data_is_erasable() -> None:
    def kinds(cls: type[ChatEvent]) -> list[type[ChatEvent]]:
        """Interlock's chat event classes (not those other tests define). Streams that are
        no chat (webhook subscriptions, notification channels, reviews) hold operators'
        settings and reviewers' findings, not a chat subject's data: no chat key covers
        them."""
        return [k for sub in cls.__subclasses__() for k in (sub, *kinds(sub))
                if k.__module__.startswith("interlock.") and not issubclass(k, StreamEvent)]

    def checked(cls: type[ChatEvent]) -> set[str]:
        own = set(cls.model_fields) - set(ChatEvent.model_fields)
        reason = cls.model_fields.get("reason")
        free_text = reason is not None and reason.annotation in (str, str | None)
        return own - _NOT_PERSONAL | ({"reason"} if free_text else set())  # not a Literal

    missing = {(k.TOPIC, f) for k in kinds(ChatEvent) for f in checked(k)
               if f not in PERSONAL.get(k.TOPIC, {})}
    assert missing == set()


async def test_chats_read_together_read_their_keys_together(
    protected: Interlock, store: str
) -> None:
    """The sweeper's page of chats: keys in one query, the same chats as loaded one by one,
    an erased chat read as erased and a plaintext chat as plaintext."""
    plain = build_service(store, AGENTS)
    try:
        unprotected = plain.start_chat("bankingAgent", actor="alice", tenant="bank").id
    finally:
        plain.close()
    ids = [await _subject_chat(protected) for _ in range(3)]
    assert main(["audit", "erase", str(ids[0]), "--store", store]) == 0
    reader = build_service(store, AGENTS)  # a process with nothing cached
    store_keys = KeyStore.open(reader)
    reader.protect_personal_data(store_keys)
    queries: list[object] = []
    run = store_keys.backend.run  # type: ignore[attr-defined]
    store_keys.backend.run = lambda statement, params: queries.append(statement) or run(  # type: ignore[attr-defined]
        statement, params)
    try:
        together = reader.get_chats([*ids, unprotected])
        assert len(queries) == 1  # every key at once, none afterwards while decrypting
        assert SECRET not in json.dumps(together[ids[0]].state.model_dump(mode="json"))
        assert all(SECRET in together[c].state.messages[0].text for c in ids[1:])
        assert together[unprotected].state.agent == "bankingAgent"
        for chat_id in [*ids, unprotected]:
            assert together[chat_id].state == reader.get_chat(chat_id).state
    finally:
        reader.close()


class _ErasedDuringRead:
    """A key store's backend on which the chat is erased while a read of its key is under
    way: the read returns the key it found, the erasure has already been cached."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.store: KeyStore | None = None

    def get(self, chat_id: UUID) -> tuple[bytes | None, str | None]:
        assert self.store is not None
        self.store._keep(chat_id, (None, "2026-12-01T00:00:00+00:00"))  # what erase() caches
        return (self.key, None)  # what the read found before the erasure

    def get_many(self, chat_ids: list[UUID]) -> dict[UUID, tuple[bytes | None, str | None]]:
        return {c: self.get(c) for c in chat_ids}


@pytest.mark.parametrize("read", ["one", "page"])
def test_an_erasure_during_a_key_read_is_not_undone_by_that_read(read: str) -> None:
    """What a read found before an erasure must not replace the erasure in the cache, or
    the chat would still decrypt here for up to TTL seconds."""
    from uuid import uuid4

    backend = _ErasedDuringRead(b"k" * 32)
    store = backend.store = KeyStore(backend)  # type: ignore[arg-type]
    chat = uuid4()
    if read == "page":
        store.warm([chat])
    assert store.decrypt(chat, 1, "text", "irrelevant") is None
    assert store.erased_at(chat) is not None


def test_a_page_of_keys_larger_than_one_statement_is_read_in_chunks(store: str) -> None:
    """SQLite takes at most 999 parameters: 501 chats are two reads, every key found."""
    from uuid import uuid4

    from interlock.stores.erasure_keys import _Sql
    from interlock.stores.tables import MANY

    app = build_service(store, AGENTS)
    try:
        writer = KeyStore.open(app)
        chats = [uuid4() for _ in range(MANY + 1)]
        # written at once (on PostgreSQL a key is otherwise written with the chat's first events)
        keys_of = {c: _Sql.add(writer.backend, c, bytes([i % 256]) * 32)[0]  # type: ignore[arg-type]
                   for i, c in enumerate(chats)}
        reader = KeyStore.open(app)
        reads: list[object] = []
        run = reader.backend.run  # type: ignore[attr-defined]
        reader.backend.run = lambda statement, params: reads.append(statement) or run(  # type: ignore[attr-defined]
            statement, params)
        reader.warm([*chats, uuid4()])  # and one chat with no key
        assert len(reads) == 2
        assert all(reader._row(c)[0] == keys_of[c] for c in chats) and len(reads) == 2
    finally:
        app.close()


async def test_a_long_chats_snapshot_is_encrypted_and_unreadable_once_erased(
    protected: Interlock, store: str,
) -> None:
    chat = protected.start_chat("bankingAgent", actor="alice", tenant="bank")
    while protected.get_chat(chat.id).version <= snapshots.EVERY:
        result = await protected.send(chat.id, f"transfer $5 to {SECRET}", actor="alice")
        await protected.resume(chat.id, respond=[RespondEntry(
            ref=result.interrupts[0].ref, name="userApproval", output={"approved": True})],
            actor="bob")
    assert protected.snapshot_store is not None
    kept = protected.snapshot_store.get(chat.id)
    assert kept is not None and SECRET.encode() not in kept.stored  # encrypted at rest
    assert SECRET in protected.get_chat(chat.id).state.messages[0].text
    assert main(["audit", "erase", str(chat.id), "--store", store]) == 0
    reader = build_service(store, AGENTS)
    reader.protect_personal_data(KeyStore.open(reader))
    try:
        loaded = reader.get_chat(chat.id)
        assert loaded.snapshotted == 0  # the snapshot no longer opens: read from the log
        assert loaded.state.messages[0].text == ERASED
        assert SECRET not in loaded.state.model_dump_json()
    finally:
        reader.close()
