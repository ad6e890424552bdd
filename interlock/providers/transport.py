"""The SDKs' HTTP library errors, for the places where an SDK lets them through unwrapped."""

from __future__ import annotations

try:  # recent SDKs ride on httpx2
    from httpx2 import TimeoutException, TransportError
except ImportError:  # pragma: no cover - older SDKs ride on httpx
    from httpx import TimeoutException, TransportError  # type: ignore[assignment]

__all__ = ["TimeoutException", "TransportError"]
