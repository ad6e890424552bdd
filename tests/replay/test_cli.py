"""`interlock replay-test` and `interlock policy what-if` as CI runs them: exit codes, files."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from interlock.cli.main import main
from interlock.cli.replay_test import _bar
from tests.replay.conftest import Recorded

NEW_PROMPT = "tests.replay.variants:PROMPT_CHANGED"
BANKING = "interlock.examples.banking:AGENTS"


def _replay(recorded: Recorded, *args: str) -> int:
    return main(["replay-test", "--store", recorded.url, "--baseline", BANKING, *args])


def test_identical_chats_exit_0_and_write_both_reports(
        recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    assert _replay(recorded, "--agents", BANKING, "--report", str(report),
                   "--junit", str(junit)) == 0
    assert "5 chats: 5 identical, 0 allowed, 0 different" in capsys.readouterr().out
    assert json.loads(report.read_text())["identical"] == 5
    suite = ET.fromstring(junit.read_text())
    assert (suite.get("tests"), suite.get("failures")) == ("5", "0")


def test_a_difference_exits_1_with_the_diff_and_a_junit_failure_per_chat(
        recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "junit.xml"
    assert _replay(recorded, "--agents", NEW_PROMPT, "--junit", str(junit)) == 1
    out = capsys.readouterr().out
    assert out.count("prompt_drift at version 3 (ModelResponded) model call 1") == 3
    assert "+     \"text\": \"Before moving money" in out
    failures = ET.fromstring(junit.read_text()).findall("testcase/failure")
    assert [f.get("type") for f in failures] == ["prompt_drift"] * 3


def test_allowed_differences_pass(recorded: Recorded, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    allow = tmp_path / "allow.json"
    allow.write_text(json.dumps([{"kind": "prompt_drift", "agent": "bankingAgent",
                                  "why": "the new prompt was reviewed"}]))
    assert _replay(recorded, "--agents", NEW_PROMPT, "--allow", str(allow)) == 0
    assert "2 identical, 3 allowed, 0 different" in capsys.readouterr().out
    allow.write_text(json.dumps([{"kind": "policy_changed"}]))
    assert _replay(recorded, "--agents", NEW_PROMPT, "--allow", str(allow)) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--agents", "no_such_module:AGENTS"], "cannot load agents 'no_such_module:AGENTS'"),
    (["--agents", "interlock.examples.banking:LIMIT"], "is not an Agent or a sequence"),
    (["--agents", BANKING, "--chats", "00000000-0000-4000-8000-000000000000"],
     "chat 00000000-0000-4000-8000-000000000000 not found"),
    (["--agents", BANKING, "--since", "2030-01-02", "--until", "2030-01-01"],
     "is not before --until"),
])
def test_mistakes_exit_2_naming_the_problem(
        recorded: Recorded, args: list[str], message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _replay(recorded, *args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_bad_allow_file_or_store_exits_2(recorded: Recorded, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    allow = tmp_path / "allow.json"
    allow.write_text(json.dumps([{"kind": "prompt_drifted"}]))
    assert _replay(recorded, "--agents", BANKING, "--allow", str(allow)) == 2
    assert "entry 0.kind" in capsys.readouterr().err
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["replay-test", "--store", missing, "--agents", BANKING]) == 2
    assert "no recorded store at" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["replay-test", "--store", recorded.url, "--agents", BANKING, "--limit", "0"])
    assert exit_.value.code == 2


def test_policy_what_if_counts_by_agent_and_tool(
        recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "whatif.json"
    assert main(["policy", "what-if", "--store", recorded.url, "--agents",
                 "tests.replay.variants:POLICY_CHANGED", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "9 recorded calls, 3 judged otherwise" in out
    example = next(line for line in out.splitlines() if line.startswith("  held: bankingAgent/"))
    assert example.endswith(": was not held, now held for approver, 1 approval")
    assert ' input {"amount": ' in example and "{'" not in example and "None" not in example
    rows = {(t["agent"], t["tool"]): t for t in json.loads(report.read_text())["tools"]}
    banking = rows["bankingAgent", "transferMoney"]
    assert banking["counts"]["held"] == 2  # $500 and $2500: over the new $100 threshold
    assert banking["examples"]["held"][0]["new"] == {
        "roles": ["approver"], "groups": [], "quorum": 1}
    treasury = rows["treasuryBankingAgent", "transferMoney"]
    assert (treasury["counts"]["quorum"], treasury["counts"]["unchanged"]) == (1, 1)
    assert rows["bankingAgent", "userApproval"]["counts"]["unchanged"] == 3


def test_the_progress_bar_counts_towards_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    show = _bar(4)
    show(1)
    show(4)
    err = capsys.readouterr().err
    assert "\rreplaying [#######.......................] 1/4 chats" in err
    assert "[##############################] 4/4 chats" in err and err.endswith("\n")
