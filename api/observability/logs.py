"""Log lines as text or as one JSON object a line, carrying the request's context."""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import UTC, datetime
from typing import IO, Any, Literal

from interlock.api.observability.context import current

LogFormat = Literal["text", "json"]
TEXT = "%(levelname)s %(name)s: %(message)s%(context)s"


class ContextFilter(logging.Filter):
    """Adds the current request's fields to every record (`record.context_fields`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = current()
        if info is None:
            record.context_fields, record.context = {}, ""
            return True
        fields = record.context_fields = info.fields()
        record.context = "".join([f" {k}={v}" for k, v in fields.items()])
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, request context, extras."""

    def format(self, record: logging.LogRecord) -> str:
        line = _json_line(record.created, record.levelname, record.name, record.getMessage(),
                          getattr(record, "context_fields", {}),
                          getattr(record, "fields", {}))  # `extra={"fields": {...}}`
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return _dumps(line)


def _json_line(created: float, level: str, name: str, message: str,
               context: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    return {"ts": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
            "level": level.lower(), "logger": name, "message": message, **context, **fields}


class _Lines(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler `handler` made: it knows its format, filter and formatter as made."""

    def __init__(self, fmt: LogFormat, stream: IO[str] | None = None) -> None:
        super().__init__(stream)
        self.fmt = fmt
        self.addFilter(context := ContextFilter())
        formatter = JsonFormatter() if fmt == "json" else logging.Formatter(TEXT)
        self.setFormatter(formatter)
        self.made = [context], formatter

    def as_made(self) -> bool:
        """No filter or formatter added or swapped since it was made."""
        return self.filters == self.made[0] and self.formatter is self.made[1]


class _Stderr(_Lines):
    """Writes to whatever `sys.stderr` is at the time of the line, not when configured.

    Something may swap stderr after the app is built (a test runner capturing output, an
    embedding program): a handler holding the old stream would write to a closed file.
    """

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, _: IO[str]) -> None:
        pass


def handler(fmt: LogFormat, stream: IO[str] | None = None) -> logging.Handler:
    """A handler writing `fmt` lines to `stream` (the current stderr by default)."""
    return _Lines(fmt, stream) if stream is not None else _Stderr(fmt)


access = logging.getLogger("interlock.access")
_dumps = json.JSONEncoder(default=str, ensure_ascii=False).encode  # json.dumps's, made once


def log_access(method: str, path: str, status: int, seconds: float,
               fields: dict[str, Any]) -> None:
    """The access log's line for a request (`interlock.access`, INFO).

    Through `logging` a line costs 74,000 instructions as text and 139,000 as JSON (a
    record, its filters, the formatter's passes): two a banking cycle. Where the logger's
    lines reach one handler only and it is one of ours as made (what `configure_logging`
    leaves), the same line is written to it directly. Anything else (a handler or filter
    added, a level, a test capturing lines) goes through `logging` unchanged."""
    ms = seconds * 1000
    out = _sole(access)
    if out is None:
        access.info("%s %s %d %.1fms", method, path, status, ms, extra={"fields": fields})
        return
    message = f"{method} {path} {status} {ms:.1f}ms"
    info = current()
    context = {} if info is None else info.fields()
    level = logging.getLevelName(logging.INFO)  # what a record's levelname would be
    if out.fmt == "json":
        line = _dumps(_json_line(time.time(), level, access.name, message, context, fields))
    else:
        line = f"{level} {access.name}: {message}" + "".join([f" {k}={v}"
                                                             for k, v in context.items()])
    try:  # as StreamHandler.emit: one write, any failure reported once, never raised
        with out.lock:  # type: ignore[union-attr]  # made by Handler.__init__
            out.stream.write(line + out.terminator)
            out.flush()
    except RecursionError:
        raise
    except Exception:  # noqa: BLE001 - as logging's emit: a log line never fails the request
        out.handleError(access.makeRecord(access.name, logging.INFO, "(unknown file)", 0,
                                          "%s %s %d %.1fms", (method, path, status, ms),
                                          None, extra={"fields": fields}))


def _sole(logger: logging.Logger) -> _Lines | None:
    """The one handler `logger`'s INFO lines reach, if it is one and it is ours as made."""
    if logger.filters or not logger.isEnabledFor(logging.INFO):
        return None
    found: logging.Handler | None = None
    node: logging.Logger | None = logger
    while node is not None:
        for one in node.handlers:
            if found is not None:
                return None
            found = one
        node = node.parent if node.propagate else None
    if not isinstance(found, _Lines) or found.level > logging.INFO or not found.as_made():
        return None
    return found


def configure_logging(fmt: LogFormat, level: int = logging.INFO) -> None:
    """Send every logger (uvicorn's included) through one handler in `fmt`."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler(fmt))
    root.setLevel(level)
    # Neither format shows the caller's file and line, the thread or the process: skip
    # gathering them for every record (the logging HOWTO's "Optimization"; an access line
    # is written per request).
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # uvicorn's access line repeats `interlock.access` (the access log, one line a request):
    # its lines go through our handler only if uvicorn's settings left them on (`serve`
    # turns them off, and this runs again in the app factory, after uvicorn's config did).
    logging.getLogger("uvicorn.access").handlers.clear()
