"""View receipts: the console records one per opening of a pending call's page (principal,
session, input shown), never one per reload, across processes sharing a store; the reviews
view says whether each decision's actor had opened the page of the input decided on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.audit.reading import verifier
from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import ApproveEntry, EditEntry, Interlock
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.receipts import CallViewed, Receipts, receipts_id
from interlock.domain.review.queries import SHIPPED, resolve
from interlock.domain.review.service import Reviews
from interlock.projections import SqlReadModels, open_read_models, open_views
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from tests.review.history import ACTIVE, TENANT, History, agent

KEYS = {f"key-{name}": {"id": name, "tenant": tenant, "roles": roles} for name, tenant, roles in (
    ("alice", "acme", ["requester"]), ("bob", "acme", ["approver", "treasury"]),
    ("carol", "acme", ["approver", "treasury"]), ("rita", "acme", ["auditor"]),
    ("eve", "globex", ["auditor"]))}
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
TOOL = Path(__file__).parents[2] / "tools" / "verify_export.py"


@pytest.fixture
def apps(history: History) -> Iterator[list[TestClient]]:
    """Two servers on the one store (two processes' worth: services, views, sessions)."""
    other = build_service(history.store, [agent()])
    made: list[TestClient] = []
    views = []
    for service in (history.app, other):
        read = open_read_models(service, poll_interval=0.05)
        views.append(read)
        made.append(TestClient(make_app(service, read, AuthConfig.from_mapping(KEYS))))
    for client in made:
        client.__enter__()
    yield made
    for client in made:
        client.__exit__(None, None, None)
    for read in views:
        read.close()
    other.close()


def sign_in(client: TestClient, key: str) -> str:
    """Sign in as a browser would; the new session's cookie."""
    page = client.get("/ui/sign-in")
    token = _CSRF.search(page.text)
    assert token is not None
    answer = client.post("/ui/sign-in", data={"csrf": token[1], "api_key": key},
                         follow_redirects=False)
    assert answer.status_code == 303
    return str(answer.cookies["interlock_session"])


def open_page(client: TestClient, h: History, name: str, ref: str, session: str) -> None:
    answer = client.get(f"/ui/chats/{h.chats[name]}/interrupts/{ref}",
                        headers={"Cookie": f"interlock_session={session}"})
    assert answer.status_code == 200, answer.text


def receipts(h: History, name: str, ref: str) -> list[CallViewed]:
    return Receipts(h.app).of_call(h.chats[name], ref).receipts


def now() -> datetime:
    return datetime.now(UTC)


def test_one_receipt_per_opening_not_per_refresh(history: History,
                                                 apps: list[TestClient]) -> None:
    console = apps[0]
    ref = history.ask("looked", 900, now())
    first = sign_in(console, "key-bob")
    for _ in range(3):  # a reload in the same session records nothing new
        open_page(console, history, "looked", ref, first)
    [one] = receipts(history, "looked", ref)
    shown = sha256_hex({"amount": 900})
    assert (one.principal, one.input_sha256, one.tenant, one.ref) == ("bob", shown, TENANT, ref)
    second = sign_in(console, "key-bob")  # a new sign-in is a new opening
    open_page(console, history, "looked", ref, second)
    open_page(console, history, "looked", ref, second)
    history.vote("looked", "carol", EditEntry(ref=ref, name="pay", input={"amount": 950},
                                              reason="a smaller amount"), now())
    open_page(console, history, "looked", ref, second)  # the page shows the edited input
    found = receipts(history, "looked", ref)
    assert [(r.principal, r.input_sha256) for r in found] == [
        ("bob", shown), ("bob", shown), ("bob", sha256_hex({"amount": 950}))]
    assert found[0].session != found[1].session == found[2].session
    assert first not in {r.session for r in found}  # the cookie is not what is kept
    stream = receipts_id(history.chats["looked"], ref)
    assert verifier(history.app, history.app.sealer.keys).verify_chat(stream) is None
    assert verifier(history.app, history.app.sealer.keys).verify_all() == []


def test_an_approval_from_the_page_opened_is_viewed_and_one_over_the_api_is_not(
    history: History, apps: list[TestClient], models: SqlReadModels, view: ReviewsView,
) -> None:
    console = apps[0]
    looked, blind = history.ask("console", 970, now()), history.ask("api", 980, now())
    session = sign_in(console, "key-bob")
    path = f"/ui/chats/{history.chats['console']}/interrupts/{looked}"
    page = console.get(path, headers={"Cookie": f"interlock_session={session}"}).text
    form = {"csrf": _field(page, "csrf"), "input_sha256": _field(page, "input_sha256")}
    answer = console.post(f"{path}/approve", data=form, follow_redirects=False,
                          headers={"Cookie": f"interlock_session={session}"})
    assert answer.status_code == 303, answer.text
    voted = console.post(f"/v1/chats/{history.chats['api']}/resume",
                         json={"approve": [{"ref": blind, "name": "pay"}]},
                         headers={"Authorization": "Bearer key-bob"})
    assert voted.status_code == 200, voted.text
    models.catch_up()
    facts = {f.chat_id: f for f in view.facts(
        TENANT, resolve("custom", custom="kind = 'approve'").node, 100).items}
    [receipt] = receipts(history, "console", looked)
    mine = facts[str(history.chats["console"])]
    assert (mine.viewed, mine.viewed_at) == (True, receipt.timestamp)
    assert facts[str(history.chats["api"])].viewed is False
    found = _answer(history, view)
    assert ("api", "approve", "bob") in found and ("console", "approve", "bob") not in found


def _field(page: str, name: str) -> str:
    found = re.search(f'name="{name}" value="([^"]+)"', page)
    assert found is not None, name
    return found[1]


def test_the_rule_holds_across_two_servers_sharing_the_store(
    history: History, apps: list[TestClient],
) -> None:
    ref = history.ask("two", 910, now())
    session = sign_in(apps[0], "key-bob")
    open_page(apps[0], history, "two", ref, session)
    open_page(apps[1], history, "two", ref, session)  # another worker, the same session
    assert len(receipts(history, "two", ref)) == 1


def test_racing_openings_write_one_receipt_each(history: History) -> None:
    """Two services race on the call's stream: the loser rereads; nothing is written twice."""
    ref = history.ask("race", 920, now())
    other = build_service(history.store, [agent()])
    services: list[Interlock] = [history.app, other, history.app, other]
    start = threading.Barrier(len(services))
    failures: list[BaseException] = []

    def open_it(service: Interlock, session: str) -> None:
        start.wait()
        try:
            Receipts(service).viewed(tenant=TENANT, chat_id=history.chats["race"], ref=ref,
                                     principal="bob", session=session, input_sha256="ab" * 32)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failures.append(exc)

    try:
        for sessions in (["s1"] * 4, ["s2", "s3", "s2", "s3"]):
            threads = [threading.Thread(target=open_it, args=(s, n))
                       for s, n in zip(services, sessions, strict=True)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        other.close()
    assert failures == []
    assert sorted(r.session for r in receipts(history, "race", ref)) == ["s1", "s2", "s3"]


def test_the_unviewed_approval_query_finds_approvals_without_a_receipt(
    history: History, models: SqlReadModels, view: ReviewsView,
) -> None:
    """bob opened `looked` and approved it; carol opened `glanced` but bob approved it (and
    opened it only afterwards); bob opened `stale` before carol's edit and approved the
    edited input unseen."""
    amounts = {"looked": 100, "glanced": 200, "stale": 300}
    refs = {name: history.ask(name, amount, now()) for name, amount in amounts.items()}
    for name, who in (("looked", "bob"), ("glanced", "carol"), ("stale", "bob")):
        Receipts(history.app).viewed(tenant=TENANT, chat_id=history.chats[name],
                                     ref=refs[name], principal=who, session="s",
                                     input_sha256=sha256_hex({"amount": amounts[name]}))
    history.vote("stale", "carol", EditEntry(ref=refs["stale"], name="pay",
                                             input={"amount": 333},
                                             reason="a smaller amount"), now())
    for name in refs:
        seen = sha256_hex({"amount": 333 if name == "stale" else amounts[name]})
        history.vote(name, "bob", ApproveEntry(ref=refs[name], name="pay", input_sha256=seen),
                     now())
    late = Receipts(history.app)  # bob's receipt of `glanced` after his vote: too late
    late.viewed(tenant=TENANT, chat_id=history.chats["glanced"], ref=refs["glanced"],
                principal="bob", session="s", input_sha256=sha256_hex({"amount": 200}))
    models.catch_up()
    found = _answer(history, view)
    assert ("looked", "approve", "bob") not in found
    assert {("glanced", "approve", "bob"), ("stale", "approve", "bob")} <= set(found)
    assert ("fast", "approve", "bob") in found  # decided over the API: no receipt, ever
    assert {kind for _, kind, _ in found} == {"approve"}
    [looked] = [f for f in view.facts(TENANT, resolve("custom", custom="viewed = true").node,
                                      10).items]
    [receipt] = receipts(history, "looked", refs["looked"])
    assert (looked.chat_id, looked.viewed_at) == (str(history.chats["looked"]),
                                                  receipt.timestamp)
    before = view.dump(), found
    models.runner("reviews").rebuild()
    assert (view.dump(), _answer(history, view)) == before


def test_the_shipped_fast_approval_query_is_unchanged() -> None:
    fast = SHIPPED["fast_approval"]
    assert (fast.version, fast.filter) == (
        1, 'kind in ("approve", "respond") and wait_seconds < :seconds')
    unviewed = SHIPPED["unviewed_approval"]
    assert (unviewed.version, unviewed.filter) == (
        1, 'kind in ("approve", "respond") and viewed = false')


def test_auditors_read_a_calls_receipts(history: History, apps: list[TestClient]) -> None:
    ref = history.ask("audited", 930, now())
    api = apps[0]
    path = f"/v1/reviews/receipts?chat_id={history.chats['audited']}&ref={ref}"
    assert _get(api, path, "rita").json()["items"] == []
    open_page(api, history, "audited", ref, sign_in(api, "key-bob"))
    answer = _get(api, path, "rita").json()
    [item] = answer["items"]
    assert (answer["ref"], item["principal"], item["version"]) == (ref, "bob", 1)
    assert item["input_sha256"] == sha256_hex({"amount": 930})
    assert datetime.fromisoformat(item["at"]) > now() - timedelta(minutes=1)


@pytest.mark.parametrize(("who", "query", "status", "code"), [
    ("bob", "", 403, "forbidden"),
    ("eve", "", 404, "chat_not_found"),
    ("rita", "&ref=nope", 422, "unknown_interrupt"),
    ("rita", "&ref=", 422, "invalid_request"),
])
def test_a_receipts_read_refuses_with_a_4xx(history: History, apps: list[TestClient], who: str,
                                            query: str, status: int, code: str) -> None:
    ref = history.ask("refused", 940, now())
    chat = history.chats["refused"]
    answer = _get(apps[0], f"/v1/reviews/receipts?chat_id={chat}{query or f'&ref={ref}'}", who)
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)


def test_a_receipt_stream_is_no_chat(history: History, apps: list[TestClient]) -> None:
    ref = history.ask("stream", 950, now())
    open_page(apps[0], history, "stream", ref, sign_in(apps[0], "key-bob"))
    stream = receipts_id(history.chats["stream"], ref)
    assert len(receipts(history, "stream", ref)) == 1
    for path in (f"/v1/chats/{stream}", f"/v1/chats/{stream}/events"):
        answer = apps[0].get(path, headers={"Authorization": "Bearer key-alice"})
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "chat_not_found")


