"""`interlock audit export --format parquet --output DIR`: the decisions, calls and reviewed
items as DIR/decisions.parquet, DIR/calls.parquet and DIR/reviews.parquet, for DuckDB,
pandas or Spark to read as they are (docs/analytics.md).

Rows are written in batches as they are read (keyset pages), so the export's memory does
not grow with the log. Each file is written beside its final name and renamed once all
three are complete: an export that fails leaves none of them behind. Needs pyarrow
(`pip install 'interlock[analytics]'`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # an optional extra: the command says how to install it
    pa = pq = None

from interlock.projections.interface import DecisionFilter
from interlock.projections.readmodels import SqlReadModels
from interlock.projections.views import analytics
from interlock.projections.views.export import rows_of
from interlock.projections.views.reviews import ReviewsView

INSTALL = "pip install 'interlock[analytics]'"
BATCH = 10_000  # rows per parquet row group written at once
TABLES = {"decisions": analytics.DECISIONS, "calls": analytics.CALLS,
          "reviews": analytics.REVIEWS}


def missing() -> str | None:
    """Why the parquet export cannot run here, or None."""
    if pa is None:
        return f"--format parquet needs pyarrow: {INSTALL}"
    return None


def problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line for a parquet export, or None."""
    if not args.output:
        return "--format parquet writes a directory: give it with --output"
    if Path(args.output).exists() and not Path(args.output).is_dir():
        return f"--output {args.output} exists and is not a directory"
    if args.key:
        return "--key signs one file (csv, jsonl, events); a parquet export is three"
    return missing()


def write(args: argparse.Namespace, models: SqlReadModels) -> dict[str, int]:
    """Write the three files into `args.output`; the rows written per table."""
    f = DecisionFilter(since=args.since, until=args.until, tenant=args.tenant, tool=args.tool,
                       actor=args.actor, chat_id=args.chat_id)
    view = models.view(ReviewsView)
    sources: dict[str, Iterator[dict[str, Any]]] = {
        "decisions": analytics.decision_rows(rows_of(
            lambda cursor: models.decisions(f, 1000, cursor))),
        "calls": analytics.call_rows(view, args.tenant),
        "reviews": analytics.review_rows(view, args.tenant),
    }
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    parts = {name: out / f"{name}.parquet.part" for name in TABLES}
    counts: dict[str, int] = {}
    try:
        for name, rows in sources.items():
            counts[name] = _write_table(parts[name], TABLES[name], rows, _progress(name))
        for name, part in parts.items():
            part.replace(out / f"{name}.parquet")
    finally:
        for part in parts.values():
            part.unlink(missing_ok=True)
    return counts


def _write_table(path: Path, columns: analytics.Columns, rows: Iterable[dict[str, Any]],
                 progress: Callable[[int], None]) -> int:
    schema = pa.schema([pa.field(name, _TYPES[kind]()) for name, kind in columns])
    encode = _encoder(columns)
    done = 0
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        rows = iter(rows)
        while batch := list(islice(rows, BATCH)):
            writer.write_batch(pa.RecordBatch.from_pylist([encode(r) for r in batch],
                                                          schema=schema))
            done += len(batch)
            progress(done)
    progress(-done)
    return done


_TYPES: dict[str, Callable[[], Any]] = {
    "text": lambda: pa.string(), "json": lambda: pa.json_(pa.string()),
    "time": lambda: pa.timestamp("us", tz="UTC"), "int": lambda: pa.int64(),
    "bool": lambda: pa.bool_(),
}


def _encoder(columns: analytics.Columns) -> Callable[[dict[str, Any]], dict[str, Any]]:
    json_columns = [name for name, kind in columns if kind == "json"]

    def encode(row: dict[str, Any]) -> dict[str, Any]:
        for name in json_columns:
            if row[name] is not None:
                row[name] = json.dumps(row[name], separators=(",", ":"), ensure_ascii=False)
        return row
    return encode


def _progress(name: str) -> Callable[[int], None]:
    """Rows written so far on a terminal (stderr); a negative count ends the line."""
    if not sys.stderr.isatty():
        return lambda done: None

    def show(done: int) -> None:
        end = "\n" if done < 0 else ""
        print(f"\rexporting {name}: {abs(done):,} rows", end=end, file=sys.stderr, flush=True)
    return show
