"""A live server per test (SQLite and PostgreSQL), API keys for a few principals, clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.client import Client
from interlock.projections import open_read_models
from interlock.stores.console_sessions import open_sessions
from interlock.stores.postgres import store_guard
from tests.api.agents import AGENTS
from tests.api.server import ThreadServer

KEYS = {
    "key-alice": {"id": "alice", "tenant": "acme", "roles": ["requester"]},
    "key-bob": {"id": "bob", "tenant": "acme", "roles": ["approver"]},
    "key-dana": {"id": "dana", "tenant": "acme", "roles": ["requester", "approver"]},
    "key-carol": {"id": "carol", "tenant": "acme", "roles": ["auditor"]},
    "key-root": {"id": "root", "tenant": "acme", "roles": ["admin"]},
    "key-tina": {"id": "tina", "tenant": "acme", "roles": ["treasury"]},
    "key-tom": {"id": "tom", "tenant": "acme", "roles": ["treasury"], "groups": ["finance"]},
    "key-eve": {"id": "eve", "tenant": "globex", "roles": ["requester", "approver", "auditor"]},
    # staged approvals (wireAgent): a team lead, one who is lead and treasurer, a CFO, a
    # treasurer who trades too (a conflicting pair)
    "key-lee": {"id": "lee", "tenant": "acme", "roles": ["lead"]},
    "key-bea": {"id": "bea", "tenant": "acme", "roles": ["lead", "treasury"]},
    "key-cora": {"id": "cora", "tenant": "acme", "roles": ["cfo"]},
    "key-tex": {"id": "tex", "tenant": "acme", "roles": ["treasury", "trader"]},
    # data policies (/v1/policies): a risk officer, and one who is a treasurer too
    "key-pia": {"id": "pia", "tenant": "acme", "roles": ["policy_admin"]},
    "key-ray": {"id": "ray", "tenant": "acme", "roles": ["policy_admin", "treasury"]},
}
ClientFor = Callable[[str], Client]


class Live:
    """The running server and the service behind it (tests may observe its commits)."""

    def __init__(self, store: str) -> None:
        self.service = build_service(store, AGENTS)
        self.views = open_read_models(self.service)
        self.server = ThreadServer(make_app(  # handed the store's parts as the wiring does
            self.service, self.views, AuthConfig.from_mapping(KEYS),
            guard=store_guard(self.service), sessions=open_sessions(self.service)))
        self.url = self.server.url

    def close(self) -> None:
        self.server.stop()
        self.views.close()


@pytest.fixture
def live(store: str) -> Iterator[Live]:
    server = Live(store)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def client_for(live: Live) -> Iterator[ClientFor]:
    """`client_for("alice")`: a client with that principal's key."""
    clients: list[Client] = []

    def make(name: str) -> Client:
        clients.append(Client(live.url, api_key=f"key-{name}"))
        return clients[-1]

    yield make
    for c in clients:
        c.close()
