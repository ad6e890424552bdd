"""Signed exports, checked by the standalone verifier (run as a separate process)."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.cli.main import main
from interlock.domain import Interlock
from interlock.domain.chat.aggregate import Chat
from tests.projections.flows import as_carried, banking_flows, ops_flow
from tests.projections.tamper import EventsTable

pytestmark = pytest.mark.anyio
TOOL = Path(__file__).parents[2] / "tools" / "verify_export.py"


def standalone(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-I", str(TOOL), *args], capture_output=True,
                          text=True, timeout=60, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str]:
    private, public = tmp_path / "cp.pem", tmp_path / "cp.pub"
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 0
    return str(private), str(public)


def _export(store: str, keys: tuple[str, str], out: Path, *extra: str) -> None:
    assert main(["audit", "export", "--format", "events", "--key", keys[0], "-o", str(out),
                 "--store", store, *extra]) == 0


async def test_the_standalone_verifier_recomputes_a_v2_chain_and_its_input_hashes(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path
) -> None:
    chats, _ = await banking_flows(app)
    await ops_flow(app)
    out = tmp_path / "events.jsonl"
    _export(store, keys, out)
    checkpoints = tmp_path / "checkpoints.jsonl"
    assert main(["audit", "checkpoints", "-o", str(checkpoints), "--store", store]) == 0
    secrets = tmp_path / "secrets.txt"
    secrets.write_text("interlock-dev-secret-change-me\n")
    code, text = standalone(str(out), "--public-key", keys[1], "--checkpoints", str(checkpoints),
                            "--secrets-file", str(secrets))
    assert (code, text.strip()) == (0, "export verifies")
    assert len(out.read_text().splitlines()) == app.recorder.max_notification_id()
    secrets.write_text("a wrong secret\n")
    code, text = standalone(str(out), "--public-key", keys[1], "--secrets-file", str(secrets))
    assert code == 1 and f"chat {chats[0]}: version 1: seal does not match" in text


async def test_a_store_with_both_forms_of_a_reply_verifies_with_its_input_hashes(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:  # chats recorded while replies carried requests
        patched.setattr(Chat, "record_model_reply", as_carried)
        await banking_flows(app)
    requested, _ = await banking_flows(app)  # and chats with one ToolRequested per request
    topics = {(n.originator_id, n.topic) for n in app.recorder.select_notifications(0, 10_000)}
    assert {c for c, t in topics if t == "interlock:ToolRequested"} == set(requested)
    out = tmp_path / "events.jsonl"
    _export(store, keys, out)
    # Every decision's input_sha256 is recomputed from its call's input, found in either form
    # (a call the verifier could not find would be a problem of that chat).
    code, text = standalone(str(out), "--public-key", keys[1])
    assert (code, text.strip()) == (0, "export verifies")


async def test_an_edited_export_is_refused(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path
) -> None:
    await banking_flows(app)
    out = tmp_path / "events.jsonl"
    _export(store, keys, out)
    original = out.read_bytes()
    out.write_bytes(original.replace(b"$5000", b"$50"))
    code, text = standalone(str(out), "--public-key", keys[1])
    assert code == 1 and "the export was edited" in text
    manifest = Path(f"{out}.manifest.json")  # re-hashing it needs the private key to re-sign
    data = json.loads(manifest.read_text())
    data["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(data))
    code, text = standalone(str(out), "--public-key", keys[1])
    assert code == 1 and "manifest: signature does not verify" in text


async def test_a_store_cut_before_export_is_refused_through_the_checkpoint(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path
) -> None:
    chats, _ = await banking_flows(app)
    assert main(["audit", "checkpoint", "--key", keys[0], "--store", store]) == 0
    version = app.get_chat(chats[1]).version
    EventsTable(store, chats[1]).delete_from(version)
    EventsTable(store, chats[2]).delete_from(1)
    out = tmp_path / "events.jsonl"
    _export(store, keys, out)
    code, text = standalone(str(out), "--public-key", keys[1])
    assert code == 1
    assert f"chat {chats[1]}: ends at {version - 1}; the checkpoint lists {version}" in text
    assert f"chat {chats[2]}: missing; the checkpoint lists it" in text


async def test_a_signed_decision_export_is_checked_too(
    app: Interlock, store: str, keys: tuple[str, str], tmp_path: Path
) -> None:
    await banking_flows(app)
    out = tmp_path / "decisions.csv"
    assert main(["audit", "export", "--key", keys[0], "-o", str(out), "--store", store]) == 0
    assert standalone(str(out), "--public-key", keys[1])[0] == 0
    out.write_text(out.read_text().replace("bob", "eve"))
    assert standalone(str(out), "--public-key", keys[1])[0] == 1


def test_the_standalone_verifier_imports_only_the_standard_library_and_cryptography() -> None:
    tree = ast.parse(TOOL.read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    roots |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom)}
    assert roots - set(sys.stdlib_module_names) == {"cryptography"}


def test_the_standalone_verifier_given_the_private_key_says_so(
    keys: tuple[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "events.jsonl"
    out.write_text("")
    code, text = standalone(str(out), "--public-key", keys[0])
    assert code == 1 and "--public-key names a private key: give the public one" in text
    assert "non-hexadecimal" not in text
