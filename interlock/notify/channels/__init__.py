"""Notification channels: the port every channel implements (port.py), one module per
channel (email.py, slack.py), and the registry that lists them (registry.py)."""
