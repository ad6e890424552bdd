"""The policies page: the tenant's data policies and their versions, a form to propose the
next version, and a version's review (its diff against the version in force, the what-if over
recorded calls, Approve and Withdraw) for the tenant's risk role (`policy_admin`, or
`admin`). Every step goes through `PolicyDesk` and `what_if`, the domain services behind
/v1/policies, with the console's session and CSRF checks: a refusal is the server's, shown on
the form, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from interlock.api.auth import AuthConfig, Principal
from interlock.api.deps import CurrentViews, ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.policies import recent_chats, roles_by_id
from interlock.api.ui.render import checked_form, instant, redirect, render, zone
from interlock.api.ui.router import Visitor
from interlock.domain import Interlock
from interlock.domain.chat.policies import normalise_id
from interlock.domain.errors import (
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
)
from interlock.domain.policy_book import (
    NAME,
    POLICY_ROLES,
    PolicyBook,
    PolicyDesk,
    PolicyDocument,
    PolicyProposal,
    PolicyVersion,
)
from interlock.domain.policy_whatif import WhatIf, what_if
from interlock.projections.interface import ReadModels

router = APIRouter(prefix="/policies", route_class=JsonRoute)
PolicyId = Annotated[str, Path(pattern=NAME)]
Version = Annotated[int, Path(ge=1, le=1_000_000)]
Said = Annotated[str | None, Query(max_length=100)]
Refusal = InvalidRequestError | ForbiddenError | ConflictError
WHAT_IF_CHATS = 200  # the what-if reads the tool's calls in the agent's last 200 chats
VERDICTS = {"runs": "would run unheld", "passes": "would pass on its recorded votes",
            "fails": "would fail on its recorded votes", "waits": "would still wait",
            "invalid_input": "input no longer valid"}


def risk_role(who: Principal) -> bool:
    """Whether the visitor holds the tenant's risk role (the one /v1/policies asks for)."""
    return bool(who.roles & POLICY_ROLES)


def _require(who: Principal) -> None:
    if not risk_role(who):
        raise ForbiddenError(f"{who.id} may not manage data policies: it needs the role"
                             " policy_admin", actor=who.id, reason="not_a_policy_admin")


@dataclass(frozen=True)
class Row:
    """One version as the list shows it: its state in words, at `now`."""

    v: PolicyVersion
    state: str  # proposed, in_force, scheduled, superseded, withdrawn
    words: str


def current(versions: list[PolicyVersion], at: datetime) -> PolicyVersion | None:
    """The version in force at `at`: the latest live one, as `PolicyBook.in_force` picks."""
    live = [v for v in versions if v.in_force(at)]
    return live[-1] if live else None


def from_time(v: PolicyVersion) -> datetime:
    """When an approved version is (or was) in force from: its effective time, or its
    approval if that came later."""
    assert v.approved_at is not None
    return max(v.effective_from, v.approved_at)


def row_of(v: PolicyVersion, in_force: PolicyVersion | None, at: datetime) -> Row:
    stamp = "%Y-%m-%d %H:%M:%S UTC"
    if v.withdrawn_at is not None:
        return Row(v, "withdrawn", f"withdrawn by {v.withdrawn_by} at"
                                   f" {v.withdrawn_at:{stamp}}: {v.withdraw_reason}")
    if v.approved_at is None:
        return Row(v, "proposed", "proposed, waiting for a second person's approval"
                   f" (then in force from {max(v.effective_from, at):{stamp}} at the earliest)")
    start = from_time(v)
    if in_force is not None and in_force.version == v.version:
        return Row(v, "in_force", f"approved, in force from {start:{stamp}}")
    if start > at:
        return Row(v, "scheduled", f"approved, scheduled: in force from {start:{stamp}}")
    later = f" by version {in_force.version}" if in_force is not None else ""
    return Row(v, "superseded", f"approved, in force from {start:{stamp}}; superseded{later}")


def rows_of(book: PolicyBook, at: datetime) -> dict[str, list[Row]]:
    """Each policy's versions, the newest first, with their states at `at`."""
    found = {}
    for pid in sorted(book.versions):
        versions = book.versions[pid]
        live = current(versions, at)
        found[pid] = [row_of(v, live, at) for v in reversed(versions)]
    return found


# -- the diff -----------------------------------------------------------------------------


