"""docs/review.md's `## CLI` block, every line run as written and in order, on a seeded history.

Only the documented placeholders are filled in: `URL` (the store), `REVIEW` (the id the
`open` line prints). The files the lines name (keys.toml, cp.pem, cp.pub) are made first in
a directory the lines run in, next to a `tools` link to the checkout's tools/, as if run from
a checkout; lines without `--store` find the store where the CLI reads it, INTERLOCK_STORE.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import pytest

from interlock.cli.main import main
from interlock.domain.review.queries import SHIPPED
from tests.review.history import ACTIVE, TENANT, History

ROOT = Path(__file__).parents[2]

# The block as this test knows it: a line changed, added or removed in the doc fails here
# until the test runs (and checks) it too.
LINES = (
    "export INTERLOCK_REVIEW_SECOND_SIGNER=acme",
    "interlock review queries",
    "interlock review query fast_approval --param seconds=5 --tenant acme --store URL",
    "interlock review query custom --filter 'input.amount > 10000' --tenant acme",
    "interlock review query revoked_actor --tenant acme --keys keys.toml",
    "interlock review open edited_then_approved --tenant acme --actor rita --size 50 "
    "--strata actor --seed q3",
    'interlock review assess REVIEW 1 --verdict finding --severity high --note "..." '
    "--actor rita",
    "interlock review sign-off REVIEW --actor head && "
    "interlock review sign-off REVIEW --actor rosa",
    "interlock review close REVIEW --actor head",
    "interlock audit evidence --review REVIEW --key cp.pem --output evidence.zip",
    "python tools/verify_export.py evidence.zip --public-key cp.pub",
    "interlock review population REVIEW --output population.jsonl",
    "python tools/verify_export.py evidence.zip --public-key cp.pub --population population.jsonl",
)


def cli_block() -> list[str]:
    """The lines of the one ```sh block under `## CLI` in docs/review.md."""
    text = (ROOT / "docs" / "review.md").read_text()
    section = text.split("\n## CLI\n", 1)[1].split("\n## ", 1)[0]
    assert section.count("```sh\n") == 1, "the CLI section should hold one sh block"
    return section.split("```sh\n", 1)[1].split("\n```", 1)[0].splitlines()


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def rows(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.splitlines() if line.startswith("{")]


class Shell:
    """Runs a documented line: `interlock` in-process (this tree's code, as the CLI tests do),
    `python` as a process of this interpreter; `a && b` runs b only when a exits 0."""

    def __init__(self, cwd: Path, capsys: pytest.CaptureFixture[str],
                 env: pytest.MonkeyPatch) -> None:
        self.cwd, self.capsys, self.env = cwd, capsys, env
        self.values: dict[str, str] = {}  # placeholder -> what it stands for

    def __call__(self, line: str) -> list[Ran]:
        words = [self.values.get(w, w) for w in shlex.split(line)]
        commands: list[list[str]] = [[]]
        for word in words:
            if word == "&&":
                commands.append([])
            else:
                commands[-1].append(word)
        ran: list[Ran] = []
        for command in commands:
            ran.append(self._one(command))
            if ran[-1].code != 0:
                break
        assert [r.code for r in ran] == [0] * len(commands), (line, ran)
        return ran

    def _one(self, command: list[str]) -> Ran:
        program, *args = command
        if program == "export":  # `export NAME=value`: the lines after it see it
            name, value = args[0].split("=", 1)
            self.env.setenv(name, value)
            return Ran(0, "", "")
        if program == "python":  # -I: the verifier needs nothing but itself
            done = subprocess.run([sys.executable, "-I", *args], cwd=self.cwd, text=True,
                                  capture_output=True, timeout=120, check=False)
            return Ran(done.returncode, done.stdout, done.stderr)
        assert program == "interlock", command
        self.capsys.readouterr()
        try:
            code = main(args)
        except SystemExit as exc:  # argparse refusing the line
            code = exc.code if isinstance(exc.code, int) else 2
        out = self.capsys.readouterr()
        return Ran(code, out.out, out.err)


