"""Tamper evidence: recompute each chat's HMAC chain from the stored events.

Each stored event's JSON carries `chain` = HMAC(secret, prev_chain + "\\n" + canonical
payload), the payload including its originator id and version. An edit, a deletion, an
insertion, a swap or a chain recomputed without the secret breaks the chain at the first
version touched. (Dropping a chat's *last* events leaves a shorter valid chain: compare
with a trusted version count, e.g. the chat summaries, to catch truncation.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Mapper, Notification, StoredEvent

from interlock.domain.persistence import Sealer

_PAGE = 2000


@dataclass(frozen=True)
class ChainBreak:
    """The first version of a chat whose event does not verify, and why."""

    chat_id: str
    version: int
    reason: str


@dataclass
class _Chain:
    """Verification state of one chat: where its chain has got to."""

    chat_id: str
    tip: str | None = None
    version: int = 0
    broken: ChainBreak | None = None

    def check(self, stored: StoredEvent, sealer: Sealer, decode: Callable[[bytes], bytes]) -> None:
        if self.broken is not None:
            return
        expected = self.version + 1
        if stored.originator_version != expected:
            found = stored.originator_version
            self.broken = ChainBreak(self.chat_id, expected,
                                     f"version {expected} missing (found {found})")
            return
        chain, payload = _payload(stored, decode)
        if chain is None or sealer.digest(self.tip, payload) != chain:
            self.broken = ChainBreak(self.chat_id, expected, "chain does not match the event")
            return
        self.tip, self.version = chain, expected


def _payload(stored: StoredEvent, decode: Callable[[bytes], bytes]) -> tuple[str | None, Any]:
    try:
        data = json.loads(decode(stored.state))
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    chain = data.pop("chain", None)
    data.pop("class_version", None)
    data["originator_id"] = str(stored.originator_id)
    data["originator_version"] = stored.originator_version
    return chain if isinstance(chain, str) else None, data


def decoder(mapper: Mapper[Any]) -> Callable[[bytes], bytes]:
    """Undo the mapper's cipher and compressor, if any, to reach the stored JSON."""
    def decode(state: bytes) -> bytes:
        if mapper.cipher:
            state = mapper.cipher.decrypt(state)
        if mapper.compressor:
            state = mapper.compressor.decompress(state)
        return state
    return decode


class Verifier:
    """Checks chats' chains against the server secret, reading through the recorder API."""

    def __init__(self, recorder: ApplicationRecorder, mapper: Mapper[Any], sealer: Sealer) -> None:
        self.recorder = recorder
        self.decode = decoder(mapper)
        self.sealer = sealer
        self.checked = 0

    def verify_chat(self, chat_id: UUID) -> ChainBreak | None:
        """The first broken version of one chat, or None when it verifies."""
        chain = _Chain(str(chat_id))
        for stored in self.recorder.select_events(chat_id):
            chain.check(stored, self.sealer, self.decode)
            self.checked += 1
        return chain.broken

    def verify_all(self) -> list[ChainBreak]:
        """Every chat in the log, in one pass; the first break of each bad chat."""
        chains: dict[str, _Chain] = {}
        for stored in self._notifications():
            key = str(stored.originator_id)
            chain = chains.get(key)
            if chain is None:
                chain = chains[key] = _Chain(key)
            chain.check(stored, self.sealer, self.decode)
            self.checked += 1
        return [c.broken for c in chains.values() if c.broken is not None]

    def _notifications(self) -> Iterator[Notification]:
        start = 0
        while True:
            page: Sequence[Notification] = self.recorder.select_notifications(
                start, _PAGE, inclusive_of_start=False)
            yield from page
            if len(page) < _PAGE:
                return
            start = page[-1].id
