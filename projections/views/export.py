"""Decision exports for reviewers: CSV and JSON Lines, streamed page by page."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

from interlock.projections.engine.pages import Page
from interlock.projections.views.decisions import DecisionRow

FIELDS = tuple(DecisionRow.model_fields)
_JSON_FIELDS = frozenset({"original_input", "replaced_input", "output", "resumed_metadata"})
# CSV writes null as "", and none of these is ever "" (a stage needs a name; a principal, a
# delegation id and a policy version are never blank)
_NULL_IF_EMPTY = frozenset({"stage", "for_actor", "delegation_id", "policy"})
Pages = Callable[[str | None], Page[DecisionRow]]


def rows_of(pages: Pages) -> Iterator[DecisionRow]:
    """Every row, following next_cursor (keyset, constant cost per page)."""
    cursor: str | None = None
    while True:
        page = pages(cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def export(rows: Iterable[DecisionRow], fmt: Literal["csv", "jsonl"]) -> Iterator[str]:
    """Lines of text (each ends with a newline); CSV starts with its header."""
    if fmt == "jsonl":
        return (row.model_dump_json() + "\n" for row in rows)
    if fmt == "csv":
        return _csv(rows)
    raise ValueError(f"unknown export format {fmt!r}: csv or jsonl")


def _csv_line(values: Iterable[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue()


def _csv(rows: Iterable[DecisionRow]) -> Iterator[str]:
    yield _csv_line(FIELDS)
    for row in rows:
        data = row.model_dump(mode="json")
        yield _csv_line(json.dumps(data[f]) if f in _JSON_FIELDS else data[f] for f in FIELDS)


def parse(text: str, fmt: Literal["csv", "jsonl"]) -> list[DecisionRow]:
    """Read an export back (round-trip checks, reviewers' tooling)."""
    if fmt == "jsonl":
        return [DecisionRow.model_validate_json(line) for line in text.splitlines() if line]
    records = csv.DictReader(io.StringIO(text))
    return [DecisionRow.model_validate(
        {k: json.loads(v) if k in _JSON_FIELDS else None if k in _NULL_IF_EMPTY and v == ""
         else v for k, v in r.items()}) for r in records]