def flat(value: Any, at: str = "") -> dict[str, Any]:
    """A document's leaves by path (`stages[1].roles`); a list of names stays one leaf."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= flat(item, f"{at}.{key}" if at else str(key))
        return out
    if isinstance(value, list) and any(isinstance(x, Mapping | list) for x in value):
        out = {}
        for i, item in enumerate(value):
            out |= flat(item, f"{at}[{i}]")
        return out
    return {at: value}


@dataclass(frozen=True)
class Change:
    field: str
    old: str
    new: str


def shown(value: Any) -> str:
    return "—" if value is None else json.dumps(value, ensure_ascii=False)


def diff(old: PolicyDocument | None, new: PolicyDocument) -> list[Change]:
    """Field by field, old → new, of every field that differs (no version in force: each
    field of the new document that is set, against nothing)."""
    before = flat(old.model_dump(mode="json")) if old is not None else {}
    after = flat(new.model_dump(mode="json"))
    if old is None:
        defaults = flat(PolicyDocument().model_dump(mode="json"))
        return [Change(k, "—", shown(v)) for k, v in after.items() if defaults.get(k) != v
                or k not in defaults]
    return [Change(k, shown(before.get(k)), shown(after.get(k)))
            for k in sorted(set(before) | set(after), key=_order(after, before))
            if before.get(k) != after.get(k)]


def _order(*docs: dict[str, Any]) -> Any:
    keys = [k for d in docs for k in d]
    return lambda k: keys.index(k)


# -- the propose form ---------------------------------------------------------------------


def proposal_of(data: Mapping[str, str]) -> PolicyProposal:
    """The form as the body POST /v1/policies takes: the document as JSON, a date-time
    without an offset in the browser's zone (blank: from its approval)."""
    raw = data.get("document", "")
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidRequestError(f"the policy document is not JSON: {exc.msg} at line"
                                  f" {exc.lineno}, column {exc.colno}",
                                  field="document") from None
    where = zone(data.get("tz") or None)
    effective = instant("effective_from", data.get("effective_from", "").strip() or None,
                        where)
    try:
        return PolicyProposal(id=data.get("id", "").strip(), agent=data.get("agent", "").strip(),
                              tool=data.get("tool", "").strip(), document=document,
                              effective_from=effective, reason=data.get("reason", "").strip())
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
                             for e in exc.errors())
        raise InvalidRequestError(f"the proposal is not valid ({problems})") from None


def prefill(book: PolicyBook, policy_id: str | None, at: datetime) -> dict[str, str]:
    """The form's values to propose the next version of `policy_id`: its agent and tool,
    the document of the version in force (else its latest)."""
    versions = book.versions.get(policy_id or "")
    if not versions:
        return {"id": policy_id or "", "document": _pretty(PolicyDocument(roles=[]))}
    base = current(versions, at) or versions[-1]
    return {"id": base.id, "agent": base.agent, "tool": base.tool,
            "document": _pretty(base.document)}


def _pretty(document: PolicyDocument) -> str:
    return json.dumps(document.model_dump(mode="json", exclude_defaults=True), indent=2,
                      ensure_ascii=False)


def _desk(service: Interlock) -> PolicyDesk:
    return PolicyDesk(service, {name: [t.name for t in agent.tools]
                                for name, agent in service.agents.items()})


def _list_page(request: Request, service: Interlock, who: Principal, status: int = 200,
               values: Mapping[str, str] | None = None, **context: Any) -> Response:
    at = datetime.now(UTC)
    book = _desk(service).load(who.tenant)
    tools = {name: [t.name for t in agent.tools] for name, agent in service.agents.items()}
    return render(request, "policies.html", status, who=who, rows=rows_of(book, at),
                  tools=tools, values=values or prefill(book, None, at),
                  **{"error": None, "notice": None, **context})


@router.get("", response_class=HTMLResponse)
def policies(request: Request, service: ServiceDep, who: Visitor,
             policy: Annotated[str | None, Query(max_length=100)] = None) -> Response:
    """The tenant's data policies; `policy` prefills the form with its next version."""
    _require(who)
    at = datetime.now(UTC)
    values = prefill(_desk(service).load(who.tenant), policy, at) if policy else None
    return _list_page(request, service, who, values=values)


