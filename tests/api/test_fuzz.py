"""Schemathesis against the app's own OpenAPI: no request it generates gets a 5xx."""

from __future__ import annotations

import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import Live

AS_ADMIN = {"Authorization": "Bearer key-root"}


def test_no_generated_request_gets_a_server_error(live: Live) -> None:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12

    @given(data=st.data())
    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(data: st.DataObject) -> None:
        operation = data.draw(st.sampled_from(operations))
        case = data.draw(operation.as_strategy())
        response = case.call(base_url=live.url, session=session, headers=AS_ADMIN, timeout=10)
        assert response.status_code < 500, f"{case.as_curl_command()}\n{response.text}"

    with requests.Session() as session:  # one session, closed: no sockets left to the GC
        check()


HOSTILE = (
    b"[" * 100_000 + b"]" * 100_000,  # json.loads: RecursionError, not ValueError
    b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"agent": "bankingAgent", "metadata": {"x": "\xff"}}',  # not UTF-8
    b'{"agent": "bankingAgent", "metadata": {"x": Infinity',
)


def test_every_json_route_refuses_hostile_bodies_with_a_4xx(live: Live) -> None:
    """The bad-input suite on every route that takes a JSON body, the hot ones among them
    (`POST /v1/chats`, its messages and resume, served by `interlock.api.hot`)."""
    spec = requests.get(f"{live.url}/openapi.json", timeout=10).json()
    chat = requests.post(f"{live.url}/v1/chats", json={"agent": "bankingAgent"},
                         headers=AS_ADMIN, timeout=10).json()["id"]
    posts = [path.replace("{chat_id}", chat).replace("{thread_id}", chat)
             for path, methods in spec["paths"].items()
             for method, op in methods.items() if method in ("post", "put", "patch")
             and "application/json" in op.get("requestBody", {}).get("content", {})]
    assert {"/v1/chats", f"/v1/chats/{chat}/messages", f"/v1/chats/{chat}/resume"} <= set(posts)
    with requests.Session() as session:
        for path in posts:
            for body in HOSTILE:
                answer = session.post(f"{live.url}{path}", data=body, timeout=30, headers={
                    **AS_ADMIN, "content-type": "application/json"})
                assert 400 <= answer.status_code < 500, (path, body[:40], answer.text[:200])
