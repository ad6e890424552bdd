"""The notify tests share test_notifications.py's world: its mail, Slack and server."""

from tests.notify.test_notifications import world  # noqa: F401 - the fixture
