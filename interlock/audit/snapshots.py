"""`verify` of the sealed snapshots: each one's seal, and its tip against the log's chain."""

from __future__ import annotations

from uuid import UUID

from eventsourcing.domain import OriginatorVersionError

from interlock.audit.integrity import ChainBreak
from interlock.domain import Interlock
from interlock.domain.errors import InterlockError
from interlock.domain.storage.keys import Keyring
from interlock.domain.storage.snapshots import against_log


def snapshot_breaks(app: Interlock, keys: Keyring | None,
                    only: UUID | None = None) -> list[ChainBreak]:
    """A break for each snapshot a load would refuse (the chat or every chat)."""
    store = app.snapshot_store
    if store is None:
        return []
    breaks = []
    for chat_id in [only] if only is not None else store.chats():
        kept = store.get(chat_id)
        if kept is None:
            continue
        why = against_log(kept, keys, _logged_chain(app, chat_id, kept.version))
        if why is not None:
            breaks.append(ChainBreak(str(chat_id), kept.version, f"snapshot: {why}"))
    return breaks


def _logged_chain(app: Interlock, chat_id: UUID, version: int) -> str | None:
    try:
        events = list(app.events.get(chat_id, gt=version - 1, lte=version))
    except (InterlockError, OriginatorVersionError):
        return None  # the event itself is refused: its chain check says why
    chain = getattr(events[0], "chain", None) if events else None
    return chain if isinstance(chain, str) else None
