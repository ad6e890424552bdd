"""The reviewer's forms read into what the review desk takes, and its refusals in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from interlock.api.ui.forms_parse import whole_number
from interlock.domain.errors import InterlockError, InvalidRequestError, SegregationOfDutiesError
from interlock.domain.review.events import Severity, Verdict
from interlock.domain.review.queries import CUSTOM, SHIPPED, ReviewQuery
from interlock.domain.review.sampling import MAX_SIZE, STRATA

PARAM = "p."  # a query parameter's form field: p.seconds
STRATA_WORDS = {"agent": "agent", "tool": "tool", "actor": "approver (who decided)",
                "kind": "kind of decision"}
ROLE_WORDS = {"requested": "requested this call", "edited": "edited its input",
              "decided": "decided or voted on it"}


def query_named(name: str) -> ReviewQuery | None:
    """The shipped query `name`; None for custom."""
    if name != CUSTOM and name not in SHIPPED:
        raise InvalidRequestError(f"there is no review query named {name!r}", field="query")
    return SHIPPED.get(name)


def params_of(data: Mapping[str, str], query: ReviewQuery | None) -> dict[str, Any]:
    """The parameters the client may give, typed (a number as a number); blank: the default."""
    found: dict[str, Any] = {}
    for p in query.params if query else ():
        raw = data.get(PARAM + p.name, "").strip()
        if p.server or not raw:
            continue
        found[p.name] = _number(p.name, raw) if p.type == "number" else raw
    return found


def _number(name: str, raw: str) -> int | float:
    try:
        value = float(raw)
    except ValueError:
        raise InvalidRequestError(f"{name} must be a number, not {raw[:40]!r}",
                                  field=PARAM + name) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidRequestError(f"{name} must be a finite number", field=PARAM + name)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def custom_filter(data: Mapping[str, str], name: str) -> str | None:
    return data.get("filter", "") if name == CUSTOM else None


def sample_of(data: Mapping[str, str]) -> tuple[int, list[str], str | None]:
    """Size, strata (a checkbox each: strata.tool) and seed (blank: the server makes one)."""
    raw = data.get("size", "").strip()
    size = whole_number(raw, 1, MAX_SIZE)
    if size is None:
        raise InvalidRequestError(f"the sample size must be a whole number from 1 to "
                                  f"{MAX_SIZE}, not {raw[:20]!r}", field="size")
    strata = [s for s in STRATA if data.get(f"strata.{s}") == "on"]
    seed = data.get("seed", "").strip() or None
    return size, strata, seed


def assessment_of(data: Mapping[str, str]) -> tuple[Verdict, Severity | None, str]:
    verdict, severity = data.get("verdict", ""), data.get("severity", "") or None
    if verdict not in get_args(Verdict):
        raise InvalidRequestError("choose ok or finding", field="verdict")
    if severity is not None and severity not in get_args(Severity):
        raise InvalidRequestError(f"severity is one of {', '.join(get_args(Severity))}",
                                  field="severity")
    if verdict == "ok":
        severity = None  # the form's severity menu is ignored for an ok
    return verdict, severity, data.get("note", "").strip()  # type: ignore[return-value]


def refusal(exc: InterlockError) -> str:
    """A refusal as a sentence for the reviewer."""
    if isinstance(exc, SegregationOfDutiesError):
        did = " and ".join(ROLE_WORDS.get(r, r) for r in exc.details.get("roles", []))
        return (f"You may not assess item {exc.details.get('item')}: you {did}. A reviewer "
                "never assesses a call they requested, edited or decided (segregation of "
                "duties); another auditor must assess it.")
    return exc.message[:1].upper() + exc.message[1:] + "."
