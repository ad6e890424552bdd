"""The `interlock` command: the demo drives the real service; bad settings are one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.cli.main import main


def test_demo_plays_the_seed_flow_unattended(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--store", "memory://", "--say", "Transfer $2500 to savings."])
    out = capsys.readouterr().out
    assert code == 0
    assert "interrupt userApproval-1: userApproval" in out
    assert "interrupt transferMoney-2: transferMoney" in out  # over the limit: restarted
    assert "Done. Your checking balance is now" in out and out.rstrip().endswith(
        "[stop, version 15]"
    )


def test_a_bad_store_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--store", "bogus://x", "--say", "hi"]) == 2
    assert capsys.readouterr().err.strip() == (
        "interlock demo: unknown store 'bogus://x': use memory://, sqlite:///path.db or "
        "postgresql://..."
    )


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("demo", "serve", "projections", "replay", "verify", "audit"):
        assert command in out


@pytest.mark.parametrize("command", [["verify", "--all"], ["audit", "export"]])
def test_an_audit_of_a_store_that_is_not_there_fails_and_makes_none(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    mistyped = tmp_path / "mistyped.db"
    assert main([*command, "--store", f"sqlite:///{mistyped}"]) == 2
    assert "names no file" in capsys.readouterr().err and not mistyped.exists()
    assert main([*command, "--store", "memory://"]) == 2
    assert "holds nothing to audit" in capsys.readouterr().err


def test_demo_asks_again_on_an_unknown_answer_and_leaves_on_ctrl_d(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    typed = iter(["Transfer $500 to savings.", "maybe", "yes", ""])

    def keyboard(prompt: str = "") -> str:
        return next(typed)

    monkeypatch.setattr("builtins.input", keyboard)
    assert main(["demo", "--store", "memory://"]) == 0
    out = capsys.readouterr().out
    assert "'maybe' is not an answer: type y, n or r" in out
    assert "balance is now $4,500.00" in out  # "yes" was taken, not "maybe" as a no

    def ctrl_d(prompt: str = "") -> str:
        if prompt.startswith("  approve?"):
            raise EOFError
        return "Transfer $500 to savings."

    monkeypatch.setattr("builtins.input", ctrl_d)
    assert main(["demo", "--store", "memory://"]) == 0
    out = capsys.readouterr().out
    assert "no decision: chat" in out and "keeps its call pending; bye" in out
