"""Standard Webhooks signatures (https://www.standardwebhooks.com)."""

from __future__ import annotations

import base64
import hashlib
import hmac

PREFIX = "whsec_"


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> dict[str, str]:
    """The three headers: `webhook-signature` is `v1,<base64 HMAC-SHA256 of id.ts.body>`."""
    key = base64.b64decode(secret.removeprefix(PREFIX))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}
