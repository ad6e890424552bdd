"""`interlock audit export --format parquet`: DuckDB reads the files as they are, with the
rows and values of the JSON Lines export and their types; docs/analytics.md's samples run."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import duckdb
import pyarrow.parquet as pq
import pytest

from interlock.bootstrap import build_service
from interlock.cli import audit_parquet
from interlock.cli.main import main
from interlock.domain import Interlock, RespondEntry
from interlock.domain.review.service import Reviews
from interlock.domain.storage.erasure import ERASED
from interlock.projections.views import analytics
from interlock.projections.views.decisions import DecisionRow
from interlock.projections.views.export import parse
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from interlock.stores import erasure_keys
from interlock.stores.erasure_keys import KeyStore
from tests.kit import run
from tests.projections.flows import AGENTS
from tests.review.history import ACTIVE, TENANT, History

DOC = Path(__file__).parents[2] / "docs" / "analytics.md"
DUCK_TYPES = {"text": "VARCHAR", "json": "JSON", "time": "TIMESTAMP WITH TIME ZONE",
              "int": "BIGINT", "bool": "BOOLEAN"}
SECRET = "zebulonquartz"


def _export(store: str, out: Path, *extra: str) -> int:
    return main(["audit", "export", "--format", "parquet", "--output", str(out),
                 "--store", store, *extra])


def _read(path: Path, order: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The file's rows as DuckDB reads them (JSON parsed), and its column types."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    types = {name: kind for name, kind, *_ in con.execute(
        f"DESCRIBE SELECT * FROM '{path}'").fetchall()}
    cursor = con.execute(f"SELECT * FROM '{path}' ORDER BY {order}")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    for row in rows:
        for name, kind in types.items():
            if kind == "JSON" and row[name] is not None:
                row[name] = json.loads(row[name])
    con.close()
    return rows, types


def _jsonl(store: str, out: Path) -> list[dict[str, Any]]:
    assert main(["audit", "export", "--format", "jsonl", "--output", str(out),
                 "--store", store]) == 0
    rows = parse(out.read_text(), "jsonl")
    return sorted((r.model_dump() for r in rows), key=lambda r: (r["chat_id"], r["version"]))


def _same_as_jsonl(store: str, tmp_path: Path) -> list[dict[str, Any]]:
    assert _export(store, tmp_path / "export") == 0
    found, types = _read(tmp_path / "export" / "decisions.parquet", "chat_id, version")
    assert types == {name: DUCK_TYPES[kind] for name, kind in analytics.DECISIONS}
    expected = _jsonl(store, tmp_path / "decisions.jsonl")
    assert found == expected and len(found) > 0  # values and their Python types
    assert all(isinstance(r["decided_at"], datetime) and r["decided_at"].utcoffset() is not None
               for r in found)
    assert [DecisionRow.model_validate(r) for r in found]  # each a decision as the API has it
    return found


def test_duckdb_reads_the_decisions_with_the_jsonl_exports_rows_and_types(
    history: History, tmp_path: Path,
) -> None:
    found = _same_as_jsonl(history.store, tmp_path)
    kinds = sorted(r["kind"] for r in found)
    assert kinds.count("approve") == 8 and "edit" in kinds and "expire" in kinds


def test_calls_and_reviewed_items_are_what_the_log_says(
    history: History, view: ReviewsView, tmp_path: Path,
) -> None:
    desk = ReviewDesk(Reviews(history.app), view, ACTIVE)
    review = desk.open(TENANT, "rita", "custom", custom="kind = 'approve'", size=3, seed="p")
    desk.reviews.assess(review.id, 2, actor="rita", verdict="finding", severity="high",
                        note="too fast")
    assert _export(history.store, tmp_path / "x", "--tenant", TENANT) == 0
    calls, types = _read(tmp_path / "x" / "calls.parquet", "chat_id, ref")
    assert types == {name: DUCK_TYPES[kind] for name, kind in analytics.CALLS}
    asked = {(str(c), ref): call for c in history.chats.values()
             for ref, call in history.app.get_chat(c).state.calls.items()}
    assert {(r["chat_id"], r["ref"]): (r["tool"], r["input"]) for r in calls} == {
        key: (call.name, call.input) for key, call in asked.items()}
    edited = [r for r in calls if r["edited_by"]]
    assert [(r["input"], r["edited_by"], r["requested_by"]) for r in edited] == [
        ({"amount": 15000}, "carol", "alice")]
    assert sum(r["expired"] for r in calls) == 1 and sum(r["waiting"] for r in calls) == 1
    items, types = _read(tmp_path / "x" / "reviews.parquet", "review_id, n")
    assert types == {name: DUCK_TYPES[kind] for name, kind in analytics.REVIEWS}
    state = desk.reviews.get(review.id).state
    assert [(r["n"], r["chat_id"], r["version"], r["verdict"], r["severity"], r["note"])
            for r in items] == [(i.n, i.chat_id, i.version, *(
                (state.assessments[i.n].verdict, state.assessments[i.n].severity,
                 state.assessments[i.n].note) if i.n in state.assessments else (None,) * 3))
                for i in state.items]
    assert {(r["review_id"], r["query_name"], r["status"], r["opened_by"]) for r in items} == {
        (str(review.id), "custom", "open", "rita")}
    assert _export(history.store, tmp_path / "y", "--tenant", "nobody") == 0
    assert pq.read_metadata(tmp_path / "y" / "calls.parquet").num_rows == 0


def test_rows_are_written_in_batches_and_a_failed_export_leaves_no_file(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(audit_parquet, "BATCH", 3)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: progress shown
    assert _export(history.store, tmp_path / "ok") == 0
    meta = pq.read_metadata(tmp_path / "ok" / "decisions.parquet")
    assert (meta.num_rows, meta.num_row_groups) == (10, 4)
    shown = capsys.readouterr().err
    assert "\rexporting decisions: 3 rows\rexporting decisions: 6 rows" in shown
    assert "\rexporting decisions: 10 rows\n" in shown

    def broken(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        raise OSError(28, "No space left on device")
        yield {}

    monkeypatch.setattr(analytics, "review_rows", broken)
    assert _export(history.store, tmp_path / "ok") == 1
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == [
        "calls.parquet", "decisions.parquet", "reviews.parquet"]  # the earlier export, whole
    assert pq.read_metadata(tmp_path / "ok" / "decisions.parquet").num_rows == 10
    assert _export(history.store, tmp_path / "new") == 1
    assert list((tmp_path / "new").iterdir()) == []


@pytest.mark.parametrize(("args", "says"), [
    ([], "--format parquet writes a directory: give it with --output"),
    (["--output", "FILE"], "exists and is not a directory"),
    (["--output", "DIR", "--key", "cp.pem"], "--key signs one file"),
])
def test_a_wrong_command_line_is_exit_2_naming_the_problem(
    sqlite_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
    says: str,
) -> None:
    (tmp_path / "FILE").write_text("x")
    args = [str(tmp_path / a) if a in ("FILE", "DIR") else a for a in args]
    assert main(["audit", "export", "--format", "parquet", "--store", sqlite_store,
                 *args]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "DIR").exists()


def test_without_pyarrow_the_command_says_how_to_install_it(
    sqlite_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(audit_parquet, "pa", None)
    assert _export(sqlite_store, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "needs pyarrow: pip install 'interlock[analytics]'" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.fixture
def protected(store: str) -> Iterator[Interlock]:
    app = build_service(store, AGENTS)
    app.protect_personal_data(KeyStore.open(app))
    yield app
    app.close()


async def _subject_chat(app: Interlock, subject: str) -> UUID:
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank",
                          metadata={"customer": subject})
    result = await app.send(chat.id, f"transfer $5000 to {subject}", actor="alice")
    approve = RespondEntry(ref=result.interrupts[0].ref, name="userApproval",
                           output={"approved": True, "feedback": f"ok for {subject}"})
    await app.resume(chat.id, respond=[approve], actor="bob")
    return chat.id


def test_an_erased_chat_exports_redacted_as_in_the_jsonl_export(
    protected: Interlock, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    erased = run(_subject_chat(protected, SECRET))
    run(_subject_chat(protected, "dave"))
    monkeypatch.setattr(erasure_keys, "TTL", 0.0)  # no other process holds a key here
    assert main(["audit", "erase", str(erased), "--store", store]) == 0
    found = _same_as_jsonl(store, tmp_path)
    outputs = {(r["chat_id"] == str(erased), r["kind"]): r["output"] for r in found}
    assert outputs[True, "respond"] is None  # erased, as the JSON Lines export has it
    assert outputs[True, "withdraw"]["reason"] == ERASED
    assert outputs[False, "respond"] == {"approved": True, "feedback": "ok for dave"}
    calls, _ = _read(tmp_path / "export" / "calls.parquet", "chat_id, ref")
    assert [r["input"] for r in calls if r["chat_id"] == str(erased)] == [None, None]
    assert SECRET not in json.dumps(found + calls, default=str)


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(), re.S)


def _answers() -> list[list[tuple[str, ...]]]:
    """The answers the page shows (its text blocks), as rows of cells."""
    return [[tuple(line.split()) for line in block.splitlines()[1:]] for block in _blocks("text")]


def test_the_analytics_page_samples_run_as_written_and_answer_what_it_shows(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INTERLOCK_STORE", history.store)
    [shell] = _blocks("sh")
    commands = [shlex.split(line) for line in shell.splitlines() if line.startswith("interlock")]
    assert commands and all(main(c[1:]) == 0 for c in commands)
    answers = _answers()
    weekly, edited = _blocks("sql")
    con = duckdb.connect()
    rows = con.execute(weekly).fetchall()
    assert {r[1] for r in rows} == {history.base.date()}  # one week: the seeded Monday's
    assert [(r[0], str(r[2]), str(r[3])) for r in rows] == [
        (a[0], a[2], a[3]) for a in answers[0]]
    shown = {date.fromisoformat(a[1]) for a in answers[0]}  # a Monday, the same on each row
    assert len(shown) == 1 and shown.pop().weekday() == 0
    assert [tuple(map(str, r)) for r in con.execute(edited).fetchall()] == answers[1]
