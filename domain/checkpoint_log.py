"""Where checkpoints are kept: a table of their own, one row per checkpoint, in order."""

from __future__ import annotations

from collections.abc import Callable
from uuid import NAMESPACE_URL, uuid5

from eventsourcing.persistence import AggregateRecorder, IntegrityError, StoredEvent

from interlock.domain.checkpoints import Checkpoint, Sign, make_checkpoint, sorted_heads
from interlock.domain.errors import ConcurrencyError, InvalidRequestError
from interlock.domain.integrity import ChainBreak, Verifier

LOG_ID = uuid5(NAMESPACE_URL, "interlock:checkpoints")
TOPIC = "interlock:Checkpoint"


class ChainsBrokenError(InvalidRequestError):
    """A checkpoint would bless broken chains: refused, with the breaks."""

    def __init__(self, breaks: list[ChainBreak]) -> None:
        super().__init__(f"{len(breaks)} chat(s) do not verify; no checkpoint was signed",
                         breaks=[b.__dict__ for b in breaks])
        self.breaks = breaks


class CheckpointLog:
    """The checkpoints of one store, oldest first (eventsourcing aggregate recorder)."""

    def __init__(self, recorder: AggregateRecorder) -> None:
        self.recorder = recorder

    def all(self) -> list[Checkpoint]:
        return [Checkpoint.from_json(e.state) for e in self.recorder.select_events(LOG_ID)]

    def latest(self) -> Checkpoint | None:
        rows = self.recorder.select_events(LOG_ID, desc=True, limit=1)
        return Checkpoint.from_json(rows[0].state) if rows else None

    def append(self, checkpoint: Checkpoint) -> None:
        record = StoredEvent(LOG_ID, checkpoint.seq, TOPIC, checkpoint.to_json())
        try:
            self.recorder.insert_events([record])
        except IntegrityError:
            raise ConcurrencyError(LOG_ID) from None


def take_checkpoint(log: CheckpointLog, verifier: Verifier, *, key_id: str, sign: Sign,
                    now: Callable[[], str]) -> Checkpoint:
    """Verify the events since the last checkpoint, then sign every chat's head."""
    prev = log.latest()
    heads = {h.chat_id: (h.version, h.link) for h in prev.heads} if prev else {}
    breaks = verifier.verify_since(prev.position if prev else 0, heads)
    if breaks:
        raise ChainsBrokenError(breaks)
    checkpoint = make_checkpoint(sorted_heads(verifier.heads()), prev=prev,
                                 position=verifier.position, created_at=now(), key_id=key_id,
                                 sign=sign)
    log.append(checkpoint)
    return checkpoint


def against_checkpoint(checkpoint: Checkpoint, verifier: Verifier,
                       only: str | None = None) -> list[ChainBreak]:
    """Chats, or tails of chats, that the checkpoint lists and the store no longer holds.

    The verifier must have run with `marks` set to the checkpoint's versions.
    """
    seq = checkpoint.seq
    found = []
    for head in checkpoint.heads:
        if only is not None and head.chat_id != only:
            continue
        chain = verifier.chains.get(head.chat_id)
        if chain is None or (chain.version == 0 and chain.broken is None):
            found.append(ChainBreak(head.chat_id, 0, f"deleted: checkpoint {seq} lists it "
                                                     f"at version {head.version}"))
        elif chain.broken is not None and chain.broken.version <= head.version:
            continue  # reported by the chain itself
        elif chain.version < head.version:
            found.append(ChainBreak(head.chat_id, chain.version + 1,
                                    f"tail cut: checkpoint {seq} lists version {head.version}, "
                                    f"the store ends at {chain.version}"))
        elif chain.marked != head.link:
            found.append(ChainBreak(head.chat_id, head.version,
                                    f"differs from checkpoint {seq} (history rewritten)"))
    return found
