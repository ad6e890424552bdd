"""How chats are stored: the pydantic mapper and the sealer of the event chain."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import TopicError, resolve_topic

from interlock.domain.chat.canonical import canonical_json
from interlock.domain.chat.events import ChatEvent
from interlock.domain.errors import InternalError
from interlock.domain.storage.chain import Record, chain_v2, key_of, link_value, with_chain
from interlock.domain.storage.erasure import MARKER, PERSONAL, FieldCipher, open_fields, sealed_body
from interlock.domain.storage.keys import Keyring


class TamperedEventError(InternalError):
    """A stored event contradicts its own record: the store was edited, never trust it."""


    def __init__(self, chat_id: object, version: int, problem: str) -> None:
        super().__init__(f"stored event {chat_id}#{version} refused: {problem}",
                         chat_id=str(chat_id), version=version)


def event_body(event: Any) -> bytes:
    """The event's JSON without its chain: the bytes a version 2 seal covers."""
    cls = type(event)
    if cls.class_version > 1:
        data = event.model_dump(mode="json", exclude={"chain"})
        data["class_version"] = cls.class_version
        return json.dumps(data, separators=(",", ":")).encode()
    body: bytes = event.__pydantic_serializer__.to_json(event, exclude={"chain"})
    return body


class PydanticMapper(Mapper[UUID]):
    """Events are pydantic models: JSON out through pydantic-core, validated back in.

    The stored JSON is the whole event (ids included) with its chain as the last member,
    so the common case decodes in one `model_validate_json`; an event class past
    version 1 goes through its upcasters. A record whose JSON ids disagree with its
    columns, or whose topic is not an Interlock class, or that names a key retired before
    its timestamp, or that names any key but the active one past its chat's version in the
    rotation checkpoint (Keyring.uncovered), is refused (TamperedEventError).
    """

    personal: FieldCipher | None = None  # set by Interlock.protect_personal_data
    keys: Keyring | None = None  # the chain's keys: late or uncovered seals are refused

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Encrypted bodies the sealer made, kept until the event is stored (same bytes, once)
        self._sealed: dict[tuple[UUID, int], tuple[Any, bytes]] = {}

    def event_body(self, event: Any) -> bytes:
        """The sealed bytes: personal fields encrypted when a key store is attached."""
        if self.personal is None or event.TOPIC not in PERSONAL:
            return event_body(event)
        kept = self._sealed.get(_place(event))
        if kept is not None and (kept[0] is event or _copy_of(event, kept[0])):
            return kept[1]  # the event sealed (its chain set in place), or a copy of it
        # deterministic (nonces derive from the place): sealer and mapper agree
        body = sealed_body(event, self.personal) or event_body(event)
        if len(self._sealed) > 4096:  # events sealed but never stored (a failed commit)
            self._sealed.clear()
        self._sealed[_place(event)] = (event, body)
        return body

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        body = self.event_body(domain_event)
        self._sealed.pop(_place(domain_event), None)
        chain = getattr(domain_event, "chain", None)
        state = with_chain(body, chain) if chain is not None else body
        if self.compressor:
            state = self.compressor.compress(state)
        if self.cipher:
            state = self.cipher.encrypt(state)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=type(domain_event).TOPIC,
            state=state,
        )

    def reads_as_committed(self, event: Any) -> bool:
        """Whether decoding `event`'s stored record now gives `event` back: it holds no
        personal data, or its chat's key is still there (an erased chat reads back its
        placeholders). Readers handed the events a commit just wrote ask this first."""
        return self.personal is None or event.TOPIC not in PERSONAL or self.personal.readable(
            event.originator_id)

    def warm(self, stored: Sequence[StoredEvent]) -> None:
        """Read together the keys that decoding these records will take: a reader about to
        decode another process's events asks once for all their chats, not once a chat."""
        if self.personal is not None:
            chats = {s.originator_id for s in stored
                     if s.topic in PERSONAL and isinstance(s.originator_id, UUID)}
            if chats:
                self.personal.warm(list(chats))

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        cls = _event_class(stored_event)
        state = stored_event.state
        if self.cipher:
            state = self.cipher.decrypt(state)
        if self.compressor:
            state = self.compressor.decompress(state)
        try:
            event = _decode(cls, state, self.personal)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise _refused(stored_event, f"does not decode as {stored_event.topic}") from exc
        if (event.originator_id, event.originator_version) != (
            stored_event.originator_id, stored_event.originator_version):
            raise _refused(stored_event, "its JSON names another chat or version")
        keys = self.keys
        if keys is not None and keys.retired:
            kid = key_of(event.chain)
            if kid != keys.active:  # the active key's events: nothing more to check
                late = keys.late(kid or "", event.timestamp) or keys.uncovered(
                    kid, event.originator_id, event.originator_version)
                if late is not None:
                    raise _refused(stored_event, late)
        return event


