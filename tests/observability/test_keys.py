"""API keys: stored hashed, several per principal, a keys file others can read is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlock.api.auth import hash_key, load_auth
from interlock.cli.main import main as cli
from interlock.domain.errors import ConfigurationError, UnauthenticatedError

ALICE = {"id": "alice", "tenant": "acme", "roles": ["requester"]}


def _file(tmp_path: Path, entries: dict[str, object], mode: int = 0o600) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(entries))
    path.chmod(mode)
    return path


def test_a_file_of_hashes_authenticates_keys_it_does_not_hold(tmp_path: Path) -> None:
    path = _file(tmp_path, {hash_key("k-old"): ALICE, hash_key("k-new"): ALICE})
    assert "k-old" not in path.read_text() and "k-new" not in path.read_text()
    auth = load_auth(path)
    assert auth.authenticate("Bearer k-old", None).id == "alice"  # rotation: both work
    assert auth.authenticate("Bearer k-new", None).id == "alice"
    with pytest.raises(UnauthenticatedError):
        auth.authenticate(f"Bearer {hash_key('k-old')}", None)  # the hash is not a key


def test_plain_and_hashed_entries_mix(tmp_path: Path) -> None:
    auth = load_auth(_file(tmp_path, {"k-plain": ALICE, hash_key("k-hashed").upper().replace(
        "SHA256:", "sha256:"): ALICE}))
    assert {auth.authenticate(f"Bearer {k}", None).id for k in ("k-plain", "k-hashed")} == {
        "alice"}


@pytest.mark.parametrize(("entries", "message"), [
    ({"k1": ALICE, "k2": {**ALICE, "roles": ["admin"]}}, "different tenants or roles"),
    ({"sha256:abc": ALICE}, "64 hex digits"),
    ({"k1": ALICE, hash_key("k1"): ALICE}, "listed twice"),
])
def test_ambiguous_entries_are_refused(tmp_path: Path, entries: dict[str, object],
                                       message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_auth(_file(tmp_path, entries))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_keys_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = _file(tmp_path, {"k": ALICE}, mode)
    with pytest.raises(ConfigurationError, match=rf"readable by others \(mode {mode:o}\);"
                                                  rf" run: chmod 600"):
        load_auth(path)


def test_serve_refuses_to_start_on_such_a_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, {"k": ALICE}, 0o644)
    assert cli(["serve", "--store", "memory://", "--keys", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "readable by others" in err and "chmod 600" in err
