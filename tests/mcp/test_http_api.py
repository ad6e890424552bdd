"""An MCP tool held, then approved over the HTTP API by another principal with the Python client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from interlock import Agent
from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.client import Client, ForbiddenError
from interlock.mcp import mcp_tools
from interlock.projections import open_read_models
from tests.api.server import ThreadServer
from tests.kit import FunctionModel, Script, call, say
from tests.mcp.conftest import CONFIG, Ledger

KEYS = {
    "key-alice": {"id": "alice", "tenant": "acme", "roles": ["requester"]},
    "key-bob": {"id": "bob", "tenant": "acme", "roles": ["approver"]},
    "key-carol": {"id": "carol", "tenant": "acme", "roles": ["auditor"]},
}


@pytest.fixture
def served(spec: str, sqlite_store: str) -> Iterator[str]:
    script = Script([call(("refund", {"invoice": "INV-9", "amount": 25}, "r1")),
                     say("refunded")])
    agent = Agent(name="billing", system="You refund invoices.",
                  tools=mcp_tools(spec, config=CONFIG), model=FunctionModel(script))
    service = build_service(sqlite_store, [agent])
    views = open_read_models(service)
    server = ThreadServer(make_app(service, views, AuthConfig.from_mapping(KEYS)))
    try:
        yield server.url
    finally:
        server.stop()
        views.close()


def test_an_approver_approves_over_http_and_the_server_is_called_once(
    served: str, ledger: Ledger
) -> None:
    with Client(served, api_key="key-alice") as alice, \
            Client(served, api_key="key-bob") as bob, Client(served, api_key="key-carol") as carol:
        chat = alice.chat("billing")
        turn = chat.send("refund INV-9")
        [held] = turn.interrupts
        assert turn.finish_reason == "interrupted" and held.name == "refund"
        assert held.input == {"invoice": "INV-9", "amount": 25} and ledger.calls() == []
        with pytest.raises(ForbiddenError):  # a requester may not approve
            alice.open_chat(chat.id).decide(held.approve())
        done = bob.open_chat(chat.id).decide(held.approve())
        assert done.finish_reason == "stop" and done.text == "refunded"
        [row] = carol.decisions(chat_id=chat.id)["items"]
        agent = next(a for a in carol.agents() if a["name"] == "billing")
        assert row["actor"] == "bob" and row["fingerprint"] == agent["fingerprint"]
    assert [(c["tool"], c["key"]) for c in ledger.calls()] == [("refund", f"{chat.id}:r1:1")]
