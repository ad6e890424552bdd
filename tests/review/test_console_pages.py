"""The reviewer's console pages without a browser: paging, refusals in words that write
nothing, CSRF on every form, and the seed a review records."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.api.ui import reviews as pages
from interlock.projections import open_read_models
from tests.review.history import History
from tests.review.test_api import KEYS

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
EVERYTHING = "/ui/reviews/queries?query=custom&filter=kind+!%3D+%22expire%22"


@pytest.fixture
def http(history: History) -> Iterator[TestClient]:
    views = open_read_models(history.app, poll_interval=0.05)
    with TestClient(make_app(history.app, views, AuthConfig.from_mapping(KEYS))) as client:
        yield client
    views.close()


def _sign_in(http: TestClient, name: str) -> None:
    token = CSRF.findall(http.get("/ui/sign-in").text)[0]
    answer = http.post("/ui/sign-in", data={"csrf": token, "api_key": f"key-{name}",
                                            "next": "/ui/inbox"}, follow_redirects=False)
    assert answer.status_code == 303


def _token(http: TestClient, path: str) -> str:
    return CSRF.findall(http.get(path).text)[0]


def _reviews(http: TestClient) -> int:
    return len(http.get("/v1/reviews", headers={"Authorization": "Bearer key-rita"}).json()[
        "items"])


def test_an_answer_pages_with_its_query_kept(http: TestClient,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _sign_in(http, "rita")
    monkeypatch.setattr(pages, "PAGE", 4)
    pages_seen, path = [], EVERYTHING
    while path:
        text = http.get(path).text
        pages_seen.append(text.count("<tr><td><time"))
        older = re.findall(r'rel="next" href="([^"]+)"', text)
        path = older[0].replace("&amp;", "&") if older else ""
        assert not path or ("filter=kind" in path and path.count("cursor=") == 1)
    assert pages_seen == [4, 4, 1]  # the 9 decisions that are no expiry, newest first


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/ui/reviews/queries?query=custom&filter=amount+%3E+5", 422, "unknown field"),
    ("/ui/reviews/queries?query=fast_approval&p.seconds=soon", 422,
     "Seconds must be a number, not &#39;soon&#39;."),
    ("/ui/reviews/queries?query=nothing", 422, "there is no review query named"),
])
def test_a_refused_query_says_why(http: TestClient, path: str, status: int,
                                  says: str) -> None:
    _sign_in(http, "rita")
    answer = http.get(path)
    assert answer.status_code == status and says in answer.text


def test_opening_takes_a_token_a_size_and_records_the_seed(http: TestClient) -> None:
    _sign_in(http, "rita")
    token = _token(http, EVERYTHING)
    form = {"query": "custom", "filter": "kind != 'expire'", "size": "3", "seed": ""}
    refused = http.post("/ui/reviews", data={**form, "csrf": "forged"})
    assert refused.status_code == 403 and _reviews(http) == 0
    zero = http.post("/ui/reviews", data={**form, "size": "0", "csrf": token})
    assert zero.status_code == 422 and "from 1 to 10000" in zero.text and _reviews(http) == 0
    for size in ("\u00b2", "9" * 5000):  # a digit int() refuses; more digits than int() reads
        odd = http.post("/ui/reviews", data={**form, "size": size, "csrf": token})
        assert odd.status_code == 422 and "from 1 to 10000" in odd.text and _reviews(http) == 0
    opened = http.post("/ui/reviews", data={**form, "csrf": token, "strata.tool": "on"})
    assert opened.status_code == 200 and _reviews(http) == 1
    review = http.get("/v1/reviews", headers={"Authorization": "Bearer key-rita"}).json()[
        "items"][0]
    shown = re.search(r'id="review-seed">([^<]+)<', opened.text)
    recorded = http.get(f"/v1/reviews/{review['review_id']}",
                        headers={"Authorization": "Bearer key-rita"}).json()["sample"]
    assert shown is not None and shown[1] == recorded["seed"] and recorded["strata"] == ["tool"]


def test_an_assessment_form_is_checked_and_refusals_write_nothing(http: TestClient) -> None:
    _sign_in(http, "rita")
    token = _token(http, EVERYTHING)
    http.post("/ui/reviews", data={"query": "fast_approval", "size": "1", "seed": "s",
                                   "csrf": token})
    [review] = http.get("/v1/reviews", headers={"Authorization": "Bearer key-rita"}).json()[
        "items"]
    path = f"/ui/reviews/{review['review_id']}"
    for form, says in (({"verdict": "maybe"}, "Choose ok or finding."),
                       ({"verdict": "finding", "severity": "low"},
                        "A finding needs a severity and a note."),
                       ({"verdict": "finding", "severity": "dire", "note": "x"},
                        "Severity is one of low, medium, high, critical.")):
        answer = http.post(f"{path}/items/1", data={**form, "csrf": token})
        assert answer.status_code == 422 and says in answer.text
    assert http.post(f"{path}/items/1", data={"verdict": "ok"}).status_code == 403
    signed = http.post(f"{path}/sign-off", data={"note": "", "csrf": token})
    assert signed.status_code == 409 and "1 item(s) are not assessed yet" in signed.text
    assert http.post(f"{path}/close", data={"csrf": token}).status_code == 409
    state = http.get(f"/v1/reviews/{review['review_id']}",
                     headers={"Authorization": "Bearer key-rita"}).json()
    assert (state["version"], state["status"]) == (1, "open")


def test_the_pages_are_for_auditors(http: TestClient) -> None:
    _sign_in(http, "bob")
    for path in ("/ui/reviews", "/ui/reviews/queries", EVERYTHING):
        answer = http.get(path)
        assert answer.status_code == 403 and "for auditors: bob lacks" in answer.text
    assert ">Review<" not in http.get("/ui/inbox").text


def test_without_a_key_the_page_names_the_cli_and_the_download_is_a_409(
    http: TestClient,
) -> None:
    rita = {"Authorization": "Bearer key-rita"}
    review = http.post("/v1/reviews", json={"query": "fast_approval", "size": 1, "seed": "k"},
                       headers=rita).json()
    http.post(f"/v1/reviews/{review['id']}/items/1/assessment", json={"verdict": "ok"},
              headers=rita).raise_for_status()
    http.post(f"/v1/reviews/{review['id']}/sign-off", json={}, headers=rita).raise_for_status()
    _sign_in(http, "rita")
    page = http.get(f"/ui/reviews/{review['id']}").text
    assert "no checkpoint signing key" in page and "interlock audit evidence --review" in page
    assert "Download the signed evidence pack" not in page
    answer = http.get(f"/ui/reviews/{review['id']}/evidence")
    assert answer.status_code == 409 and "INTERLOCK_CHECKPOINT_KEY" in answer.text
