"""`/docs` renders in a browser that can reach nothing but this server (no CDN), and the
server's front door and favicon answer instead of a 404."""

from __future__ import annotations

import httpx
from playwright.sync_api import Browser, Route, expect

from tests.api.conftest import Live


def test_swagger_ui_renders_with_no_request_leaving_the_server(
        browser: Browser, live: Live) -> None:
    context = browser.new_context()
    elsewhere: list[str] = []

    def only_here(route: Route) -> None:
        if route.request.url.startswith(live.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_here)
    page = context.new_page()
    page.goto(f"{live.url}/docs")
    expect(page.locator(".opblock-summary-path").first).to_be_visible(timeout=15_000)
    expect(page.get_by_text("/v1/chats/{chat_id}/resume").first).to_be_visible()
    context.close()
    assert elsewhere == []


def test_the_front_door_points_to_the_console_and_the_docs(live: Live) -> None:
    with httpx.Client(base_url=live.url) as client:
        index = client.get("/")
        assert index.status_code == 200
        assert {index.json()[k] for k in ("console", "docs")} == {"/ui/", "/docs"}
        icon = client.get("/favicon.ico", follow_redirects=True)
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/png"
