"""Key rotation: each seal names its key; a new key seals new events, old keys verify old ones."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from interlock.audit import rotation
from interlock.audit.integrity import Verifier
from interlock.audit.signing import Signer
from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import Interlock, RespondEntry
from interlock.domain.storage.keys import Keyring, key_id
from tests.projections.flows import AGENTS
from tests.projections.tamper import EventsTable

pytestmark = pytest.mark.anyio
A, B, C = b"first-secret", b"second-secret", b"third-secret"


RETIRED: dict[bytes, str] = {}  # when each key stopped sealing (set as the keys rotate)


def _old(*old: bytes) -> str:
    """INTERLOCK_OLD_SECRETS for these keys: each with the time it was retired."""
    return ",".join(f"{o.decode()}@{RETIRED[o]}" for o in old)


def _app(store: str, active: bytes, *old: bytes) -> Interlock:
    return build_service(store, AGENTS, secret=Keyring.parse(active, _old(*old)))


def _rotate(store: str, active: bytes, *old: bytes) -> None:
    """`interlock audit rotate` with these keys (before any process seals with `active`)."""
    app, signer = _app(store, active, *old), Signer.generate()
    try:
        rotation.rotate(app, key_id=signer.key_id, sign=signer.sign,
                        now=lambda: datetime.now(UTC).isoformat())
    finally:
        app.close()


async def _three_keys(store: str) -> tuple[str, list[str]]:
    """One chat written under key A, then B, then C; its id and each version's key id."""
    app = _app(store, A)
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    result = await app.send(chat.id, "transfer $50 to bob", actor="alice")
    app.close()
    RETIRED[A] = datetime.now(UTC).isoformat()
    _rotate(store, B, A)
    app = _app(store, B, A)
    approve = RespondEntry(
        ref=result.interrupts[0].ref, name="userApproval", output={"approved": True}
    )
    assert not (await app.resume(chat.id, respond=[approve], actor="bob")).interrupts
    app.close()
    RETIRED[B] = datetime.now(UTC).isoformat()
    _rotate(store, C, A, B)
    app = _app(store, C, A, B)
    await app.send(chat.id, "transfer $5 to carol", actor="alice")
    app.close()
    states = EventsTable(store, chat.id).states()
    return str(chat.id), [states[v]["chain"].split(":")[1] for v in sorted(states)]


async def test_three_keys_seal_in_turn_and_all_verify(
    store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_id, kids = await _three_keys(store)
    assert kids[0] == key_id(A) and set(kids) == {key_id(A), key_id(B), key_id(C)}
    assert kids == sorted(kids, key=[key_id(A), key_id(B), key_id(C)].index)
    monkeypatch.setenv("INTERLOCK_SECRET", C.decode())
    monkeypatch.setenv("INTERLOCK_OLD_SECRETS", _old(A, B))
    assert main(["verify", chat_id, "--store", store]) == 0
    monkeypatch.setenv("INTERLOCK_OLD_SECRETS", _old(B))  # key A dropped from the ring
    assert main(["verify", chat_id, "--store", store]) == 1
    assert f"broken at version 1: sealed with unknown key '{key_id(A)}'" in capsys.readouterr().out


async def test_a_seal_made_with_another_key_of_the_same_id_is_refused(store: str) -> None:
    chat_id, _ = await _three_keys(store)
    wrong = Keyring(key_id(A), {key_id(A): b"not A", key_id(B): B, key_id(C): C})
    app = _app(store, C, A, B)
    try:
        breaks = Verifier(app.recorder, app.mapper, wrong).verify_all()
    finally:
        app.close()
    assert [(b.chat_id, b.version, b.reason) for b in breaks] == [
        (chat_id, 1, "seal does not match (wrong key or forged)")
    ]
