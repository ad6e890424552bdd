"""Tables for analysts (`interlock audit export --format parquet`): each a stream of plain
rows in key order, read a page at a time, so a million rows never sit in memory at once.

Each table is a list of (column, kind) and a row source. Kinds: `text`, `json` (any JSON
value, exported as JSON text), `time` (an instant, UTC), `int`, `bool`. Decisions come
from the decision log as the CSV/JSONL exports read it; calls and reviewed items from the
reviews read model's tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

from interlock.projections.engine.sql import Row, SqlView, where
from interlock.projections.views.decisions import DecisionRow

Kind = Literal["text", "json", "time", "int", "bool"]
Columns = tuple[tuple[str, Kind], ...]
_JSON = frozenset({"original_input", "replaced_input", "output", "resumed_metadata", "input"})
_TIMES = frozenset({"requested_at", "decided_at", "asked_at", "opened_at", "assessed_at"})
_INTS = frozenset({"version", "prior_expiries", "query_version", "n"})
_BOOLS = frozenset({"expired", "waiting"})


def _kinds(*names: str) -> Columns:
    return tuple((n, "json" if n in _JSON else "time" if n in _TIMES else "int" if n in _INTS
                  else "bool" if n in _BOOLS else "text") for n in names)


DECISIONS = _kinds(*DecisionRow.model_fields)
CALLS = _kinds("chat_id", "ref", "tenant", "agent", "tool", "input", "requested_by",
               "edited_by", "asked_at", "prior_expiries", "expired", "waiting")
REVIEWS = _kinds("review_id", "tenant", "status", "opened_by", "opened_at", "query_name",
                 "query_version", "signed_off_by", "n", "chat_id", "version", "ref", "verdict",
                 "severity", "note", "assessed_by", "assessed_at")
_CALLS_SQL = (
    "SELECT c.chat_id, c.ref, h.tenant, h.agent, c.tool, c.input, c.requested_by, c.edited_by,"
    " c.asked_at, c.prior_expiries, c.expired, c.waiting FROM {review_calls} c"
    " JOIN {review_chats} h ON h.chat_id = c.chat_id")
_REVIEWS_SQL = (
    "SELECT r.review_id, r.tenant, r.status, r.opened_by, r.opened_at, r.query_name,"
    " r.query_version, r.signed_off_by, i.n, i.chat_id, i.version, i.ref, i.verdict,"
    " i.severity, i.note, i.assessed_by, i.assessed_at FROM {reviews} r"
    " JOIN {review_items} i ON i.review_id = r.review_id")


def decision_rows(rows: Iterator[DecisionRow]) -> Iterator[dict[str, Any]]:
    """The decision log's rows (as the JSONL export has them) as plain rows."""
    return (row.model_dump() for row in rows)


def call_rows(view: SqlView, tenant: str | None = None, page: int = 1000
              ) -> Iterator[dict[str, Any]]:
    """Every tool call asked for (one row per chat and ref), the tenant's if given."""
    conds = ["h.tenant = %(tenant)s"] if tenant is not None else []
    keyed = [*conds, "(c.chat_id, c.ref) > (%(k0)s, %(k1)s)"]
    return _paged(view, _CALLS_SQL, ("c.chat_id", "c.ref"), conds, keyed,
                  {"tenant": tenant}, page, CALLS)


def review_rows(view: SqlView, tenant: str | None = None, page: int = 1000
                ) -> Iterator[dict[str, Any]]:
    """One row per reviewed item, with its review's query, status and sign-off."""
    conds = ["r.tenant = %(tenant)s"] if tenant is not None else []
    keyed = [*conds, "(i.review_id, i.n) > (%(k0)s, %(k1)s)"]
    return _paged(view, _REVIEWS_SQL, ("i.review_id", "i.n"), conds, keyed,
                  {"tenant": tenant}, page, REVIEWS)


def _paged(view: SqlView, base: str, key: tuple[str, str], first: list[str],
           keyed: list[str], params: dict[str, Any], page: int,
           columns: Columns) -> Iterator[dict[str, Any]]:
    """Keyset pages of `base` in `key` order, each row decoded per its columns' kinds."""
    order = f" ORDER BY {key[0]}, {key[1]} LIMIT %(limit)s"
    conds, bound = first, {**params, "limit": page}
    decode = _decoder(view, columns)
    while True:
        rows = view.store.fetch(base + where(conds) + order, bound)
        yield from map(decode, rows)
        if len(rows) < page:
            return
        last = rows[-1]
        conds, bound = keyed, {**bound, "k0": last[key[0][2:]], "k1": last[key[1][2:]]}


def _decoder(view: SqlView, columns: Columns) -> Callable[[Row], dict[str, Any]]:
    store = view.store

    def decode(row: Row) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, kind in columns:
            value = row[name]
            if value is not None and kind == "json":
                value = store.load_json(value)
            elif value is not None and kind == "time":
                value = store.load_ts(value)
            elif value is not None and kind == "bool":
                value = bool(value)
            out[name] = value
        return out
    return decode
