"""Retention keeps at least six months unless an explicit override says who and why, and
the override itself is recorded in the signed retention log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlock.audit.checkpoint_log import RETENTION_ID
from interlock.audit.retention_policy import MINIMUM_MONTHS, Entry, Policy, Rule
from interlock.cli.main import main
from interlock.domain.errors import InvalidRequestError
from tests.projections.tamper import EventsTable

SHORT = {"default": {"keep_months": 1, "delete_after_years": 1}}


def test_a_rule_without_keep_months_keeps_six() -> None:
    policy = Policy.parse({"default": {"delete_after_years": 2}})
    assert policy.default == Rule(MINIMUM_MONTHS, 2) and MINIMUM_MONTHS == 6


@pytest.mark.parametrize("data", [
    SHORT, {"tenants": {"fast": {"keep_months": 5, "delete_after_years": 1}}},
])
def test_under_six_months_is_refused_without_an_override(data: dict[str, object]) -> None:
    with pytest.raises(InvalidRequestError, match="less than 6 months; add \"override\""):
        Policy.parse(data)


@pytest.mark.parametrize("override", [{"reason": "pilot"}, {"reason": " ", "by": "cfo"}, "yes"])
def test_an_override_names_who_and_why(override: object) -> None:
    with pytest.raises(InvalidRequestError, match="override"):
        Policy.parse({**SHORT, "override": override})


def test_a_recorded_policy_reads_back_as_it_was() -> None:
    allowed = Policy.parse({**SHORT, "override": {"reason": "pilot", "by": "cfo"}})
    assert allowed.to_json()["override"] == {"reason": "pilot", "by": "cfo"}
    assert Policy.parse(allowed.to_json()) == allowed
    assert Policy.parse(SHORT, minimum=False).default == Rule(1, 1)  # older entries


def test_the_cli_refuses_a_short_policy_and_records_an_override(
    tmp_path: Path, sqlite_store: str, capsys: pytest.CaptureFixture[str],
) -> None:
    private, public = tmp_path / "cp.pem", tmp_path / "cp.pub"
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 0
    policy = tmp_path / "policy.json"
    run = ["audit", "retention", "--policy", str(policy), "--key", str(private),
           "--store", sqlite_store]
    policy.write_text(json.dumps(SHORT))
    assert main(run) == 2
    assert "would keep chats less than 6 months" in capsys.readouterr().err
    assert not Path(sqlite_store.removeprefix("sqlite:///")).exists()  # refused before opening
    policy.write_text(json.dumps({**SHORT, "override": {"reason": "pilot", "by": "cfo"}}))
    assert main(run) == 0
    [entry] = [Entry.from_json(s) for _, s in EventsTable(
        sqlite_store, RETENTION_ID, purpose="retention").records().values()]
    assert entry.statement["policy"]["override"] == {"reason": "pilot", "by": "cfo"}
    assert main(["verify", "--all", "--public-key", str(public), "--store", sqlite_store]) == 0
