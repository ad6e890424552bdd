"""Server-Sent Events parsing: lines in, `StreamEvent`s out; an `error` event raises."""

from __future__ import annotations

import json

from interlock.client._errors import from_body
from interlock.client._models import StreamEvent


class EventParser:
    """Feed decoded lines; `feed` returns an event when a blank line ends one."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.kind = "message"
        self.data: list[str] = []

    def feed(self, line: str) -> StreamEvent | None:
        if line:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                self.kind = value
            elif field == "data":
                self.data.append(value)
            return None
        if not self.data:
            return None
        event = StreamEvent(self.kind, json.loads("\n".join(self.data)))
        self.kind, self.data = "message", []
        if event.type == "error":
            raise from_body(self.status, event.data)
        return event
