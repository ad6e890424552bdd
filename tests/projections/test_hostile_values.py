"""A model may emit any string: the views keep up, and a NUL in a filter is a clear 4xx."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

import psycopg
import pytest
from psycopg.types.json import Json

from interlock.domain import Interlock, RespondEntry
from interlock.domain.errors import InvalidRequestError
from interlock.projections import open_read_models, open_views
from interlock.projections.backends import postgres as postgres_backend
from interlock.projections.interface import DecisionFilter, InboxFilter
from interlock.stores import libpq
from tests.conftest import PG_URL
from tests.kit import call, make_app, run, say


@pytest.fixture(params=["one lot", "a sync a statement"])
def sent_as(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """On PostgreSQL a batch goes straight through libpq's pipeline, its values encoded by
    the backend, SYNC_ROWS statements to a sync: each way of cutting it is tried (a lot of
    one statement syncs after each, so a failing row is the last statement of its lot)."""
    if request.param == "a sync a statement":
        monkeypatch.setattr(postgres_backend, "SYNC_ROWS", 1)
    return str(request.param)


def test_nul_characters_from_a_model_do_not_stop_the_views(store: str, sent_as: str) -> None:
    app: Interlock
    app, _, _ = make_app(store, [call(("approve", {"action": "a\x00b"}, "r\x00f")), say("ok")])
    read = open_read_models(app)
    try:
        chat = app.start_chat("ops", actor="alice")
        sent = run(app.send(chat.id, "go \x00", actor="alice"))
        [interrupt] = sent.interrupts
        read.wait(sent.position)
        [row] = read.inbox(InboxFilter(chat_id=str(chat.id))).items
        assert row.input == {"action": "a\x00b"} and row.ref == interrupt.ref != "r\x00f"
        done = run(
            app.resume(
                chat.id,
                actor="bob",
                respond=[
                    RespondEntry(
                        ref=interrupt.ref, name="approve", output={"approved": True, "note": "\x00"}
                    )
                ],
            )
        )
        read.wait(done.position)
        [decision] = read.decisions(DecisionFilter(chat_id=str(chat.id))).items
        assert decision.output == {"approved": True, "note": "\x00"}
        assert read.is_current()
    finally:
        read.close()
        app.close()


def test_a_nul_in_a_filter_is_refused(store: str) -> None:
    app, _, _ = make_app(store, [])
    read = open_read_models(app)
    try:
        if "postgres" in store:
            with pytest.raises(InvalidRequestError):
                read.decisions(DecisionFilter(actor="x\x00"))
        else:
            assert read.decisions(DecisionFilter(actor="x\x00")).items == []
    finally:
        read.close()
        app.close()


def test_lag_counts_what_the_views_have_not_seen(store: str) -> None:
    app, _, _ = make_app(store, [say("hi")])
    views = open_views(app)  # no runner: nothing is applied until asked
    try:
        chat = app.start_chat("ops", actor="alice")
        run(app.send(chat.id, "hello", actor="alice"))
        assert views.lag() == 4 and not views.is_current() and not views.stopped()
        views.catch_up()
        assert views.lag() == 0 and views.is_current()
    finally:
        views.close()
        app.close()


HOSTILE = "it's \\ \"x\" '); DROP TABLE interlock_inbox; -- \\' ü 😀"


def test_quotes_and_backslashes_reach_the_views_as_written(store: str, sent_as: str) -> None:
    """The PostgreSQL views send their rows as statements with literals: whatever a model
    or an approver writes arrives as written, never as SQL."""
    app, _, _ = make_app(store, [call(("approve", {"action": HOSTILE})), say(HOSTILE)])
    read = open_read_models(app)
    try:
        chat = app.start_chat("ops", actor="alice", metadata={"note": HOSTILE})
        sent = run(app.send(chat.id, HOSTILE, actor="alice"))
        [interrupt] = sent.interrupts
        read.wait(sent.position)
        [row] = read.inbox(InboxFilter(chat_id=str(chat.id))).items
        assert row.input == {"action": HOSTILE}
        output = {"approved": True, "note": HOSTILE}
        done = run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=interrupt.ref, name="approve", output=output)]))
        read.wait(done.position)
        [decision] = read.decisions(DecisionFilter(chat_id=str(chat.id))).items
        assert decision.output == output and read.is_current()
    finally:
        read.close()
        app.close()


class _Values:
    """A stand-in for a view's store: one statement into a table of every common type."""

    def _bound(self, template: str) -> tuple[bytes, list[str]]:
        return (b"INSERT INTO pg_temp.vals VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                ["t", "i", "b", "u", "ts", "naive", "j", "f", "n"])


_VALUES = cast(postgres_backend.PostgresViewStore, _Values())


def _create_vals(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TEMP TABLE vals (t text, i bigint, b bool, u uuid, ts timestamptz,"
                 " naive timestamp, j json, f float8, n numeric)")


@pytest.mark.postgres
def test_the_direct_pipeline_stores_each_value_as_psycopg_would() -> None:
    rows: list[dict[str, Any]] = [
        {"t": HOSTILE, "i": -7, "b": True, "u": uuid.uuid4(), "ts": datetime.now(UTC),
         "naive": datetime(2026, 1, 2, 3, 4, 5), "j": Json({"k": HOSTILE}), "f": 1.5,
         "n": 2**70},
        {"t": "nul \x00", "i": 2**40, "b": False, "u": None, "ts": None, "naive": None,
         "j": Json([1, "%(t)s %%"]), "f": float("nan"), "n": Decimal("-0.5")},
        {"t": "%(i)s $1 %%", "i": 40000, "b": None, "u": None, "ts": None, "naive": None,
         "j": None, "f": float("-inf"), "n": None},
    ]
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        postgres_backend._pipelined(conn, [(_VALUES, "", row) for row in rows])
        got = conn.execute("SELECT * FROM vals").fetchall()
    assert len(got) == len(rows)
    for row, back in zip(rows, got, strict=True):
        want = [row["t"].replace("\x00", "\ufffd"),
                *(row[k] for k in ("i", "b", "u", "ts", "naive")),
                row["j"].obj if row["j"] is not None else None, row["f"], row["n"]]
        for w, g in zip(want, back, strict=True):
            assert g == w or (w != w and g != g), (w, g)


@pytest.fixture
def lots(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The statements of each lot the direct pipeline sends, in order."""
    sent: list[int] = []
    real = postgres_backend._lot

    def counted(conn: Any, statements: Any) -> Any:
        sent.append(len(statements))
        return real(conn, statements)

    monkeypatch.setattr(postgres_backend, "_lot", counted)
    return sent


@pytest.mark.postgres
def test_the_direct_pipeline_syncs_every_lot_and_answers_the_first_statement(
        monkeypatch: pytest.MonkeyPatch, lots: list[int]) -> None:
    """A pass of many rows is sent SYNC_ROWS statements to a sync, each lot's answers read
    before the next lot goes (what PostgreSQL answers waiting to be read stays bounded);
    the rows all land, in the one transaction, and the first statement's row comes back."""
    monkeypatch.setattr(postgres_backend, "SYNC_ROWS", 3)
    rows = [{"t": f"r{i}", "i": i, "b": None, "u": None, "ts": None, "naive": None,
             "j": None, "f": None, "n": None} for i in range(8)]
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        conn.commit()
        conn.execute("SELECT 1")  # in a transaction, as a pass is
        first = postgres_backend._pipelined(
            conn, [(_VALUES, "", row) for row in rows], (b"SELECT 'head'::text AS h", {}))
        assert first == {"h": "head"}
        assert lots == [3, 3, 3]  # the first statement and eight rows, three to a sync
        assert conn.execute("SELECT array_agg(i ORDER BY i) FROM vals").fetchone() == (
            list(range(8)),)
        conn.rollback()  # one transaction: every lot goes with it
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (0,)


@pytest.mark.postgres
def test_a_failing_row_in_a_later_lot_fails_the_pipeline_and_sends_no_more(
        monkeypatch: pytest.MonkeyPatch, lots: list[int]) -> None:
    monkeypatch.setattr(postgres_backend, "SYNC_ROWS", 2)
    good = {"t": "x", "i": 1, "b": None, "u": None, "ts": None, "naive": None, "j": None,
            "f": None, "n": None}
    bad = {**good, "i": "not a number"}
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        conn.commit()
        conn.execute("SELECT 1")  # in a transaction, as a pass is
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            postgres_backend._pipelined(conn, [(_VALUES, "", r)
                                               for r in (good, good, good, bad, good, good)])
        assert lots == [2, 2]  # the lot after the failing one is never sent
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (0,)


@pytest.mark.postgres
def test_a_value_that_cannot_be_encoded_raises_its_own_error_with_nothing_sent() -> None:
    """Every value of a lot is encoded before its pipeline begins: a value psycopg cannot
    adapt is the error the caller sees (a half-sent pipeline would refuse to end and hide
    it behind its own), and the connection's transaction can be rolled back."""
    good = {"t": "x", "i": 1, "b": None, "u": None, "ts": None, "naive": None, "j": None,
            "f": None, "n": None}
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        conn.commit()
        conn.execute("SELECT 1")  # in a transaction, as a pass is
        with pytest.raises(psycopg.ProgrammingError, match="cannot adapt"):
            postgres_backend._pipelined(conn, [(_VALUES, "", good), (_VALUES, "", good),
                                               (_VALUES, "", {**good, "t": object()})])
        assert not conn.pgconn.pipeline_status
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (0,)


@pytest.mark.postgres
def test_a_failing_row_fails_the_direct_pipeline_and_names_the_error() -> None:
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        bad = {"t": "x", "i": "not a number", "b": None, "u": None, "ts": None, "naive": None,
               "j": None, "f": None, "n": None}
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            postgres_backend._pipelined(conn, [(_VALUES, "", bad)])
        conn.rollback()
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is usable again


@pytest.mark.postgres
def test_the_direct_pipeline_writes_nothing_outside_a_transaction() -> None:
    """Each statement would commit on its own: a batch's rows must be all or nothing."""
    row = {"t": "x", "i": 1, "b": None, "u": None, "ts": None, "naive": None, "j": None,
           "f": None, "n": None}
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        _create_vals(conn)
        with pytest.raises(psycopg.ProgrammingError, match="inside a transaction"):
            postgres_backend._pipelined(conn, [(_VALUES, "", row)])
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (0,)


@pytest.mark.postgres
def test_the_direct_pipeline_sleeps_while_postgresql_works() -> None:
    """Once sent, the pass waits for an answer: it does not wake for a writable socket
    (that spun the views thread, hundreds of wake-ups a pass, beside the server's work)."""
    row = {"t": "x", "i": 1, "b": None, "u": None, "ts": None, "naive": None, "j": None,
           "f": None, "n": None}
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        waits: list[Any] = []
        real = conn.wait

        def counted(gen: Any, *args: Any, **kwargs: Any) -> Any:
            def watched() -> Any:
                try:
                    wait = gen.send(None)
                    while True:
                        waits.append(wait)
                        wait = gen.send((yield wait))
                except StopIteration as stop:
                    return stop.value
            return real(watched(), *args, **kwargs)

        conn.wait = counted  # type: ignore[method-assign]
        slept = postgres_backend._pipelined(
            conn, [(_VALUES, "", row)], (b"SELECT pg_sleep(0.3)::text AS slept", {}))
        assert slept == {"slept": ""}
        assert 0 < len(waits) < 20, len(waits)
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (1,)


@pytest.mark.postgres
def test_the_direct_pipeline_prepares_a_statement_once_and_again_once_it_is_gone() -> None:
    """PostgreSQL parses and plans a view's statement once a session, not once a row; a
    statement deallocated under the pipeline fails that batch only (its transaction is
    the caller's to retry), and the next one prepares it again."""
    row = {"t": "x", "i": 1, "b": None, "u": None, "ts": None, "naive": None, "j": None,
           "f": None, "n": None}
    count = "SELECT count(*) FROM vals"
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        for _ in range(3):
            postgres_backend._pipelined(conn, [(_VALUES, "", row), (_VALUES, "", row)])
        runs = conn.execute("SELECT count(*), sum(generic_plans + custom_plans)"
                            " FROM pg_prepared_statements WHERE statement LIKE '%vals%'"
                            " AND NOT from_sql").fetchone()
        assert runs == (1, 6)  # one statement, six rows through it
        conn.commit()
        conn.execute("DEALLOCATE ALL")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            postgres_backend._pipelined(conn, [(_VALUES, "", row)])
        conn.rollback()
        assert conn.execute(count).fetchone() == (6,)  # the failed batch wrote nothing
        postgres_backend._pipelined(conn, [(_VALUES, "", row)])
        conn.commit()
        assert conn.execute(count).fetchone() == (7,)


@pytest.mark.postgres
def test_past_its_bound_a_session_prepares_no_more_statements(
        monkeypatch: pytest.MonkeyPatch) -> None:
    row = {"t": "x", "i": 1, "b": None, "u": None, "ts": None, "naive": None, "j": None,
           "f": None, "n": None}
    monkeypatch.setattr(postgres_backend, "PREPARED_MAX", 0)
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        postgres_backend._pipelined(conn, [(_VALUES, "", row), (_VALUES, "", row)])
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements"
                            " WHERE statement LIKE '%vals%'").fetchone() == (0,)


@pytest.mark.postgres
def test_a_statement_prepared_behind_the_pipeline_s_back_fails_one_batch_only() -> None:
    """A name this session already holds (prepared where the pipeline did not see it) refuses
    the pipeline's prepare: that batch fails, the name is known from then on, and the next
    batch runs through it."""
    row = {"t": "x", "i": 1, "b": None, "u": None, "ts": None, "naive": None, "j": None,
           "f": None, "n": None}
    query, names = _VALUES._bound("")
    with psycopg.connect(PG_URL) as conn:
        _create_vals(conn)
        conn.commit()
        _, types = postgres_backend._encoded([row[k] for k in names], "utf-8", conn)
        conn.pgconn.prepare(libpq.typed_name(query, tuple(types)), query, param_types=types)
        conn.execute("SELECT 1")  # in a transaction, as a pass is
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            postgres_backend._pipelined(conn, [(_VALUES, "", row)])
        conn.rollback()
        conn.execute("SELECT 1")
        postgres_backend._pipelined(conn, [(_VALUES, "", row)])
        conn.commit()
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (1,)
