"""Retention: per-tenant policies, which chats have expired, and the signed retention log.

A policy keeps a tenant's chats at least `keep_months` after their last event (six when
not given: MINIMUM_MONTHS) and removes them once `delete_after_years` have passed. A rule
keeping chats less than MINIMUM_MONTHS is refused unless the policy carries an explicit
`override` (who and why), which every signed entry made under it records. What is
removed is recorded first in a retention log whose entries are signed (Ed25519) and
chained, and which checkpoints name, so a lawful removal is told apart from a deletion.
docs/audit.md has the formats.
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
MINIMUM_MONTHS = 6  # EU AI Act Art. 19/26: logs of high-risk systems kept at least six months


@dataclass(frozen=True)
class Override:
    """Who allowed a retention under the minimum, and why: recorded with the policy."""

    reason: str
    by: str

    @classmethod
    def parse(cls, data: Any) -> Override:
        if not isinstance(data, dict) or set(data) != {"reason", "by"} or not all(
                isinstance(v, str) and v.strip() for v in data.values()):
            raise InvalidRequestError(
                'retention override: {"reason": "why", "by": "who allowed it"}, both given')
        return cls(data["reason"], data["by"])


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
    override: Override | None = None

    @classmethod
    def parse(cls, data: Any, *, minimum: bool = True) -> Policy:
        """From `{"default": rule?, "tenants": {name: rule}, "override": {...}?}`, a rule
        being `{"keep_months": n?, "delete_after_years": m}`; `minimum=False` reads a
        recorded policy as it was (entries older than the minimum rule)."""
        if not isinstance(data, dict) or not set(data) <= {"default", "tenants", "override"}:
            raise InvalidRequestError('retention policy: {"default": ..., "tenants": {...}}')
        tenants = data.get("tenants") or {}
        if not isinstance(tenants, dict):
            raise InvalidRequestError("retention policy: tenants is an object")
        default = data.get("default")
        override = data.get("override")
        policy = cls({str(t): _rule(r) for t, r in tenants.items()},
                     _rule(default) if default is not None else None,
                     Override.parse(override) if override is not None else None)
        if minimum:
            policy.check_minimum()
        return policy

    def check_minimum(self) -> None:
        """A rule under MINIMUM_MONTHS needs the policy's explicit override."""
        short = sorted(name for name, rule in (("default", self.default), *self.tenants.items())
                       if rule is not None and rule.keep_months < MINIMUM_MONTHS)
        if short and self.override is None:
            raise InvalidRequestError(
                f"retention: {', '.join(short)} would keep chats less than {MINIMUM_MONTHS}"
                ' months; add "override": {"reason": ..., "by": ...} to the policy to allow it'
                " (the signed retention log records it)", rules=short)

    def rule(self, tenant: str) -> Rule | None:
        return self.tenants.get(tenant, self.default)

    def to_json(self) -> dict[str, Any]:
        def one(r: Rule) -> dict[str, int]:
            return {"keep_months": r.keep_months, "delete_after_years": r.delete_after_years}
        shown: dict[str, Any] = {
            "default": one(self.default) if self.default else None,
            "tenants": {t: one(r) for t, r in sorted(self.tenants.items())}}
        if self.override is not None:
            shown["override"] = {"reason": self.override.reason, "by": self.override.by}
        return shown


def _rule(data: Any) -> Rule:
    if not isinstance(data, dict) or not {"delete_after_years"} <= set(data) <= {
            "keep_months", "delete_after_years"} or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in data.values()):
        raise InvalidRequestError(
            'retention rule: {"keep_months": int (default 6), "delete_after_years": int}')
    return Rule(data.get("keep_months", MINIMUM_MONTHS), data["delete_after_years"])


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
    policy, at = Policy.parse(s["policy"], minimum=False), datetime.fromisoformat(s["at"])
    for r in entry.removals():
        rule = policy.rule(r.tenant)
        if rule is None or not rule.expired(datetime.fromisoformat(r.last_activity), at):
            return f"removed chat {r.chat_id}, which its policy kept"
    return None
