"""Where checkpoints are kept: a table of their own, one row per checkpoint, in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from eventsourcing.persistence import AggregateRecorder, IntegrityError, StoredEvent

from interlock.audit.checkpoints import (
    Checkpoint,
    Head,
    Sign,
    make_checkpoint,
    sealing,
    sorted_heads,
)
from interlock.audit.integrity import ChainBreak, Verifier
from interlock.audit.retention_policy import Entry
from interlock.domain.errors import ConcurrencyError, InvalidRequestError

LOG_ID = uuid5(NAMESPACE_URL, "interlock:checkpoints")
RETENTION_ID = uuid5(NAMESPACE_URL, "interlock:retention")
TOPIC = "interlock:Checkpoint"


class ChainsBrokenError(InvalidRequestError):
    """A checkpoint would bless broken chains: refused, with the breaks."""

    def __init__(self, breaks: list[ChainBreak]) -> None:
        super().__init__(f"{len(breaks)} chat(s) do not verify; no checkpoint was signed",
                         breaks=[b.__dict__ for b in breaks])
        self.breaks = breaks


class KeysNotRotatedError(InvalidRequestError):
    """A retired key no rotation checkpoint covers: a checkpoint would sign whatever its
    holder appended, so none is signed until `interlock audit rotate` runs."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"retired key(s) {', '.join(missing)} are not covered by a rotation "
                         "checkpoint; no checkpoint was signed: run `interlock audit rotate "
                         "--key FILE` first", keys=missing)


class CheckpointLog:
    """The checkpoints of one store, oldest first (eventsourcing aggregate recorder)."""

    def __init__(self, recorder: AggregateRecorder) -> None:
        self.recorder = recorder

    def all(self) -> list[Checkpoint]:
        return [Checkpoint.from_json(e.state) for e in self.recorder.select_events(LOG_ID)]

    def latest(self) -> Checkpoint | None:
        rows = self.recorder.select_events(LOG_ID, desc=True, limit=1)
        return Checkpoint.from_json(rows[0].state) if rows else None

    def get(self, seq: int) -> Checkpoint | None:
        rows = self.recorder.select_events(LOG_ID, gt=seq - 1, lte=seq)
        return Checkpoint.from_json(rows[0].state) if rows else None

    def rotation_of(self, checkpoint: Checkpoint) -> Checkpoint | None:
        """The rotation checkpoint `checkpoint` names in its keys (itself, an older one, or
        None)."""
        seq = (checkpoint.statement.get("keys") or {}).get("rotation")
        if seq is None:
            return None
        return checkpoint if seq == checkpoint.seq else self.get(int(seq))

    def append(self, checkpoint: Checkpoint) -> None:
        record = StoredEvent(LOG_ID, checkpoint.seq, TOPIC, checkpoint.to_json())
        try:
            self.recorder.insert_events([record])
        except IntegrityError:
            raise ConcurrencyError(LOG_ID) from None


class RetentionLog:
    """The signed retention log of one store, oldest entry first."""

    def __init__(self, recorder: AggregateRecorder) -> None:
        self.recorder = recorder

    def all(self) -> list[Entry]:
        return [Entry.from_json(e.state) for e in self.recorder.select_events(RETENTION_ID)]

    def append(self, entry: Entry) -> None:
        record = StoredEvent(RETENTION_ID, entry.seq, "interlock:RetentionEntry", entry.to_json())
        try:
            self.recorder.insert_events([record])
        except IntegrityError:
            raise ConcurrencyError(RETENTION_ID) from None


def removed_chats(entries: list[Entry]) -> dict[str, int]:
    """Each chat the retention log removed, with the version it had."""
    return {r.chat_id: r.version for e in entries for r in e.removals()}


def take_checkpoint(log: CheckpointLog, verifier: Verifier, *, key_id: str, sign: Sign,
                    now: Callable[[], str], retention: list[Entry] | None = None,
                    rotating: bool = False) -> Checkpoint:
    """Verify the events since the last checkpoint, then sign every chat's head.

    Chats the retention log removed leave the heads; the checkpoint names the log's last
    entry, so an entry cannot be dropped unseen. With a retired key, only a rotation
    (`rotating`, interlock/audit/rotation.py) or a store whose retired keys a rotation
    covers is checkpointed; the statement names the keys (`keys`).
    """
    keys = verifier.keys
    if keys is not None and not rotating and not keys.covers():
        covered = keys.rotation.keys if keys.rotation is not None else frozenset()
        raise KeysNotRotatedError(sorted(set(keys.retired) - covered))
    prev = log.latest()
    heads = {h.chat_id: (h.version, h.link) for h in prev.heads} if prev else {}
    if prev is not None:
        verifier.checkpointed_at(prev.statement["created_at"])
    breaks = verifier.verify_since(prev.position if prev else 0, heads)
    if breaks:
        raise ChainsBrokenError(breaks)
    removed = removed_chats(retention or [])
    current = {c: head for c, head in verifier.heads().items() if c not in removed}
    last = retention[-1] if retention else None
    named = None
    if keys is not None:
        rotation = (prev.seq + 1 if prev else 1) if rotating else (
            keys.rotation.seq if keys.rotation is not None else None)
        named = sealing(keys.active, {k: at.isoformat() for k, at in sorted(
            keys.retired.items())}, rotation)
    checkpoint = make_checkpoint(sorted_heads(current), prev=prev,
                                 position=verifier.position, created_at=now(), key_id=key_id,
                                 sign=sign,
                                 retention=[last.seq, last.digest()] if last else None,
                                 keys=named)
    log.append(checkpoint)
    return checkpoint


def against_checkpoint(checkpoint: Checkpoint, verifier: Verifier, only: str | None = None,
                       removed: dict[str, int] | None = None) -> list[ChainBreak]:
    """Chats, or tails of chats, that the checkpoint lists and the store no longer holds.

    The verifier must have run with `marks` set to the checkpoint's versions; chats the
    retention log `removed` (at or after the listed version) may be gone.
    """
    removed = removed or {}
    found = []
    for head in checkpoint.heads:
        if only is not None and head.chat_id != only:
            continue
        problem = _against_head(head, verifier.chains.get(head.chat_id), checkpoint.seq,
                                removed.get(head.chat_id, -1) >= head.version)
        if problem is not None:
            found.append(problem)
    return found


def _against_head(head: Head, chain: Any, seq: int, removed: bool) -> ChainBreak | None:
    if chain is None or (chain.version == 0 and chain.broken is None):
        return None if removed else ChainBreak(
            head.chat_id, 0, f"deleted: checkpoint {seq} lists it at version {head.version}")
    if chain.broken is not None and chain.broken.version <= head.version:
        return None  # reported by the chain itself
    if chain.version < head.version:
        return ChainBreak(head.chat_id, chain.version + 1,
                          f"tail cut: checkpoint {seq} lists version {head.version}, "
                          f"the store ends at {chain.version}")
    if chain.marked != head.link:
        return ChainBreak(head.chat_id, head.version,
                          f"differs from checkpoint {seq} (history rewritten)")
    return None
