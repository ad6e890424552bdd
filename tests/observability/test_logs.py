"""JSON logs carry the request's context; every answer names its request id."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from uuid import RFC_4122, UUID

import pytest
import uvicorn
from fastapi.testclient import TestClient

from interlock.api.observability.context import begin, current
from interlock.api.observability.logs import (
    LogFormat,
    access,
    configure_logging,
    handler,
    log_access,
)
from interlock.cli.main import build_parser
from interlock.domain.errors import ConfigurationError
from interlock.settings import load_settings
from tests.conftest import Lines
from tests.observability.conftest import auth


def test_a_sane_request_id_is_kept_and_logged_with_the_caller(
    http: TestClient, json_logs: Lines
) -> None:
    chat = http.post("/v1/chats", json={"agent": "bankingAgent"}, headers=auth("alice")).json()
    answer = http.get(f"/v1/chats/{chat['id']}",
                      headers={**auth("alice"), "X-Request-ID": "req-42.a:b"})

    assert answer.headers["X-Request-ID"] == "req-42.a:b"
    line = json_logs.of("interlock.access")[-1]
    assert line["request_id"] == "req-42.a:b"
    assert (line["principal"], line["tenant"], line["chat_id"]) == ("alice", "acme", chat["id"])
    assert (line["method"], line["route"], line["status"]) == (
        "GET", "/v1/chats/{chat_id}", 200)
    assert line["path"] == f"/v1/chats/{chat['id']}" and line["duration_ms"] >= 0


@pytest.mark.parametrize("given", ["has space", "x" * 129, "a;b", "a\tb", "<script>"])
def test_an_insane_request_id_is_replaced(http: TestClient, given: str) -> None:
    answer = http.get("/healthz", headers={"X-Request-ID": given})
    rid = answer.headers["X-Request-ID"]
    assert rid != given and len(rid) == 32 and int(rid, 16) >= 0
    assert UUID(rid).version == 4 and UUID(rid).variant == RFC_4122  # as uuid4().hex


def test_every_answer_has_its_own_id_even_a_refusal(http: TestClient, json_logs: Lines) -> None:
    first = http.get("/v1/chats")  # no key: 401
    big = http.post("/v1/chats", content=b"x" * (2 << 20), headers=auth("alice"))  # 413
    assert (first.status_code, big.status_code) == (401, 413)
    ids = {first.headers["X-Request-ID"], big.headers["X-Request-ID"]}
    assert len(ids) == 2
    lines = json_logs.of("interlock.access")
    assert [(x["status"], x["request_id"] in ids) for x in lines] == [(401, True), (413, True)]
    assert "principal" not in lines[0]  # unknown: left out, not invented


def test_lines_logged_while_serving_carry_the_request(
    http: TestClient, json_logs: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interlock.api.routers import health

    def probe(*_: object) -> tuple[bool, bool]:
        logging.getLogger("interlock.test").warning("probing %s", current() is not None)
        return True, True

    monkeypatch.setattr(health, "_probe", probe)
    http.get("/readyz", headers={"X-Request-ID": "r-1"})
    [line] = [x for x in json_logs.all() if x["logger"] == "interlock.test"]
    assert line == {**line, "level": "warning", "message": "probing True", "request_id": "r-1"}


def test_the_format_is_a_setting_and_a_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().log_format == "text"
    monkeypatch.setenv("INTERLOCK_LOG_FORMAT", "json")
    assert load_settings().log_format == "json"
    assert build_parser().parse_args(["serve", "--log-format", "text"]).log_format == "text"
    monkeypatch.setenv("INTERLOCK_LOG_FORMAT", "xml")
    with pytest.raises(ConfigurationError, match="INTERLOCK_LOG_FORMAT"):
        load_settings()


def test_lines_go_to_the_stderr_of_the_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test runner or an embedding program may swap stderr after the app is configured
    (and close the old one): lines follow the swap instead of failing on a closed file."""
    import sys

    log = logging.getLogger("interlock.test.swap")
    log.propagate = False
    log.addHandler(out := handler("text"))
    try:
        first, then = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stderr", first)
        log.warning("one")
        first.close()
        monkeypatch.setattr(sys, "stderr", then)
        log.warning("two")
        assert then.getvalue() == "WARNING interlock.test.swap: two\n"
    finally:
        log.removeHandler(out)


def test_a_served_request_has_one_access_line_not_uvicorns_too() -> None:
    """`serve` turns uvicorn's access line off; the app factory configures logging again
    after uvicorn's config did, and must not turn it back on (it repeated `interlock.access`,
    a second line a request)."""
    root, uv = logging.getLogger(), logging.getLogger("uvicorn.access")
    saved = (list(root.handlers), root.level, uv.propagate, list(uv.handlers),
             logging._srcfile, logging.logThreads, logging.logProcesses,
             logging.logMultiprocessing)
    try:
        configure_logging("text")  # `serve`, before uvicorn starts
        uvicorn.Config("interlock.bootstrap:create_app", factory=True, access_log=False,
                       log_config=None)
        configure_logging("text")  # the factory, in the server (or a worker) process
        assert not uv.hasHandlers()
        assert logging.getLogger("uvicorn.error").hasHandlers()  # uvicorn's other lines stay
        assert logging.getLogger("interlock.access").hasHandlers()
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
        uv.propagate, uv.handlers[:] = saved[2], saved[3]
        (logging._srcfile, logging.logThreads, logging.logProcesses,  # type: ignore[attr-defined]
         logging.logMultiprocessing) = saved[4:]


