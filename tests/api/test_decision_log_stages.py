"""The decision log names the stage a vote was cast in and, for a delegate's vote, whom it
was cast for and by which delegation: in /v1/decisions, its export, the console's page, and
after a rebuild; a view of the shape before (version 1) is rebuilt when opened."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import httpx

from interlock.projections import open_views
from interlock.projections.views.decisions import DecisionsView
from tests.api.conftest import ClientFor, Live
from tests.api.test_approvals import _away, _vote_by, _wire
from tests.projections.conftest import dumps, rebuilt

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _three_stages_one_by_delegation(client_for: ClientFor) -> tuple[str, dict[str, Any]]:
    """A wire of 150,000: lee (team lead), dana for tina by delegation (treasury), cora (CFO)."""
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    chat, held = _wire(client_for, 150_000)
    client_for("lee").open_chat(chat.id).decide(held.approve())
    _vote_by(client_for, "dana", chat.id, held, made["id"])
    client_for("cora").open_chat(chat.id).decide(held.approve())
    return chat.id, made


def _console(live: Live, path: str) -> str:
    with httpx.Client(base_url=live.url, follow_redirects=False) as c:
        page = c.get("/ui/sign-in")
        token = _CSRF.search(page.text)
        assert token is not None
        csrf = {"Cookie": f"interlock_csrf={page.cookies['interlock_csrf']}"}
        signed = c.post("/ui/sign-in", data={"csrf": token[1], "api_key": "key-carol"},
                        headers=csrf)
        session = signed.cookies["interlock_session"]
        answer = c.get(path, headers={"Cookie": f"interlock_session={session}"})
    assert answer.status_code == 200, answer.text
    return answer.text


def test_the_log_names_each_votes_stage_and_a_delegates_principal(
    live: Live, client_for: ClientFor
) -> None:
    chat_id, made = _three_stages_one_by_delegation(client_for)
    live.views.catch_up()
    rows = client_for("carol").decisions(chat_id=chat_id)["items"]
    assert [(r["actor"], r["stage"], r["for_actor"], r["delegation_id"]) for r in rows] == [
        ("cora", "CFO", None, None), ("dana", "treasury", "tina", made["id"]),
        ("lee", "team lead", None, None)]  # newest first

    with httpx.Client(base_url=live.url) as http:
        exported = http.get("/v1/decisions/export", params={"chat_id": chat_id, "format": "csv"},
                            headers={"Authorization": "Bearer key-carol"})
    assert exported.status_code == 200, exported.text
    records = list(csv.reader(io.StringIO(exported.text)))
    assert records[0][-4:] == ["stage", "for_actor", "delegation_id", "policy"]  # at the end
    assert sorted(tuple(r[-4:-1]) for r in records[1:]) == [
        ("CFO", "", ""), ("team lead", "", ""), ("treasury", "tina", made["id"])]

    page = _console(live, f"/ui/decisions?chat_id={chat_id}")
    assert "<th scope=\"col\">Stage</th>" in page
    assert "for tina" in page and made["id"][:8] in page
    assert all(f'<td class="stage">{s}</td>' in page for s in ("team lead", "treasury", "CFO"))
    assert dumps(live.views) == rebuilt(live.service)


def test_a_one_stage_vote_has_no_stage(live: Live, client_for: ClientFor) -> None:
    chat = client_for("alice").chat("payAgent")
    held = chat.send("pay 500 bob-corp").interrupts[0]
    client_for("tina").open_chat(chat.id).decide(held.approve())
    live.views.catch_up()
    [row] = client_for("carol").decisions(chat_id=chat.id)["items"]
    assert (row["actor"], row["stage"], row["for_actor"], row["delegation_id"]) == (
        "tina", None, None, None)


def test_a_decisions_view_of_the_shape_before_is_rebuilt_when_opened(
    live: Live, client_for: ClientFor
) -> None:
    chat_id, _ = _three_stages_one_by_delegation(client_for)
    prefix = "older_decisions"
    views = open_views(live.service, prefix=prefix)
    view = views.view(DecisionsView)
    views.catch_up()
    want = view.dump()
    assert {r["stage"] for r in want if r["chat_id"] == chat_id} == {
        "team lead", "treasury", "CFO"}
    # What version 1 left: no stage, for_actor nor delegation_id, no version recorded.
    store = view.store
    store.drop()
    for template in (
            "CREATE TABLE {tracking} (application_name text PRIMARY KEY,"
            " notification_id bigint NOT NULL)",
            "CREATE TABLE {decisions} (chat_id text NOT NULL, version bigint NOT NULL,"
            " ref text NOT NULL, tenant text NOT NULL, agent text NOT NULL, tool text NOT NULL,"
            " kind text NOT NULL, original_input text, replaced_input text, output text,"
            " resumed_metadata text, actor text NOT NULL, input_sha256 text NOT NULL,"
            " requested_at text NOT NULL, decided_at text NOT NULL, fingerprint text,"
            " PRIMARY KEY (chat_id, version))"):
        _execute(store, template)
    _execute(store, "INSERT INTO {tracking} VALUES ('Interlock', 1)")
    views.close()
    again = open_views(live.service, prefix=prefix)
    try:
        reopened = again.view(DecisionsView)
        assert reopened.position() == 0  # emptied: it catches up from the log
        again.catch_up()
        assert reopened.dump() == want
        caught_up = reopened.position()
    finally:
        again.close()
    third = open_views(live.service, prefix=prefix)  # its version is recorded: kept as is
    try:
        assert third.view(DecisionsView).position() == caught_up > 0
    finally:
        third.close()


def _execute(store: Any, template: str) -> None:
    """Run DDL on the view's store outside a batch (either backend)."""
    if store.dialect == "sqlite":
        with store.db.lock:
            store.db.conn.execute(store._q(template))
        return
    with store.datastore.transaction(commit=True) as curs:
        curs.execute(store._q(template))
