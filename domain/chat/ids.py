"""A chat id as text, remembered: `str(UUID)` runs Python (`UUID.__str__` formats all 32
digits and joins five slices), about 6,500 instructions a call, and a served cycle asked
for the same few ids some eighty times (the views, the key store, the chain, the tools'
context). Keyed by the id's integer, a slot read that costs no Python call to hash."""

from __future__ import annotations

from uuid import UUID

_KEPT = 4096  # ids remembered; past that the memory starts again (a busy server's ids)
_TEXT: dict[int, str] = {}


def id_text(chat_id: UUID | str) -> str:
    """`str(chat_id)` (an id already text is itself)."""
    if type(chat_id) is str:
        return chat_id
    key = chat_id.int  # type: ignore[union-attr]
    text = _TEXT.get(key)
    if text is None:
        if len(_TEXT) >= _KEPT:
            _TEXT.clear()
        text = _TEXT[key] = str(chat_id)
    return text