def _place(event: Any) -> tuple[UUID, int]:
    return event.originator_id, event.originator_version


def _copy_of(event: Any, sealed: Any) -> bool:
    """Whether `event` is `sealed` with its chain set (chat.seal copies): the same objects."""
    mine, theirs = event.__dict__, sealed.__dict__
    return type(event) is type(sealed) and mine.keys() == theirs.keys() and all(
        value is theirs[name] for name, value in mine.items() if name != "chain")


def _event_class(stored: StoredEvent) -> Any:
    if not stored.topic.startswith("interlock:"):
        raise _refused(stored, f"unknown topic {stored.topic!r}")
    try:
        cls = resolve_topic(stored.topic)
    except (TopicError, ImportError, AttributeError):
        raise _refused(stored, f"unknown topic {stored.topic!r}") from None
    if not (isinstance(cls, type) and issubclass(cls, ChatEvent)):
        raise _refused(stored, f"topic {stored.topic!r} is not a sealed event class")
    return cls


def _decode(cls: Any, state: bytes, personal: FieldCipher | None) -> Any:
    data = json.loads(state) if b'"$personal"' in state else None
    if isinstance(data, dict) and MARKER in data:
        open_fields(data, cls.TOPIC, personal)
    elif getattr(cls, "class_version", 1) == 1:
        return cls.model_validate_json(state)
    else:
        data = json.loads(state)
    from_version = data.pop("class_version", 1)
    while from_version < getattr(cls, "class_version", 1):
        getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(data)
        from_version += 1
    return cls.model_validate(data)


def _refused(stored: StoredEvent, problem: str) -> TamperedEventError:
    return TamperedEventError(stored.originator_id, stored.originator_version, problem)


class Sealer:
    """Chains each event to the previous one of its chat: format 2, with the active key."""

    def __init__(self, keys: bytes | Keyring) -> None:
        self.keys = keys if isinstance(keys, Keyring) else Keyring.single(keys)
        self.body: Callable[[Any], bytes] = event_body  # the mapper's, once data is protected

    def sign(self, prev: str | None, event: ChatEvent) -> str:
        """The chain of `event`, following the chain `prev` of the event before it."""
        record = Record(event.originator_id, event.originator_version, event.TOPIC,
                        self.body(event))
        return chain_v2(self.keys, link_value(prev), record)

    def digest(self, prev: str | None, payload: dict[str, Any], secret: bytes | None = None) -> str:
        """A format 1 seal (older events): HMAC over the previous chain and sorted JSON."""
        message = f"{prev or ''}\n{canonical_json(payload)}".encode()
        key = self.keys.secret(self.keys.active) if secret is None else secret
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    def sign_v1(self, prev: str | None, event: ChatEvent) -> str:
        """A format 1 chain, as Interlock wrote before format 2 (for tests of old stores)."""
        return self.digest(prev, event.model_dump(mode="json", exclude={"chain"}))
