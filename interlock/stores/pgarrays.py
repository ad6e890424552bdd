"""Flat arrays packed straight into PostgreSQL's binary array format.

psycopg's generic list dumper looks into every list it sends (nesting, element type,
nulls) on each call: a quarter of what an append costs in Python. The append's arrays are
always flat, typed and without nulls, so wrapping them in these lists packs them directly:
a header, then each element's length and bytes. `packed` gives those bytes to the
statements sent through libpq directly (`interlock.stores.libpq`).
"""

from __future__ import annotations

import struct
from typing import Any
from uuid import UUID

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

_HEAD = struct.Struct("!iiiii")  # dimensions, has nulls, element type, length, lower bound
_LEN = struct.Struct("!i")


class Uuids(list[UUID]):
    """A uuid[] parameter."""


class Texts(list[str]):
    """A text[] parameter."""


class Blobs(list[bytes]):
    """A bytea[] parameter."""


class Int8s(list[int]):
    """A bigint[] parameter."""


class Int4s(list[int]):
    """An int[] parameter."""


class _Flat(Dumper):
    format = Format.BINARY
    element = 0  # the element type's oid

    def dump(self, obj: Any) -> bytes:
        if not obj:
            return _HEAD.pack(0, 0, self.element, 0, 0)[:12]
        return _HEAD.pack(1, 0, self.element, len(obj), 1) + self.items(obj)

    def items(self, obj: Any) -> bytes:
        raise NotImplementedError


class _UuidsDumper(_Flat):
    oid, element = 2951, 2950

    def items(self, obj: Any) -> bytes:
        return b"".join(b"\x00\x00\x00\x10" + u.bytes for u in obj)


def _prefixed(parts: Any) -> bytes:
    return b"".join([part for b in parts for part in (_LEN.pack(len(b)), b)])


class _BlobsDumper(_Flat):
    oid, element = 1001, 17

    def items(self, obj: Any) -> bytes:
        return _prefixed(obj)


class _TextsDumper(_Flat):
    oid, element = 1009, 25

    def items(self, obj: Any) -> bytes:
        return _prefixed([s.encode() for s in obj])


class _Int8sDumper(_Flat):
    oid, element = 1016, 20

    def items(self, obj: Any) -> bytes:
        return struct.pack("!" + "iq" * len(obj), *(x for n in obj for x in (8, n)))


class _Int4sDumper(_Flat):
    oid, element = 1007, 23

    def items(self, obj: Any) -> bytes:
        return struct.pack("!" + "ii" * len(obj), *(x for n in obj for x in (4, n)))


_PACKERS: dict[type, _Flat] = {}


def packed(value: list[Any]) -> tuple[int, bytes]:
    """The array type's oid and `value` (one of the lists above) in the binary format."""
    packer = _PACKERS[type(value)]
    return packer.oid, packer.dump(value)


for _cls, _dumper in ((Uuids, _UuidsDumper), (Texts, _TextsDumper), (Blobs, _BlobsDumper),
                      (Int8s, _Int8sDumper), (Int4s, _Int4sDumper)):
    psycopg.adapters.register_dumper(_cls, _dumper)
    _PACKERS[_cls] = _dumper(_cls)
