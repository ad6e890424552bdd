"""Tamper evidence: recompute each chat's event chain from the stored records.

Each record carries its chain (domain/chain.py, docs/audit.md): format 2 hashes the
record's chat id, version, topic and exact JSON bytes and seals the hash with a named
key; format 1 (older events) is an HMAC over sorted JSON. An edit, a deletion, an
insertion, a swap, a moved event or a chain recomputed without the secret breaks the
chain at the first version touched. A seal by a retired key dated after its retirement,
a chat that goes back to an older key, or an event past the rotation checkpoint naming any
key but the active one (Keyring.uncovered), breaks it too. Dropping a chat's *last* events,
or a whole chat, leaves valid chains: signed checkpoints (audit/checkpoints.py) catch those.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Mapper, Notification
from eventsourcing.utils import TopicError, resolve_topic
from pydantic import TypeAdapter, ValidationError

from interlock.domain.chat.canonical import canonical_json
from interlock.domain.storage.chain import CHAIN_V1, TOPIC, Record, Seals, check_stored_v2
from interlock.domain.storage.keys import Keyring, aware

_PAGE = 5000
_WHEN = TypeAdapter(datetime)  # read as the mapper reads an event's timestamp
Decode = Callable[[bytes], bytes]
Row = tuple[int, str, int, str, bytes]  # position, chat id (canonical text), version, topic, JSON
Rows = Callable[[int, int], Sequence[Row]]  # the rows after a position, at most a limit


@dataclass(frozen=True)
class ChainBreak:
    """The first version of a chat whose event does not verify, and why (0: the whole chat)."""

    chat_id: str
    version: int
    reason: str


@dataclass
class _Chain:
    """Verification state of one chat: where its chain has got to."""

    chat_id: str
    link: str = ""  # the last verified event's link (what the next one chains to)
    version: int = 0
    format: int = 1
    broken: ChainBreak | None = None
    mark: int | None = None  # a version whose link a checkpoint names
    marked: str | None = field(default=None)
    kid: str | None = None  # the key that sealed the last verified event
    stale: frozenset[str] = frozenset()  # keys retired before the checkpoint past `mark`

    def check(self, version: int, topic: str, state: bytes, seals: Seals | None) -> None:
        """Verify the chat's next stored event (`state`: its decoded JSON bytes)."""
        if self.broken is not None:
            return
        expected = self.version + 1
        if version != expected:
            self._break(expected, f"version {expected} missing (found {version})")
            return
        found = check_stored_v2(seals, self.link, self.chat_id, expected, topic, state)
        kid = None
        if found is not None:
            self.format = 2
            chain, problem = found
            link = chain[-129:-65]  # "2:kid:<hash>:<seal>": the hash is the link
            kid = chain[2:-130]
        elif self.format == 2:
            chain, problem = None, "format 1 event after format 2 (downgrade)"
        else:
            record = Record(self.chat_id, expected, topic, state)
            chain, problem, kid = check_v1(seals.keys if seals else None, self.link or None,
                                           record)
            link = chain or ""
        if problem is None and seals is not None and kid is not None:
            keys = seals.keys
            problem = self._key_problem(keys, kid, state)
            if problem is None and (found is None or kid != keys.active):
                problem = keys.uncovered(kid if found is not None else None, self.uuid(),
                                         expected)
        if problem is not None or chain is None:
            self._break(expected, problem or "no chain")
            return
        self.link, self.version, self.kid = link, expected, kid
        if expected == self.mark:
            self.marked = link

    def uuid(self) -> UUID | str:
        """The chat's id as the rotation checkpoint's heads are keyed (a malformed id: as is)."""
        try:
            return UUID(self.chat_id)
        except ValueError:
            return self.chat_id

    def _key_problem(self, keys: Keyring, kid: str, state: bytes) -> str | None:
        """Why the key that sealed the next event may not have sealed it, or None."""
        if self.kid is not None and keys.goes_back(self.kid, kid):
            return f"goes back to an older key {kid!r} after {self.kid!r}"
        if kid in self.stale and self.version >= (self.mark or 0):
            return f"sealed with key {kid!r} after a checkpoint signed once it was retired"
        if kid not in keys.retired:
            return None
        sealed_at = _sealed_at(state)
        if sealed_at is None:
            return "the event's timestamp does not read as a time"
        return keys.late(kid, sealed_at)

    def _break(self, version: int, reason: str) -> None:
        self.broken = ChainBreak(self.chat_id, version, reason)


def _sealed_at(state: bytes) -> datetime | None:
    """The event's timestamp as the application reads it, or None."""
    data = _json_object(state)
    try:
        return _WHEN.validate_python(data.get("timestamp")) if data is not None else None
    except ValidationError:
        return None


def check_v1(keys: Keyring | None, prev: str | None,
             record: Record) -> tuple[str | None, str | None, str | None]:
    """A format 1 record's chain, why it fails if it does, and the id of the key it holds
    under (format 1 names none: each key is tried)."""
    data = _json_object(record.state)
    chain = data.pop("chain", None) if data is not None else None
    if data is None or not isinstance(chain, str) or CHAIN_V1.fullmatch(chain) is None:
        return None, "chain does not match the event", None
    if (data.get("originator_id"), data.get("originator_version")) != (
            str(record.chat_id), record.version):
        return None, "the event's JSON names another chat or version", None
    if not _fits_topic(record.topic, data):
        return None, "the topic does not fit the event", None
    if keys is None:
        return None, "format 1 chains need the secret", None
    message = f"{prev or ''}\n{canonical_json(data)}".encode()
    kid = next((k for k, s in keys.ids() if hmac.compare_digest(_hmac(s, message), chain)), None)
    if kid is None:
        return None, "chain does not match the event", None
    return chain, None, kid


