"""Tenants are isolated; resume needs an approver (a distinct one where the tool says so);
auditors read everything and change nothing; dev mode stays on loopback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interlock.api.auth import AuthConfig, load_auth
from interlock.bootstrap import auth_from
from interlock.client import ChatNotFoundError, Client, ForbiddenError
from interlock.domain import errors as domain_errors
from interlock.domain.chat.policies import normalise_id
from interlock.settings import load_settings
from tests.api.conftest import KEYS, ClientFor
from tests.api.server import ServeProcess


@pytest.fixture
def alice(client_for: ClientFor) -> Client:
    return client_for("alice")


def test_another_tenants_chat_does_not_exist(alice: Client, client_for: ClientFor) -> None:
    chat = alice.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    eve = client_for("eve")
    with pytest.raises(ChatNotFoundError):
        eve.open_chat(chat.id)
    stranger = type(chat)(eve, chat.id, chat.agent)
    with pytest.raises(ChatNotFoundError):
        stranger.resume(respond=[approval.respond({"approved": True})])
    with pytest.raises(ChatNotFoundError):
        stranger.events()
    assert eve.interrupts(chat_id=chat.id)["items"] == []
    assert chat.id not in [c["chat_id"] for c in eve.chats()["items"]]
    assert chat.state()["status"] == "interrupted"


def test_resume_needs_an_approver(alice: Client, client_for: ClientFor) -> None:
    chat = alice.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    with pytest.raises(ForbiddenError) as info:
        chat.resume(respond=[approval.respond({"approved": True})])
    assert info.value.details["role"] == "approver"
    with pytest.raises(ForbiddenError):
        client_for("bob").chat("bankingAgent")  # an approver alone cannot start chats
    admin = client_for("root").open_chat(chat.id)
    assert admin.resume(respond=[approval.respond({"approved": True})]).finish_reason == "stop"


def test_a_distinct_approver_tool_refuses_the_sender(client_for: ClientFor) -> None:
    dana = client_for("dana")  # requester and approver
    chat = dana.chat("opsAgent")
    [deploy] = chat.send("deploy web").interrupts
    go = deploy.restart(resumed_metadata={"approved": True})
    with pytest.raises(ForbiddenError) as info:
        chat.resume(restart=[go])
    assert info.value.details == {"ref": deploy.ref, "actor": "dana", "reason": "requester"}
    done = client_for("bob").open_chat(chat.id).resume(restart=[go])
    assert done.finish_reason == "stop"
    [decided] = [e for e in chat.events() if e["type"] == "Restarted"]
    assert decided["actor"] == "bob"


def test_auditors_read_everything_and_change_nothing(alice: Client, client_for: ClientFor) -> None:
    chat = alice.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    carol = client_for("carol")
    audited = carol.open_chat(chat.id)
    assert audited.state()["status"] == "interrupted"
    assert audited.events()[0]["type"] == "ChatStarted"
    assert [i["ref"] for i in carol.interrupts(chat_id=chat.id)["items"]] == [approval.ref]
    assert carol.decisions(chat_id=chat.id)["items"] == []
    for refused in (lambda: audited.send("hi"), lambda: carol.chat("bankingAgent"),
                    lambda: audited.resume(respond=[approval.respond({"approved": True})])):
        with pytest.raises(ForbiddenError):
            refused()
    assert chat.state()["version"] == audited.state()["version"]


def test_keys_load_from_json_toml_and_environment(tmp_path: Path) -> None:
    as_json = tmp_path / "keys.json"
    as_json.write_text(json.dumps(KEYS))
    as_toml = tmp_path / "keys.toml"
    as_toml.write_text('[key-x]\nid = "x"\ntenant = "t"\nroles = ["auditor"]\n')
    as_json.chmod(0o600)
    as_toml.chmod(0o600)
    assert load_auth(as_json).authenticate("Bearer key-bob", None).id == "bob"
    assert load_auth(as_toml).authenticate("Bearer key-x", None).roles == {"auditor"}
    from_env = auth_from(load_settings(api_keys=json.dumps(KEYS)))
    assert from_env.authenticate("bearer key-eve", None).tenant == "globex"
    with pytest.raises(domain_errors.UnauthenticatedError):
        from_env.authenticate("Bearer not-a-key", None)
    assert load_auth().dev_mode


def test_dev_mode_answers_loopback_callers_only() -> None:
    dev = AuthConfig(None)
    assert dev.authenticate(None, "127.0.0.1").id == "dev"
    assert dev.authenticate(None, "::1").roles >= {"admin"}
    with pytest.raises(domain_errors.ForbiddenError):
        dev.authenticate(None, "10.1.2.3")


def test_serve_refuses_a_public_host_without_keys(sqlite_store: str) -> None:
    with pytest.raises(RuntimeError, match=r"refusing to serve 0\.0\.0\.0 without API keys"):
        ServeProcess("--host", "0.0.0.0", "--store", sqlite_store,
                     env={"INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": ""})


def test_serve_in_dev_mode_says_so(sqlite_store: str) -> None:
    server = ServeProcess("--store", sqlite_store, env={"INTERLOCK_API_KEYS": ""})
    try:
        with Client(server.url) as dev:
            assert dev.chat("bankingAgent").send("hello").finish_reason == "stop"
    finally:
        server.stop()
    assert any("DEV MODE" in line for line in server.log)


@pytest.mark.parametrize(("spelling", "named"), [
    ("dave\u200b", "U+200B ZERO WIDTH SPACE"),
    ("da\u00adve", "U+00AD SOFT HYPHEN"),
    ("d\u0430ve", "U+0430 CYRILLIC SMALL LETTER A"),
    ("dave smith", "U+0020 SPACE"),
    ("-dave", "U+002D HYPHEN-MINUS"),
])
def test_a_principal_id_that_could_read_as_another_is_refused(spelling: str, named: str) -> None:
    """Two ids that print alike would be two people to the four-eyes rule and one to a reader."""
    with pytest.raises(domain_errors.ConfigurationError, match=re.escape(named)):
        AuthConfig.from_mapping({"key-1": {"id": "dave"}, "key-2": {"id": spelling}})
    with pytest.raises(domain_errors.ConfigurationError, match="may hold only ASCII letters"):
        AuthConfig.from_mapping({"key-2": {"id": spelling}})
    ok = AuthConfig.from_mapping({"k": {"id": "dave.smith+ops@example-1.com"}})
    assert ok.authenticate("Bearer k", None).id == "dave.smith+ops@example-1.com"


def test_ids_that_differ_only_by_invisible_characters_are_one_person_to_the_rules() -> None:
    """Actors reach the rules by other ways than the keys file (in-process callers)."""
    assert normalise_id("Da\u00adve\u200b") == normalise_id("dave") == normalise_id(" DAVE ")
