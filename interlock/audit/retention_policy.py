"""Retention: per-tenant policies, which chats have expired, and the signed retention log.

A policy keeps a tenant's chats at least `keep_months` after their last event and
removes them once `delete_after_years` have passed. What is removed is recorded first in
a retention log whose entries are signed (Ed25519) and chained, and which checkpoints
name, so a lawful removal is told apart from a deletion. docs/audit.md has the formats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from interlock.audit.checkpoints import CheckSignature, Sign, Signed, chained, check_chained
from interlock.domain.chat.canonical import jcs
from interlock.domain.errors import InvalidRequestError

FORMAT = "interlock-retention-1"


@dataclass(frozen=True)
class Rule:
    """Keep at least `keep_months`; remove after `delete_after_years` (since last activity)."""

    keep_months: int
    delete_after_years: int

    def __post_init__(self) -> None:
        if self.keep_months < 0 or self.delete_after_years < 1:
            raise InvalidRequestError("retention: keep_months >= 0 and delete_after_years >= 1")
        if self.delete_after_years * 12 < self.keep_months:
            raise InvalidRequestError(
                f"retention: delete_after_years={self.delete_after_years} would remove chats "
                f"younger than keep_months={self.keep_months}")

    def expired(self, last_activity: datetime, now: datetime) -> bool:
        """Older than both the minimum and the maximum age (the minimum always holds)."""
        months = max(self.keep_months, self.delete_after_years * 12)
        return last_activity < months_before(now, months)


@dataclass(frozen=True)
class Policy:
    """Rules per tenant, and an optional default; a tenant without a rule is kept."""

    tenants: dict[str, Rule]
    default: Rule | None = None

    @classmethod
    def parse(cls, data: Any) -> Policy:
        """From `{"default": rule?, "tenants": {name: rule}}`, a rule being
        `{"keep_months": n, "delete_after_years": m}`."""
        if not isinstance(data, dict) or not set(data) <= {"default", "tenants"}:
            raise InvalidRequestError('retention policy: {"default": ..., "tenants": {...}}')
        tenants = data.get("tenants") or {}
        if not isinstance(tenants, dict):
            raise InvalidRequestError("retention policy: tenants is an object")
        default = data.get("default")
        return cls({str(t): _rule(r) for t, r in tenants.items()},
                   _rule(default) if default is not None else None)

    def rule(self, tenant: str) -> Rule | None:
        return self.tenants.get(tenant, self.default)

    def to_json(self) -> dict[str, Any]:
        def one(r: Rule) -> dict[str, int]:
            return {"keep_months": r.keep_months, "delete_after_years": r.delete_after_years}
        return {"default": one(self.default) if self.default else None,
                "tenants": {t: one(r) for t, r in sorted(self.tenants.items())}}


def _rule(data: Any) -> Rule:
    if not isinstance(data, dict) or set(data) != {"keep_months", "delete_after_years"} or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in data.values()):
        raise InvalidRequestError(
            'retention rule: {"keep_months": int, "delete_after_years": int}')
    return Rule(data["keep_months"], data["delete_after_years"])


def months_before(moment: datetime, months: int) -> datetime:
    """The same day and time `months` calendar months earlier (the day clamped to 28)."""
    index = moment.year * 12 + moment.month - 1 - months
    return moment.replace(year=index // 12, month=index % 12 + 1, day=min(moment.day, 28))


@dataclass(frozen=True)
class Removal:
    """A chat removed by retention: its head, tenant and last activity."""

    chat_id: str
    tenant: str
    version: int
    link: str
    last_activity: str


@dataclass(frozen=True)
class Entry(Signed):
    """One signed retention log entry."""

    def removals(self) -> list[Removal]:
        return [Removal(*r) for r in self.statement["removed"]]

    def to_json(self) -> bytes:
        return jcs({"statement": self.statement, "signature": self.signature}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Entry:
        obj = json.loads(data)
        return cls(dict(obj["statement"]), str(obj["signature"]))


def make_entry(removed: Sequence[Removal], *, prev: Entry | None, policy: Policy, at: str,
               key_id: str, sign: Sign) -> Entry:
    statement = {
        "format": FORMAT, **chained(prev), "at": at, "key_id": key_id,
        "policy": policy.to_json(),
        "removed": [[r.chat_id, r.tenant, r.version, r.link, r.last_activity]
                    for r in sorted(removed, key=lambda r: r.chat_id)],
    }
    return Entry(statement, sign(jcs(statement).encode()).hex())


def check_entries(entries: Sequence[Entry], key_id: str, check: CheckSignature) -> str | None:
    """Why the retention log is not authentic, contiguous and within its policies, or None."""
    return check_chained(entries, fmt=FORMAT, noun="retention entry", key_id=key_id,
                         check=check, sound=_within_policy)


def _within_policy(entry: Entry) -> str | None:
    s = entry.statement
    policy, at = Policy.parse(s["policy"]), datetime.fromisoformat(s["at"])
    for r in entry.removals():
        rule = policy.rule(r.tenant)
        if rule is None or not rule.expired(datetime.fromisoformat(r.last_activity), at):
            return f"removed chat {r.chat_id}, which its policy kept"
    return None