def _json_object(state: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(state)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _fits_topic(topic: str, data: dict[str, Any]) -> bool:
    """Format 1 does not seal the topic: the JSON must hold exactly its class's fields."""
    if TOPIC.fullmatch(topic) is None or not topic.startswith("interlock:"):
        return False
    try:
        cls = resolve_topic(topic)
    except (TopicError, ImportError, AttributeError):
        return False
    fields = getattr(cls, "model_fields", None)
    later: frozenset[str] = getattr(cls, "LATER_FIELDS", frozenset())  # never in format 1
    return fields is not None and \
        set(data) - {"class_version"} == set(fields) - {"chain"} - later


def _hmac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def decoder(mapper: Mapper[Any]) -> Callable[[bytes], bytes]:
    """Undo the mapper's cipher and compressor, if any, to reach the stored JSON."""
    def decode(state: bytes) -> bytes:
        if mapper.cipher:
            state = mapper.cipher.decrypt(state)
        if mapper.compressor:
            state = mapper.compressor.decompress(state)
        return state
    return decode


def library_rows(recorder: ApplicationRecorder) -> Rows:
    """Pages of the log through the recorder API (any store; the fast readers are faster)."""
    def rows(after: int, limit: int) -> Sequence[Row]:
        return [(n.id, str(n.originator_id), n.originator_version, n.topic, n.state)
                for n in recorder.select_notifications(after, limit, inclusive_of_start=False)]
    return rows


class Verifier:
    """Checks chats' chains; `keys=None` checks hashes only.

    `rows` reads the log page by page (interlock/audit/reading.py has fast readers for
    PostgreSQL and SQLite); by default it goes through the recorder API.
    """

    def __init__(self, recorder: ApplicationRecorder, mapper: Mapper[Any],
                 keys: Keyring | None, rows: Rows | None = None) -> None:
        self.recorder = recorder
        self.decode: Decode | None = decoder(mapper) if mapper.cipher or mapper.compressor \
            else None
        self.keys = keys
        self.seals = Seals(keys) if keys is not None else None
        self.rows = rows or library_rows(recorder)
        self.checked = 0
        self.position = 0
        self.chains: dict[str, _Chain] = {}
        self.stale: frozenset[str] = frozenset()

    def checkpointed_at(self, created_at: str) -> None:
        """Past the heads of a checkpoint signed at `created_at` (its marks), no key retired
        before then may seal: a retired key's seal there is forged, however it is dated."""
        signed = datetime.fromisoformat(created_at)
        retired = self.keys.retired.items() if self.keys is not None else ()
        self.stale = frozenset(k for k, at in retired if at < aware(signed))

    def verify_chat(self, chat_id: UUID, mark: int | None = None) -> ChainBreak | None:
        """The first broken version of one chat, or None when it verifies."""
        chain = self.chains[str(chat_id)] = _Chain(str(chat_id), mark=mark, stale=self.stale)
        for stored in self.recorder.select_events(chat_id):
            state = self.decode(stored.state) if self.decode else stored.state
            chain.check(stored.originator_version, stored.topic, state, self.seals)
            self.checked += 1
        if chain.version == 0 and chain.broken is None:
            return ChainBreak(str(chat_id), 0, "no such chat: no events are stored under this id")
        return chain.broken

    def verify_all(self, marks: dict[str, int] | None = None) -> list[ChainBreak]:
        """Every chat in the log, in one pass; the first break of each bad chat."""
        return self.verify_since(0, {}, marks)

    def verify_since(self, position: int, heads: dict[str, tuple[int, str]],
                     marks: dict[str, int] | None = None) -> list[ChainBreak]:
        """The events after `position`, continuing chains from trusted `heads`."""
        marks = marks or {}
        chains, seals, decode = self.chains, self.seals, self.decode
        for chat_id, (version, link) in heads.items():
            chains[chat_id] = _Chain(chat_id, link=link, version=version,
                                     mark=marks.get(chat_id), stale=self.stale)
        self.position = position
        while True:
            page = self.rows(self.position, _PAGE)
            for _, chat_id, version, topic, state in page:
                chain = chains.get(chat_id)
                if chain is None:
                    chain = chains[chat_id] = _Chain(chat_id, mark=marks.get(chat_id),
                                                     stale=self.stale)
                chain.check(version, topic, decode(state) if decode else state, seals)
            self.checked += len(page)
            if page:
                self.position = page[-1][0]
            if len(page) < _PAGE:
                break
        return [c.broken for c in chains.values() if c.broken is not None]

    def heads(self) -> dict[str, tuple[int, str]]:
        """Each verified chat's last intact version and its link (what checkpoints sign)."""
        return {k: (c.version, c.link) for k, c in self.chains.items() if c.version}

    def link_at_mark(self, chat_id: str) -> str | None:
        chain = self.chains.get(chat_id)
        return chain.marked if chain is not None else None

    def notifications(self, start: int = 0) -> Iterator[Notification]:
        """The stored events after position `start`, in log order, page by page."""
        while True:
            page: Sequence[Notification] = self.recorder.select_notifications(
                start, _PAGE, inclusive_of_start=False)
            yield from page
            if len(page) < _PAGE:
                return
            start = page[-1].id