@router.post("")
async def propose(request: Request, service: ServiceDep, who: Visitor) -> Response:
    data = await checked_form(request)
    _require(who)
    try:
        made = await run_in_threadpool(_desk(service).propose, who.tenant, who.decider(),
                                       proposal_of(data))
    except (InvalidRequestError, ForbiddenError) as exc:
        return await run_in_threadpool(_list_page, request, service, who, exc.status,
                                       values=data, error=_refusal(exc))
    return redirect(request, f"/policies/{made.id}/versions/{made.version}?done=proposed")


# -- one version --------------------------------------------------------------------------


def _what_if(service: Interlock, views: ReadModels, auth: AuthConfig, tenant: str,
             v: PolicyVersion) -> WhatIf:
    """The API's what-if (POST /v1/policies/{id}/versions/{n}/what-if), in process."""
    return what_if(service, tenant, v.id, v.version,
                   lambda agent: recent_chats(views, tenant, agent, WHAT_IF_CHATS),
                   roles_by_id(auth, tenant))


def _version_page(request: Request, service: Interlock, views: ReadModels, who: Principal,
                  policy_id: str, version: int, status: int = 200, **context: Any
                  ) -> Response:
    at = datetime.now(UTC)
    book = _desk(service).load(who.tenant)
    v = book.get(policy_id, version)
    versions = book.versions[policy_id]
    live = current(versions, at)
    auth: AuthConfig = request.app.state.auth
    mine = normalise_id(who.id) == normalise_id(v.proposed_by)
    is_live = live is not None and live.version == v.version
    return render(request, "policy_version.html", status, who=who, v=v,
                  row=row_of(v, live, at), live=live, is_live=is_live,
                  changes=[] if is_live else diff(live.document if live else None, v.document),
                  outcome=_what_if(service, views, auth, who.tenant, v), verdicts=VERDICTS,
                  mine=mine, chats=WHAT_IF_CHATS,
                  document=json.dumps(v.document.model_dump(mode="json", exclude_defaults=True),
                                      indent=2, ensure_ascii=False),
                  **{"error": None, "notice": None, **context})


DONE = {"proposed": "Version {n} is proposed. Another person with the role policy_admin must"
                    " approve it before it is in force.",
        "approved": "Version {n} is approved.", "withdrawn": "Version {n} is withdrawn."}


@router.get("/{policy_id}/versions/{version}", response_class=HTMLResponse)
def version_page(request: Request, policy_id: PolicyId, version: Version, service: ServiceDep,
                 views: CurrentViews, who: Visitor, done: Said = None) -> Response:
    """One version's review; `done` says what was just done to it."""
    _require(who)
    notice = DONE[done].format(n=version) if done in DONE else None
    return _version_page(request, service, views, who, policy_id, version, notice=notice)


@router.post("/{policy_id}/versions/{version}/approve")
async def approve(request: Request, policy_id: PolicyId, version: Version, service: ServiceDep,
                  views: CurrentViews, who: Visitor) -> Response:
    data = await checked_form(request)
    _require(who)
    reason = data.get("reason", "").strip() or None
    try:
        if reason is not None and len(reason) > 2000:
            raise InvalidRequestError("the reason is longer than 2000 characters",
                                      field="reason")
        await run_in_threadpool(_desk(service).approve, who.tenant, policy_id, version,
                                who.decider(), reason)
    except (InvalidRequestError, ForbiddenError, ConflictError) as exc:
        return await run_in_threadpool(_version_page, request, service, views, who, policy_id,
                                       version, exc.status, error=_refusal(exc), form="approve")
    return redirect(request, f"/policies/{policy_id}/versions/{version}?done=approved")


@router.post("/{policy_id}/versions/{version}/withdraw")
async def withdraw(request: Request, policy_id: PolicyId, version: Version,
                   service: ServiceDep, views: CurrentViews, who: Visitor) -> Response:
    data = await checked_form(request)
    _require(who)
    reason = data.get("reason", "").strip()
    try:
        if not reason or len(reason) > 2000:
            raise InvalidRequestError("say why the version is withdrawn (up to 2000"
                                      " characters)", field="reason")
        await run_in_threadpool(_desk(service).withdraw, who.tenant, policy_id, version,
                                who.decider(), reason)
    except (InvalidRequestError, ForbiddenError, ConflictError) as exc:
        return await run_in_threadpool(_version_page, request, service, views, who, policy_id,
                                       version, exc.status, error=_refusal(exc),
                                       form="withdraw")
    return redirect(request, f"/policies/{policy_id}/versions/{version}?done=withdrawn")


def _refusal(exc: Refusal) -> str:
    return f"Refused by the server: {exc.message}."
