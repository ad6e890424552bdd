"""How chats are stored: the pydantic mapper and the HMAC event chain."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import resolve_topic

from interlock.domain.canonical import canonical_json
from interlock.domain.events import ChatEvent


class PydanticMapper(Mapper[UUID]):
    """Events are pydantic models: JSON out through pydantic-core, validated back in.

    The stored JSON is the whole event (ids included), so the common case decodes in
    one `model_validate_json`; an event class past version 1 goes through its upcasters.
    """

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        cls = type(domain_event)
        if cls.class_version > 1:
            data = domain_event.model_dump(mode="json")
            data["class_version"] = cls.class_version
            state = json.dumps(data, separators=(",", ":")).encode()
        else:
            state = domain_event.__pydantic_serializer__.to_json(domain_event)
        if self.compressor:
            state = self.compressor.compress(state)
        if self.cipher:
            state = self.cipher.encrypt(state)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=cls.TOPIC,
            state=state,
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        cls = resolve_topic(stored_event.topic)
        state = stored_event.state
        if self.cipher:
            state = self.cipher.decrypt(state)
        if self.compressor:
            state = self.compressor.decompress(state)
        if getattr(cls, "class_version", 1) == 1:
            return cls.model_validate_json(state)
        data = json.loads(state)
        from_version = data.pop("class_version", 1)
        while from_version < getattr(cls, "class_version", 1):
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(data)
            from_version += 1
        data["originator_id"] = stored_event.originator_id
        data["originator_version"] = stored_event.originator_version
        return cls.model_validate(data)


class Sealer:
    """Chains each event to the previous one of its chat with a keyed hash."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def digest(self, prev: str | None, payload: dict[str, Any]) -> str:
        message = f"{prev or ''}\n{canonical_json(payload)}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def sign(self, prev: str | None, event: ChatEvent) -> str:
        return self.digest(prev, event.model_dump(mode="json", exclude={"chain"}))
