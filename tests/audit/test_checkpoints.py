"""Signed checkpoints: a cut tail or a deleted chat is detected with the public key alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from interlock.audit.checkpoints import Checkpoint, merkle_root
from interlock.cli.main import main
from interlock.domain import Interlock
from tests.audit.rows import CheckpointRows
from tests.projections.flows import banking_flows, ops_flow
from tests.projections.tamper import EventsTable

pytestmark = pytest.mark.anyio


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str]:
    private, public = tmp_path / "cp.pem", tmp_path / "cp.pub"
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 0
    return str(private), str(public)


def _checkpoint(store: str, keys: tuple[str, str]) -> int:
    return main(["audit", "checkpoint", "--key", keys[0], "--store", store])


def _verify(store: str, keys: tuple[str, str], *target: str) -> int:
    return main(["verify", *(target or ("--all",)), "--public-key", keys[1], "--store", store])


async def test_a_cut_tail_passes_the_chain_but_not_the_checkpoint(
    app: Interlock, store: str, keys: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    assert _checkpoint(store, keys) == 0
    last = app.get_chat(chats[1]).version
    EventsTable(store, chats[1]).delete_from(last - 1)
    assert main(["verify", "--all", "--store", store]) == 0  # the chain alone cannot tell
    assert _verify(store, keys) == 1
    assert _verify(store, keys, str(chats[1])) == 1
    out = capsys.readouterr().out
    assert (f"chat {chats[1]}: broken at version {last - 1}: tail cut: checkpoint 1 lists "
            f"version {last}, the store ends at {last - 2}") in out


async def test_a_deleted_chat_is_named(
    app: Interlock, store: str, keys: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    assert _checkpoint(store, keys) == 0
    version = app.get_chat(chats[2]).version
    EventsTable(store, chats[2]).delete_from(1)
    assert _verify(store, keys) == 1
    assert _verify(store, keys, str(chats[2])) == 1
    out = capsys.readouterr().out
    assert out.count(f"chat {chats[2]}: deleted: checkpoint 1 lists it at version {version}") == 2


async def test_events_after_a_checkpoint_verify_and_checkpoints_chain(
    app: Interlock, store: str, keys: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    assert _checkpoint(store, keys) == 0
    chat, _ = await ops_flow(app)
    assert _verify(store, keys) == 0
    assert _checkpoint(store, keys) == 0
    assert _verify(store, keys) == 0
    first, second = CheckpointRows(store).load().values()
    assert second.statement["prev"] == first.digest() and second.seq == 2
    assert {h.chat_id for h in second.heads} == {*map(str, chats), str(chat)}
    assert second.statement["events"] == app.recorder.max_notification_id()
    assert "checkpoint 2 of" in capsys.readouterr().out


def _forge_without_key(cp: Checkpoint) -> Checkpoint:
    heads = cp.heads[1:]  # hide a chat, as someone deleting it would
    statement = {**cp.statement, "chats": len(heads),
                 "root": merkle_root([h.leaf() for h in heads]).hex()}
    return dataclasses.replace(cp, statement=statement, heads=heads)


def _edit_heads(cp: Checkpoint) -> Checkpoint:
    return dataclasses.replace(cp, heads=cp.heads[1:])


@pytest.mark.parametrize(("forge", "problem"), [
    (_forge_without_key, "signature does not verify"),
    (_edit_heads, "its list of heads does not match its signed root"),
])
async def test_a_forged_checkpoint_is_refused(
    app: Interlock, store: str, keys: tuple[str, str], forge: object, problem: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await banking_flows(app)
    assert _checkpoint(store, keys) == 0
    rows = CheckpointRows(store)
    assert callable(forge)
    rows.save(1, forge(rows.load()[1]))
    assert _verify(store, keys) == 1
    assert f"checkpoint 1: {problem}" in capsys.readouterr().out


async def test_a_checkpoint_of_another_key_or_a_missing_one_is_refused(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await banking_flows(app)
    assert _checkpoint(store, keys) == 0
    assert _checkpoint(store, keys) == 0
    other = (str(tmp_path / "other.pem"), str(tmp_path / "other.pub"))
    assert main(["audit", "keygen", "--private", other[0], "--public", other[1]]) == 0
    assert _verify(store, other) == 1
    assert "checkpoint 1: not signed by key" in capsys.readouterr().out
    CheckpointRows(store).delete(1)
    assert _verify(store, keys) == 1
    assert "checkpoint 2: does not follow the previous checkpoint" in capsys.readouterr().out


async def test_every_checkpoint_deleted_and_a_tail_cut_fails_with_the_public_key(
    app: Interlock, store: str, keys: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    assert _checkpoint(store, keys) == 0
    assert _checkpoint(store, keys) == 0
    EventsTable(store, chats[1]).delete_from(app.get_chat(chats[1]).version - 1)
    rows = CheckpointRows(store)
    for seq in rows.load():
        rows.delete(seq)
    assert _verify(store, keys) == 1
    assert _verify(store, keys, str(chats[1])) == 1
    out = capsys.readouterr().out
    assert out.count("no checkpoint found, yet --public-key asks to check them: they were "
                     "deleted or never taken") == 2


async def test_a_store_never_checkpointed_fails_with_the_public_key_and_says_what_to_do(
    app: Interlock, store: str, keys: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    await banking_flows(app)
    assert _verify(store, keys) == 1
    assert "take one with `interlock audit checkpoint`" in capsys.readouterr().out
    assert main(["verify", "--all", "--store", store]) == 0  # without the key: the chains


async def test_a_checkpoint_is_refused_over_broken_chains(
    app: Interlock, store: str, keys: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    EventsTable(store, chats[0]).delete(2)
    assert _checkpoint(store, keys) == 1
    assert f"chat {chats[0]}: broken at version 2" in capsys.readouterr().out
    assert CheckpointRows(store).load() == {}


async def test_the_public_key_alone_verifies_hashes_and_checkpoints(
    app: Interlock, store: str, keys: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    chats, _ = await banking_flows(app)
    assert _checkpoint(store, keys) == 0
    monkeypatch.setenv("INTERLOCK_SECRET", "not the secret")
    assert _verify(store, keys) == 1  # seals need the secret...
    assert main(["verify", "--all", "--no-secret", "--public-key", keys[1],
                 "--store", store]) == 0  # ...hashes and checkpoints do not
    table = EventsTable(store, chats[3])
    table.write_raw(2, table.records()[2][1].replace(b"$20", b"$90"))
    assert main(["verify", "--all", "--no-secret", "--public-key", keys[1],
                 "--store", store]) == 1