def _get(client: TestClient, path: str, who: str) -> httpx.Response:
    return client.get(path, headers={"Authorization": f"Bearer key-{who}"})


def _answer(h: History, view: ReviewsView) -> list[tuple[str, str, str]]:
    names = {str(c): n for n, c in h.chats.items()}
    page = view.facts(TENANT, resolve("unviewed_approval").node, 100)
    return [(names[f.chat_id], f.kind, f.actor) for f in page.items]


def test_an_evidence_pack_holds_the_items_receipts_and_verifies(
    history: History, models: SqlReadModels, view: ReviewsView, tmp_path: Path,
) -> None:
    ref = history.ask("packed", 960, now())
    seen = sha256_hex({"amount": 960})
    Receipts(history.app).viewed(tenant=TENANT, chat_id=history.chats["packed"], ref=ref,
                                 principal="bob", session="s", input_sha256=seen)
    history.vote("packed", "bob", ApproveEntry(ref=ref, name="pay", input_sha256=seen), now())
    models.catch_up()
    desk = ReviewDesk(Reviews(history.app), view, ACTIVE)
    review = desk.open(TENANT, "rita", "custom", custom="viewed = true", size=5, seed="p")
    desk.reviews.assess(review.id, 1, actor="rita", verdict="ok", note="")
    desk.reviews.sign_off(review.id, actor="head")
    private, public = tmp_path / "cp.pem", tmp_path / "cp.pub"
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 0
    pack = tmp_path / "evidence.zip"
    assert main(["audit", "evidence", "--review", str(review.id), "--key", str(private),
                 "--output", str(pack), "--store", history.store]) == 0
    assert verify_pack(str(pack), "--public-key", str(public)) == (0, "evidence pack verifies")
    with zipfile.ZipFile(pack) as z:
        rows = [json.loads(line) for line in z.read("events.jsonl").splitlines()]
    [receipt] = [r for r in rows if r["topic"] == "interlock:CallViewed"]
    state = json.loads(receipt["state"])
    assert receipt["chat_id"] == str(receipts_id(history.chats["packed"], ref))
    assert (state["principal"], state["input_sha256"]) == ("bob", seen)


def verify_pack(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-I", str(TOOL), *args], capture_output=True,
                          text=True, timeout=120, check=False)
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1]


def test_a_reviews_view_built_before_receipts_is_rebuilt_when_opened(
    history: History, models: SqlReadModels, view: ReviewsView,
) -> None:
    """Its facts lack the viewed columns (CREATE TABLE IF NOT EXISTS would keep them so, and
    the new index could not be made): opening it rebuilds it from the log."""
    before = view.dump()
    assert before and {row["viewed"] for row in before} == {False}
    at = view.position()
    with view.batch(at, at):  # the shape the view had before receipts
        if view.dialect == "sqlite":
            view._run("DROP INDEX {review_facts_unviewed_idx}", {})
            view._run("ALTER TABLE {review_facts} DROP COLUMN viewed", {})
            view._run("ALTER TABLE {review_facts} DROP COLUMN viewed_at", {})
        else:
            view._run("ALTER TABLE {review_facts} DROP COLUMN viewed CASCADE,"
                      " DROP COLUMN viewed_at", {})
        view._run("DROP TABLE {review_receipts}", {})
    again = open_views(history.app)
    try:
        again.catch_up()
        assert again.view(ReviewsView).dump() == before
    finally:
        again.close()
