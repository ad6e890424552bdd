"""One interrupt's page and its decisions: respond, restart, approve, reject, edit.

Each form becomes the same resume entries the HTTP API takes and goes through
`Interlock.resume`, so every rule (routing, four-eyes, quorum, stages, schemas, expiry) is
the domain's. A vote may name a `delegation` of the visitor's, as a resume may: it is cast
for the delegator (`DelegationDesk.acting`, as POST /v1/chats/{id}/resume does). A refusal
comes back as this page with the server's reason, never an error page.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote
from uuid import UUID

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import ValidationError

from interlock.api.auth import Principal
from interlock.api.deps import CurrentViews, ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.ui.delegating import chosen
from interlock.api.ui.forms_parse import FormError, parse_form
from interlock.api.ui.render import checked_form, redirect, render, sessions
from interlock.api.ui.router import Visitor
from interlock.api.ui.views import InterruptPage, interrupt_page
from interlock.domain import Interlock
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import Decider
from interlock.domain.chat.rules import (
    ApproveEntry,
    EditEntry,
    RejectEntry,
    RespondEntry,
    RestartEntry,
)
from interlock.domain.delegations import DelegationDesk
from interlock.domain.errors import (
    AlreadyVotedError,
    ApprovalRequiredError,
    ChatErasedError,
    ConcurrencyError,
    DelegationNotFoundError,
    ForbiddenError,
    InterruptExpiredError,
    InterruptNotPendingError,
    InvalidRequestError,
    InvalidToolInputError,
    InvalidToolOutputError,
    NotAnApprovalError,
    StaleInterruptError,
    UnknownInterruptError,
)
from interlock.domain.receipts import Receipts
from interlock.domain.results import TurnResult

router = APIRouter(route_class=JsonRoute)
Action = Literal["respond", "restart", "approve", "reject", "edit"]
Vote = Literal["approve", "reject", "edit"]
Conflict = (InterruptNotPendingError | StaleInterruptError | AlreadyVotedError
            | InterruptExpiredError | ConcurrencyError)
FormProblem = FormError | ValidationError | InvalidToolInputError | InvalidToolOutputError
CONFLICTS = (InterruptNotPendingError, StaleInterruptError, AlreadyVotedError,
             InterruptExpiredError, ConcurrencyError)  # decided elsewhere meanwhile: 409
REASON_FIELD = "__reason__"  # an edit's reason: apart from the tool's own fields
FORM_PROBLEMS = (FormError, ValidationError, InvalidToolInputError, InvalidToolOutputError)


@router.get("/chats/{chat_id}/interrupts/{ref}", response_class=HTMLResponse)
def interrupt(request: Request, chat_id: UUID, ref: str, service: ServiceDep,
              views: CurrentViews, who: Visitor,
              recorded: Annotated[Vote | None, Query()] = None,
              done: Annotated[bool, Query()] = False) -> Response:
    """The approval page; `recorded` says which of your votes was just recorded, `done` that
    you just decided it (the outcome takes the focus)."""
    page = interrupt_page(service, views, who, chat_id, ref)
    page.done = done
    if recorded is not None:
        page.notice, page.notice_ok = _recorded(recorded, page), True
    return _show(request, service, page, who)


@router.get("/chats/{chat_id}/interrupts/{ref}/state")
def interrupt_state(chat_id: UUID, ref: str, service: ServiceDep, who: Visitor) -> JSONResponse:
    """What an open page watches: a decision, a vote or an edit made elsewhere."""
    call = service.get_chat(chat_id, tenant=who.tenant).state.calls.get(ref)
    if call is None or call.interrupted_at is None:
        raise UnknownInterruptError(ref)
    said = (f"{call.decision} by {call.decided_by}" if call.decision is not None
            and call.status != "interrupted" else None)
    votes = len(call.approval.votes) if call.approval is not None else 0
    return JSONResponse({"pending": call.status == "interrupted", "decided": said,
                         "votes": votes, "input_sha256": sha256_hex(call.input)},
                        headers={"Cache-Control": "no-store"})


@router.post("/chats/{chat_id}/interrupts/{ref}/{action}")
async def decide(request: Request, chat_id: UUID, ref: str, action: Action,
                 service: ServiceDep, views: CurrentViews, who: Visitor) -> Response:
    """Decide with one form; the chat when the turn went on, else this page again.

    Reading the page and showing it again (with its view receipt) are store work: they run
    on the I/O threads, not on the event loop every other request shares."""
    data = await checked_form(request)
    page = await run_in_threadpool(interrupt_page, service, views, who, chat_id, ref)
    try:
        result = await _resume(service, who, chat_id, page, action, data)
    except FORM_PROBLEMS as exc:
        return await run_in_threadpool(_again, request, service, page, who, 422,
                                       errors=_errors(exc), action=action, values=data)
    except CONFLICTS as exc:
        fresh = await run_in_threadpool(interrupt_page, service, views, who, chat_id, ref)
        return await run_in_threadpool(_again, request, service, fresh, who, 409,
                                       notice=_conflict(exc))
    except ForbiddenError as exc:
        return await run_in_threadpool(_again, request, service, page, who, 403,
                                       notice=f"Refused by the server: {exc.message}.")
    except (ApprovalRequiredError, NotAnApprovalError, InvalidRequestError,
            DelegationNotFoundError, ChatErasedError) as exc:
        return await run_in_threadpool(_again, request, service, page, who, exc.status,
                                       notice=f"Refused by the server: {exc.message}.")
    here = f"/chats/{chat_id}/interrupts/{quote(ref, safe='')}"
    if action in ("approve", "reject", "edit") and _still_waiting(result, ref):
        return redirect(request, f"{here}?recorded={action}")
    return redirect(request, f"{here}?done=true")


async def _resume(service: Interlock, who: Principal, chat_id: UUID, page: InterruptPage,
                  action: Action, data: dict[str, str]) -> TurnResult:
    """The form as the resume the HTTP API would send, decided by the same service call."""
    if action in ("respond", "restart"):
        who.require("approver")  # a tool's own interrupt: as POST /v1/chats/{id}/resume
    entries = _entries(page, action, data)
    decider = await _decider(service, who, action, data)
    return await service.resume(chat_id, actor=who.id, tenant=who.tenant, decider=decider,
                                **entries)


async def _decider(service: Interlock, who: Principal, action: Action, data: dict[str, str]
                   ) -> Decider:
    """The visitor, or the visitor deciding for a delegator by the delegation the vote
    names (approve and reject offer it; checked here and again as the vote is cast)."""
    delegation = chosen(data.get("delegation", "")) if action in ("approve", "reject") else None
    if delegation is None:
        return who.decider()
    return await run_in_threadpool(DelegationDesk(service).acting, who.tenant, delegation,
                                   who.decider())


def _entries(page: InterruptPage, action: Action, data: dict[str, str]) -> dict[str, Any]:
    ref, name, sha = page.call.ref, page.call.name, data.get("input_sha256") or None
    if action == "respond":
        output = parse_form(page.respond_form, data)
        return {"respond": [RespondEntry(ref=ref, name=name, output=output, input_sha256=sha)]}
    if action == "restart":
        edited = parse_form(page.restart_form, data)
        return {"restart": [RestartEntry(ref=ref, name=name, replace_input=edited,
                                         input_sha256=sha)]}
    if action == "approve":
        return {"votes": [ApproveEntry(ref=ref, name=name, input_sha256=sha)]}
    if action == "reject":
        reason = data.get("reason", "").strip()
        return {"votes": [RejectEntry(ref=ref, name=name, reason=reason, input_sha256=sha)]}
    reason = data.get(REASON_FIELD, "").strip()
    if not reason:
        raise FormError([{"loc": ["reason"], "msg": "give a reason for the edit",
                          "type": "missing"}])
    edited = parse_form(page.restart_form, data)
    return {"votes": [EditEntry(ref=ref, name=name, input=edited, input_sha256=sha,
                                reason=reason)]}


def _still_waiting(result: TurnResult, ref: str) -> bool:
    return any(i.ref == ref for i in result.interrupts)


def _errors(exc: FormProblem) -> list[dict[str, Any]]:
    if isinstance(exc, FormError):
        return exc.errors
    if isinstance(exc, ValidationError):
        return [{"loc": [str(part) for part in e["loc"]], "msg": e["msg"]} for e in exc.errors()]
    errors: list[dict[str, Any]] = exc.details["errors"]
    return errors


def _recorded(vote: Vote, page: InterruptPage) -> str:
    policy = page.policy
    if policy is not None and policy.stage is not None:  # a staged call: where it waits now
        said = {"approve": "Your approval is recorded.", "reject": "Your rejection is recorded.",
                "edit": "Your edit is recorded: the call starts again from its first stage."}
        return (f"{said[vote]} It waits in {policy.stage} ({policy.tally} so far). "
                "The tool has not run.")
    tally = f" {policy.tally} on this input so far." if policy else ""
    left = max(policy.quorum - policy.approvals, 0) if policy else 0
    waits = (f" The tool has not run: it waits for {left} more approval{'s' if left != 1 else ''}."
             if policy else "")
    if vote == "approve":
        return f"Your approval is recorded.{tally}{waits}"
    if vote == "edit":
        return ("Your edit is recorded. You are now the requester of this input, so others "
                f"must approve it.{waits}")
    return f"Your rejection is recorded; this policy counts it as a vote.{tally}{waits}"


def _conflict(exc: Conflict) -> str:
    nothing = "Nothing you sent was recorded."
    if isinstance(exc, StaleInterruptError):
        return "The input changed while you were looking at it. Review it again below."
    if isinstance(exc, AlreadyVotedError):
        vote, at = exc.details.get("vote"), exc.details.get("voted_at")
        return f"You already voted ({vote}) on this input at {at}. {nothing}"
    if isinstance(exc, InterruptExpiredError):
        at = exc.details.get("expired_at")
        return f"This approval expired at {at} and failed closed. {nothing}"
    if isinstance(exc, ConcurrencyError):
        return f"The chat changed while you were deciding. {nothing} Review it again below."
    d = exc.details
    return (f"Someone decided this meanwhile: {d.get('decision')} by {d.get('decided_by')} "
            f"at {d.get('decided_at')}. {nothing}")


def _again(request: Request, service: Interlock, page: InterruptPage, who: Principal,
           status: int, **changes: Any) -> Response:
    for name, value in changes.items():
        setattr(page, name, value)
    return _show(request, service, page, who, status)


def _show(request: Request, service: Interlock, page: InterruptPage, who: Principal,
          status: int = 200) -> Response:
    """The page, once a pending call's showing is on record: a view receipt per opening
    (principal, console session, input shown), none for a reload (docs/review.md)."""
    if page.pending:
        Receipts(service).viewed(tenant=who.tenant, chat_id=UUID(page.chat_id),
                                 ref=page.call.ref, principal=who.id,
                                 session=sessions(request).opening(request, who),
                                 input_sha256=page.input_sha256)
    return render(request, "interrupt.html", status, who=who, p=page)
