"""A chat's messages, as the state holds them: a list that a snapshot can hand over undecoded.

A chat of thousands of events has thousands of messages; decoding them all takes longer
than loading the rest of its state. A snapshot's messages stay JSON until something reads
an old one (the model's request does); a command that only adds messages and reads the
last ones (a resume's validation, an approval) never decodes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from pydantic import GetCoreSchemaHandler, TypeAdapter
from pydantic_core import core_schema

from interlock.domain.chat.messages import Message

_LIST: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


class Messages(Sequence[Message]):
    """The messages, append-only: the first `_held` are still the JSON `_head` (undecoded),
    the rest are `_items`; `_json` is the JSON of the first `_written` of them, so the next
    snapshot serialises only the messages added since."""

    __slots__ = ("_head", "_held", "_items", "_json", "_written")

    def __init__(self, items: Iterable[Message] = ()) -> None:
        self._items: list[Message] = list(items)
        self._head = self._json = b"[]"
        self._held = self._written = 0

    @classmethod
    def from_json(cls, data: bytes, count: int) -> Messages:
        """`count` messages, left as the JSON array `data` until an old one is read."""
        messages = cls()
        if count:
            messages._head = messages._json = data
            messages._held = messages._written = count
        return messages

    def to_json(self) -> bytes:
        """The JSON array of all the messages."""
        added = self._items[self._written - self._held:]
        if added:
            more = _LIST.dump_json(added)
            self._json = more if self._written == 0 else self._json[:-1] + b"," + more[1:]
            self._written = len(self)
        return self._json

    @property
    def decoded(self) -> bool:
        return self._held == 0

    def append(self, message: Message) -> None:
        self._items.append(message)

    def __len__(self) -> int:
        return self._held + len(self._items)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        held = self._held
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and held <= start <= stop:
                return self._items[start - held:stop - held]
            return self._all()[index]
        at = index + len(self) if index < 0 else index
        if 0 <= at - held < len(self._items):
            return self._items[at - held]
        return self._all()[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Messages):
            return self._all() == other._all()
        if isinstance(other, list):
            return self._all() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"Messages({len(self)} messages, {self._held} undecoded)"

    def _all(self) -> list[Message]:
        if self._held:
            self._items = _LIST.validate_json(self._head) + self._items
            self._head, self._held = b"[]", 0
        return self._items

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return held_schema(cls, handler.generate_schema(list[Message]))


def held_schema(cls: type[Any], items: core_schema.CoreSchema) -> core_schema.CoreSchema:
    """The pydantic schema of a container a snapshot hands over undecoded (`Messages`,
    `Calls`): taken as it is, or built from its items; serialised as all of them (`_all`)."""
    return core_schema.union_schema(
        [core_schema.is_instance_schema(cls),
         core_schema.no_info_after_validator_function(cls, items)],
        serialization=core_schema.plain_serializer_function_ser_schema(
            cls._all, return_schema=items),
    )
