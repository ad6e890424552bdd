"""The channels this server knows, in the order the API lists their routes: a new channel
is one line here (and its module, and its settings)."""

from __future__ import annotations

from interlock.notify.channels.email import EmailType
from interlock.notify.channels.port import ChannelType
from interlock.notify.channels.slack import SlackType

CHANNELS: tuple[ChannelType, ...] = (EmailType(), SlackType())
KINDS: tuple[str, ...] = tuple(t.kind for t in CHANNELS)
