"""Direct SQL on the checkpoints table, as an intruder with database access would do it."""

from __future__ import annotations

from interlock.audit.checkpoint_log import LOG_ID
from interlock.audit.checkpoints import Checkpoint
from tests.projections.tamper import EventsTable


class CheckpointRows(EventsTable):
    """The stored checkpoints of a store, by sequence number."""

    def __init__(self, store: str) -> None:
        super().__init__(store, LOG_ID, purpose="checkpoints")

    def load(self) -> dict[int, Checkpoint]:
        return {v: Checkpoint.from_json(state) for v, (_, state) in self.records().items()}

    def save(self, seq: int, checkpoint: Checkpoint) -> None:
        self.write_raw(seq, checkpoint.to_json())
