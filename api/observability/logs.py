"""Log lines as text or as one JSON object a line, carrying the request's context."""

from __future__ import annotations

import json
import logging
import sys
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
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, "context_fields", {}),
            **getattr(record, "fields", {}),  # `extra={"fields": {...}}` (the access log)
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time of the line, not when configured.

    Something may swap stderr after the app is built (a test runner capturing output, an
    embedding program): a handler holding the old stream would write to a closed file.
    """

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, _: IO[str]) -> None:
        pass


def handler(fmt: LogFormat, stream: IO[str] | None = None) -> logging.Handler:
    """A handler writing `fmt` lines to `stream` (the current stderr by default)."""
    out = logging.StreamHandler(stream) if stream is not None else _Stderr()
    out.addFilter(ContextFilter())
    out.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    return out


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
