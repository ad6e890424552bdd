"""`interlock review ...`: the API's queries and review steps from a terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlock.cli.main import main
from tests.review.history import TENANT, History


def _lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_query_prints_one_json_line_per_decision(
    history: History, capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["review", "query", "fast_approval", "--param", "seconds=46", "--tenant", TENANT,
                 "--store", history.store]) == 0
    out = capsys.readouterr()
    assert len(_lines(out.out)) == 4 and "fast_approval v1: 4 decision(s)" in out.err
    assert main(["review", "query", "custom", "--filter", "input.amount > 16000", "--tenant",
                 TENANT, "--store", history.store]) == 0
    assert [r["actor"] for r in _lines(capsys.readouterr().out)] == ["carol"]


def test_revoked_actor_reads_the_keys_file_and_refuses_without_one(
    history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    run = ["review", "query", "revoked_actor", "--tenant", TENANT, "--store", history.store]
    assert main(run) == 2
    assert "needs the server's keys file" in capsys.readouterr().err
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({f"k-{n}": {"id": n, "tenant": TENANT, "roles": ["approver"]}
                                for n in ("alice", "bob", "carol", "dave")}))
    keys.chmod(0o600)
    assert main([*run, "--keys", str(keys)]) == 0
    assert [r["actor"] for r in _lines(capsys.readouterr().out)] == ["mallory"]


def test_a_review_from_the_terminal_and_its_refusals(
    history: History, capsys: pytest.CaptureFixture[str],
) -> None:
    store = ["--store", history.store]
    assert main(["review", "open", "edited_then_approved", "--tenant", TENANT, "--actor", "rita",
                 "--size", "1", "--seed", "7", *store]) == 0
    [opened] = _lines(capsys.readouterr().out)
    review = str(opened["review_id"])
    assert (opened["seed"], opened["items"]) == ("7", 1)
    assert main(["review", "assess", review, "1", "--verdict", "ok", "--actor", "bob",
                 *store]) == 2
    assert "bob may not assess item 1" in capsys.readouterr().err
    assert main(["review", "query", "custom", "--filter", "tool ==", "--tenant", TENANT,
                 *store]) == 2
    assert "filter refused" in capsys.readouterr().err
    for step in (["assess", review, "1", "--verdict", "finding", "--severity", "low", "--note",
                  "edited"], ["sign-off", review], ["close", review]):
        assert main(["review", *step, "--actor", "rita", *store]) == 0
    assert main(["review", "show", review, *store]) == 0
    shown = _lines(capsys.readouterr().out)[-1]
    assert (shown["status"], shown["version"], shown["closed_by"]) == ("closed", 4, "rita")
