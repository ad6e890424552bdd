"""Several server processes on one store: `interlock serve --workers 2` and `uvicorn --factory`."""

from __future__ import annotations

import re
import sys

import pytest

from interlock.client import Client
from tests.api.server import ServeProcess

UVICORN = (sys.executable, "-m", "uvicorn", "--factory", "interlock.bootstrap:create_app")
NO_KEYS = {"INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": ""}


def banking_cycle(url: str) -> None:
    """The demo agent answers; a transfer interrupts, is approved, and every request agrees."""
    with Client(url) as dev:
        assert dev.chat("bankingAgent").send("hello").finish_reason == "stop"
        chat = dev.chat("bankingAgent")
        [approval] = chat.send("Transfer $2000 to savings.").interrupts
        [limit] = chat.resume(respond=[approval.respond({"approved": True})]).interrupts
        done = chat.resume(restart=[limit.restart(resumed_metadata={"override": True})])
        assert (done.finish_reason, "Done." in done.text) == ("stop", True)
        version = chat.state()["version"]
    for _ in range(8):  # fresh connections: whichever worker answers sees the same chat
        with Client(url) as again:
            assert again.open_chat(chat.id).state()["version"] == version
            assert len(again.decisions(chat_id=chat.id)["items"]) == 2


def started_workers(server: ServeProcess) -> set[str]:
    return set(re.findall(r"Started server process \[(\d+)\]", "".join(server.log)))


def test_serve_with_two_workers_on_one_sqlite_file(sqlite_store: str) -> None:
    server = ServeProcess("--workers", "2", "--store", sqlite_store, env=NO_KEYS, workers=2)
    try:
        banking_cycle(server.url)
        assert len(server.workers()) == 2
    finally:
        server.stop()
    assert len(started_workers(server)) == 2


@pytest.mark.postgres
def test_uvicorn_factory_with_two_workers_on_postgres(pg_store: str) -> None:
    server = ServeProcess("--workers", "2", command=UVICORN, workers=2,
                          env={**NO_KEYS, "INTERLOCK_STORE": pg_store})
    try:
        banking_cycle(server.url)
        assert len(server.workers()) == 2
    finally:
        server.stop()
    assert len(started_workers(server)) == 2
