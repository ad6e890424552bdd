"""The notify tests' world (a server, its notifier, local mail and Slack) for every module."""

from tests.notify.test_notifications import world  # noqa: F401 - the fixture
