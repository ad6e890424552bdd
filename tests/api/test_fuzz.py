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