@contextmanager
def _only(out: logging.Handler) -> Iterator[None]:
    """`out` the one handler every line reaches, as `configure_logging` leaves the root."""
    root, ours = logging.getLogger(), logging.getLogger("interlock")
    saved = list(root.handlers), root.level, list(ours.handlers), ours.level
    root.handlers[:], ours.handlers[:] = [out], []
    root.setLevel(logging.INFO)
    ours.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        root.handlers[:], ours.handlers[:] = saved[0], saved[2]
        root.setLevel(saved[1])
        ours.setLevel(saved[3])


def _served_line(known: bool) -> None:
    if known:
        info = begin("r-7", {"path_params": {"chat_id": "c-1"}})
        info.principal, info.tenant = "alice", "acme"
    log_access("POST", "/v1/chats/c-1/resume", 200, 0.01234, {
        "method": "POST", "path": "/v1/chats/c-1/resume", "route": "/v1/chats/{chat_id}/resume",
        "status": 200, "duration_ms": 12.34})


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("known", [True, False], ids=["in-a-request", "outside"])
def test_an_access_line_written_directly_is_the_line_logging_writes(
        fmt: LogFormat, known: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where our handler is the only one, the access line skips `logging`'s record and
    passes; the line is the same as the one through them."""
    direct, through = io.StringIO(), io.StringIO()
    with _only(handler(fmt, direct)), monkeypatch.context() as m:
        m.setattr(access, "makeRecord", _no_record)
        contextvars.Context().run(_served_line, known)
    with _only(handler(fmt, through)):
        access.addFilter(keep := logging.Filter())  # anything added: the line goes through logging
        try:
            contextvars.Context().run(_served_line, known)
        finally:
            access.removeFilter(keep)
    [one], [other] = direct.getvalue().splitlines(), through.getvalue().splitlines()
    if fmt == "text":
        assert one == other
        assert one.startswith("INFO interlock.access: POST /v1/chats/c-1/resume 200 12.3ms")
        assert one.endswith(" request_id=r-7 principal=alice tenant=acme chat_id=c-1") == known
    else:
        a, b = json.loads(one), json.loads(other)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", a.pop("ts"))
        b.pop("ts")
        assert a == b
        assert (a["message"], a["route"], a["duration_ms"]) == (
            "POST /v1/chats/c-1/resume 200 12.3ms", "/v1/chats/{chat_id}/resume", 12.34)
        assert (a.get("request_id"), a.get("principal")) == (
            ("r-7", "alice") if known else (None, None))


def _no_record(*_: object, **__: object) -> logging.LogRecord:
    raise AssertionError("the access line made a log record")


def test_an_access_line_goes_through_logging_where_it_was_configured_so() -> None:
    """A second handler, a handler's own filter or formatter, a level: each is honoured."""
    ours, theirs = io.StringIO(), io.StringIO()
    with _only(handler("text", ours)):
        logging.getLogger("interlock").addHandler(second := logging.StreamHandler(theirs))
        try:
            _served_line(False)
        finally:
            logging.getLogger("interlock").removeHandler(second)
        assert theirs.getvalue() == "POST /v1/chats/c-1/resume 200 12.3ms\n"
        assert ours.getvalue().count("\n") == 1
    quiet = handler("text", ours := io.StringIO())
    quiet.addFilter(lambda record: record.name != "interlock.access")
    with _only(quiet):
        _served_line(False)
    assert ours.getvalue() == ""
    plain = handler("text", ours := io.StringIO())
    plain.setFormatter(logging.Formatter("%(name)s|%(message)s"))
    with _only(plain):
        _served_line(False)
    assert ours.getvalue() == "interlock.access|POST /v1/chats/c-1/resume 200 12.3ms\n"
    access.setLevel(logging.WARNING)
    try:
        with _only(handler("text", ours := io.StringIO())):
            _served_line(False)
    finally:
        access.setLevel(logging.NOTSET)
    assert ours.getvalue() == ""


def test_an_access_line_to_a_closed_stream_is_reported_as_logging_reports_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The request it logs is not failed by its log line."""
    closed = io.StringIO()
    closed.close()
    with _only(handler("text", closed)):
        _served_line(False)
    assert "--- Logging error ---" in capsys.readouterr().err


class _FlushFails(io.StringIO):
    """A stream whose write is buffered but whose flush fails (a full disk, a dead pipe)."""

    def flush(self) -> None:
        raise OSError(28, "No space left on device")


def test_an_access_line_whose_flush_fails_is_written_once_as_logging_writes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", False)
    direct, through = _FlushFails(), _FlushFails()
    with _only(handler("text", direct)):
        _served_line(False)
    with _only(handler("text", through)):
        access.addFilter(keep := logging.Filter())
        try:
            _served_line(False)
        finally:
            access.removeFilter(keep)
    assert through.getvalue().count("\n") == 1
    assert direct.getvalue() == through.getvalue()  # not the line twice


def test_an_access_line_to_no_stderr_does_not_fail_the_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`sys.stderr` is None under pythonw or with fd 2 closed: logging drops the line
    (`Handler.handleError`); the request that logs it must not raise."""
    import sys

    with _only(handler("text")):
        monkeypatch.setattr(sys, "stderr", None)
        _served_line(False)  # AttributeError: 'NoneType' object has no attribute 'write'


def test_an_access_line_carries_the_level_name_logging_gives_info(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(logging._levelToName, logging.INFO, "NOTICE")  # type: ignore[attr-defined]
    with _only(handler("text", out := io.StringIO())):
        _served_line(False)
    assert out.getvalue().startswith("NOTICE interlock.access: ")