def test_the_cli_block_of_review_md_runs_line_by_line(
    history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cli_block() == list(LINES)
    (second, queries, fast, custom, revoked, opened, assess, sign_off, close, evidence, verify,
     population, verify_population) = LINES
    here = tmp_path / "lines"  # not tmp_path: the SQLite store is tmp_path/interlock.db, the
    here.mkdir()  # default store's file, so a line missing the store would find it by chance
    monkeypatch.chdir(here)
    monkeypatch.setenv("INTERLOCK_STORE", history.store)
    (here / "tools").symlink_to(ROOT / "tools", target_is_directory=True)
    keys = here / "keys.toml"  # docs/observability.md's form: who holds a key now
    keys.write_text("".join(f'["k-{n}"]\nid = "{n}"\ntenant = "{TENANT}"\nroles = ["approver"]'
                            "\n\n" for n in sorted(ACTIVE)))
    keys.chmod(0o600)
    assert main(["audit", "keygen", "--private", "cp.pem", "--public", "cp.pub"]) == 0
    sh = Shell(here, capsys, monkeypatch)
    sh(second)
    sh.values["URL"] = history.store

    [ran] = sh(queries)
    assert [r["name"] for r in ran.rows()] == list(SHIPPED)

    [ran] = sh(fast)  # bob approved "fast" in 2 s; every other decision took 30 s or more
    assert [(r["chat_id"], r["actor"]) for r in ran.rows()] == [(str(history.chats["fast"]),
                                                                 "bob")]
    assert "fast_approval v1: 1 decision(s)" in ran.err

    [ran] = sh(custom)  # 20000 edited to 15000 by carol, then approved by bob
    assert sorted((r["kind"], r["actor"]) for r in ran.rows()) == [("approve", "bob"),
                                                                  ("edit", "carol")]
    assert "custom v1: 2 decision(s)" in ran.err

    [ran] = sh(revoked)
    assert [r["actor"] for r in ran.rows()] == ["mallory"]

    [ran] = sh(opened)  # rita neither requested, edited nor decided the one edited approval
    [review] = ran.rows()
    assert (review["seed"], review["population"], review["items"]) == ("q3", 1, 1)
    sh.values["REVIEW"] = str(UUID(str(review["review_id"])))

    [ran] = sh(assess)
    assert ran.out.strip() == f"review {sh.values['REVIEW']}: assess recorded"

    signed, countersigned = sh(sign_off)  # acme asks two signers: head, then rosa
    assert signed.out.strip().endswith("sign-off recorded")
    assert countersigned.out.strip().endswith("sign-off recorded")
    [closed] = sh(close)
    assert closed.out.strip().endswith("close recorded")

    [ran] = sh(evidence)
    assert ran.out.startswith(f"evidence pack evidence.zip: review {sh.values['REVIEW']}, ")
    assert (here / "evidence.zip").is_file()

    [ran] = sh(verify)
    assert ran.out.strip().splitlines()[-1] == "evidence pack verifies", ran

    [ran] = sh(population)
    assert ran.out.strip() == "population.jsonl: 1 candidate(s); the review recorded 1"
    [row] = [json.loads(line) for line in (here / "population.jsonl").read_text().splitlines()]
    assert (row["chat_id"], row["strata"]) == (str(history.chats["edited"]), ["bob"])

    [ran] = sh(verify_population)
    assert ran.out.strip().splitlines()[-1] == "evidence pack verifies", ran

    assert main(["review", "show", sh.values["REVIEW"]]) == 0  # what the lines left behind
    shown = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (shown["status"], shown["signed_off_by"], shown["closed_by"]) == ("closed", "head",
                                                                           "head")
    assert (shown["signers"], shown["countersigned_by"]) == (2, "rosa")
    [item] = shown["items"]
    parties = (item["requested_by"], item["edited_by"], item["decided_by"])
    assert parties == (["alice"], ["carol"], ["bob", "carol"])  # rita is none of them
    found = shown["assessments"]["1"]
    assert (found["verdict"], found["severity"], found["actor"]) == ("finding", "high", "rita")


def test_review_queries_takes_a_store_as_every_review_command_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It was refused by the top-level parser ("unrecognized arguments: --store")."""
    mistyped = tmp_path / "nowhere.db"
    assert main(["review", "queries", "--store", f"sqlite:///{mistyped}"]) == 0
    listed = [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(SHIPPED) and not mistyped.exists()  # none is opened, none made
