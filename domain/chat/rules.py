"""The checks a decision passes before it becomes an event: respond and restart entries,
votes on held calls, expiry and withdrawal. A new approval rule goes here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from interlock.domain.chat import events as ev
from interlock.domain.chat.approval_events import ApprovalVoted
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.jsonsafe import check_json
from interlock.domain.chat.policies import (
    Approval,
    ApprovalState,
    Decider,
    Outcome,
    VoteKind,
    normalise_id,
)
from interlock.domain.chat.schema import SchemaError, ToolSchema
from interlock.domain.chat.state import ToolCall
from interlock.domain.errors import (
    AlreadyVotedError,
    ApprovalRequiredError,
    ConflictingRolesError,
    DuplicateRefError,
    EmptyResumeError,
    ForbiddenError,
    InterruptExpiredError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidToolInputError,
    InvalidToolOutputError,
    NotAnApprovalError,
    PolicyAuthorError,
    StageSegregationError,
    StaleInterruptError,
    UnknownInterruptError,
)

SHA256_HEX = r"^[0-9a-f]{64}$"
Decision = tuple[type[ev.ChatEvent], dict[str, Any]]


class RespondEntry(BaseModel):
    """The client supplies the tool's output; the tool is not run.

    Given as Genkit's respond builder is called (`ref`, `name`, `output`, `metadata`: the
    response part then says `interruptResponse: metadata ?? true`), or as a raw Genkit part
    (`{"toolResponse": {"ref", "name", "output"}, "metadata"?}`), which stays as given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    output: Any = None
    metadata: dict[str, Any] | None = None
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)
    as_part: bool | None = Field(default=None, description="a raw toolResponse part: its metadata "
                          "is the part's own, no interruptResponse is added")

    @model_validator(mode="before")
    @classmethod
    def _from_part(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "toolResponse" not in data:
            return data
        response, rest = data["toolResponse"], {k: v for k, v in data.items()
                                                 if k != "toolResponse"}
        if not isinstance(response, dict):
            raise ValueError("toolResponse must be an object: {ref, name, output}")
        return {**rest, **response, "as_part": True}


class RestartEntry(BaseModel):
    """The server runs the tool again, with its original or a replaced input."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    resumed_metadata: dict[str, Any] | None = None
    replace_input: Any = None
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


Entry = RespondEntry | RestartEntry


def check_entries(
    respond: Sequence[RespondEntry],
    restart: Sequence[RestartEntry],
    metadata: dict[str, Any] | None = None,
) -> None:
    """Every value of a resume must be recordable as given (see domain.jsonsafe)."""
    for kind, entries in (("respond", respond), ("restart", restart)):
        for i, entry in enumerate(entries):
            check_json(dict(entry), f"{kind}[{i}]")
    check_json(metadata, "metadata")


def check_batch(refs: list[str]) -> None:
    """A resume is one batch: at least one entry, no ref twice."""
    if not refs:
        raise EmptyResumeError()
    seen: set[str] = set()
    for ref in refs:
        if ref in seen:
            raise DuplicateRefError(ref)
        seen.add(ref)


def pending_call(
    calls: Mapping[str, ToolCall], entry: Entry, actor: str, tools: Mapping[str, ToolSchema]
) -> ToolCall:
    """The interrupted call an entry decides, checked against what the entry claims."""
    call = calls.get(entry.ref)
    if call is None:
        raise UnknownInterruptError(entry.ref)
    if call.status != "interrupted":
        raise InterruptNotPendingError(entry.ref, call.decided_by, call.decided_at, call.decision)
    if call.name != entry.name:
        raise InterruptNameMismatchError(entry.ref, call.name, entry.name)
    if call.awaiting_approval:
        raise ApprovalRequiredError(entry.ref)  # a respond must not bypass the policy
    check_seen(entry, call, actor)
    _check_approver(tools.get(entry.name), call, actor)
    return call


def respond_decision(entry: RespondEntry, call: ToolCall, tool: ToolSchema | None) -> Decision:
    output = entry.output
    if tool is not None:
        try:
            output = tool.validate_output(entry.output, strict=True)
        except SchemaError as exc:
            raise InvalidToolOutputError(entry.ref, entry.name, exc.errors) from None
    return ev.Responded, {
        "ref": entry.ref,
        "name": entry.name,
        "output": output,
        "metadata": entry.metadata,
        "input_sha256": sha256_hex(call.input),
        **({"as_part": True} if entry.as_part else {}),
    }


def restart_decision(entry: RestartEntry, call: ToolCall, tool: ToolSchema | None) -> Decision:
    data: dict[str, Any] = {
        "ref": entry.ref,
        "name": entry.name,
        "resumed_metadata": entry.resumed_metadata,
        "original_input": call.input,
        "input_sha256": sha256_hex(call.input),
    }
    if "replace_input" in entry.model_fields_set:
        data["replace_input"] = _replaced_input(entry, tool)
        data["replaced_input_sha256"] = sha256_hex(data["replace_input"])
    return ev.Restarted, data


def _replaced_input(entry: RestartEntry, tool: ToolSchema | None) -> Any:
    if tool is None:
        return entry.replace_input
    try:
        return tool.input_json(entry.replace_input, strict=True)
    except SchemaError as exc:
        raise InvalidToolInputError(entry.ref, entry.name, exc.errors) from None


def check_seen(entry: Entry | VoteEntry, call: ToolCall, actor: str | None) -> None:
    """A decision counts only toward the input its decider saw (D29).

    It names that input by `input_sha256`; one that names none is about the input as
    requested, so once someone other than `actor` replaced it (an edit, a restart with
    `replace_input`) it is stale: it cannot say which input it means. Whoever wrote the
    current input knows it. `actor` None: nobody is taken to have written it.
    """
    current = sha256_hex(call.input)
    if entry.input_sha256 is not None:
        if entry.input_sha256 != current:
            raise StaleInterruptError(entry.ref, entry.input_sha256, current)
        return
    if call.input_by is not None and normalise_id(call.input_by) != normalise_id(actor):
        raise StaleInterruptError(entry.ref, None, current, changed_by=call.input_by)


def _check_approver(tool: ToolSchema | None, call: ToolCall, actor: str) -> None:
    """Four eyes: not who sent the turn, nor whoever last replaced the input (ids normalised)."""
    if tool is None or not tool.distinct_approver:
        return
    if normalise_id(actor) in call.requesters():
        asked = _asked(call, actor)
        raise ForbiddenError(
            f"{call.name} needs an approver other than {actor}, who {asked}",
            ref=call.ref,
            actor=actor,
            reason="requester",
        )


def _asked(call: ToolCall, actor: str) -> str:
    """How `actor` (a requester of `call`) asked for it, for the refusal's message."""
    me = normalise_id(actor)
    if call.forked is not None and me in {normalise_id(i) for i in call.forked.by}:
        return f"forked chat {call.forked.chat_id} and so asked for this input"
    if call.input_by is not None and normalise_id(call.input_by) == me:
        return "last replaced its input"
    if call.forked is not None:
        return f"asked for this input in chat {call.forked.chat_id}"
    return "sent the turn"


# -- votes on held calls, expiry and withdrawal

MAX_REASON = 2000


def _said(text: str) -> str:
    if not text.strip():
        raise ValueError("a reason must say something: it is blank")
    return text


# Why a person edited or rejected: required on every surface, so the record says it.
Reason = Annotated[str, Field(min_length=1, max_length=MAX_REASON), AfterValidator(_said)]
# The error of a turn a service without the chat's agent ended after an expiry or a
# withdrawal: the process that has the agent continues it (or any client's retry does).
AWAITS_AGENT = "a pending request ended; retry to continue"
SWEEPER = "interlock:sweeper"  # the actor of an expiry, and of the turn it continues: no person


class ApproveEntry(BaseModel):
    """A yes to a held call, on the input `input_sha256` names (none: as requested, unchanged)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


class EditEntry(BaseModel):
    """A changed input for a held call: validated, both kept; others must approve it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    input: Any
    reason: Reason
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


class RejectEntry(BaseModel):
    """A no, with a reason the model is given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    reason: Reason
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


VoteEntry = ApproveEntry | EditEntry | RejectEntry
KIND: Mapping[type[BaseModel], VoteKind] = {
    ApproveEntry: "approve", EditEntry: "edit", RejectEntry: "reject"}


def held_call(calls: Mapping[str, ToolCall], entry: VoteEntry, now: datetime,
              actor: str | None = None) -> ToolCall:
    """The call awaiting approval that `actor`'s vote names, still open at `now`, on the
    input the vote is about (see `check_seen`)."""
    call = calls.get(entry.ref)
    if call is None:
        raise UnknownInterruptError(entry.ref)
    if call.status == "expired" and call.decided_at is not None:
        raise InterruptExpiredError(entry.ref, _expiry(call) or call.decided_at)
    if call.status != "interrupted":
        raise InterruptNotPendingError(entry.ref, call.decided_by, call.decided_at, call.decision)
    if call.name != entry.name:
        raise InterruptNameMismatchError(entry.ref, call.name, entry.name)
    if not call.awaiting_approval:
        raise NotAnApprovalError(entry.ref)
    expires_at = _expiry(call)
    if expires_at is not None and now >= expires_at:
        raise InterruptExpiredError(entry.ref, expires_at)  # fails closed before the sweeper
    check_seen(entry, call, actor)
    return call


def _expiry(call: ToolCall) -> datetime | None:
    return None if call.approval is None else call.approval.current().expires_at


def deciders_in_words(roles: Iterable[str], groups: Iterable[str]) -> str:
    """"the role treasury", "one of the roles a or b, or the group g": names as people say
    them, not a list's repr."""
    said = [_one_of(kind, sorted(names)) for kind, names in (("role", roles), ("group", groups))]
    found = [s for s in said if s]
    return ", or ".join(found) if found else "an admin"


def _one_of(kind: str, names: list[str]) -> str:
    if not names:
        return ""
    if len(names) == 1:
        return f"the {kind} {names[0]}"
    return f"one of the {kind}s {', '.join(names[:-1])} or {names[-1]}"


def check_voter(call: ToolCall, decider: Decider) -> None:
    """Routing, four-eyes and one vote per person: each refusal says why, nothing is written."""
    assert call.approval is not None
    roles, groups = call.approval.deciders()
    if not decider.may_decide(roles, groups):
        raise ForbiddenError(
            f"{decider.id} may not decide {call.name} {call.ref}: it needs"
            f" {deciders_in_words(roles, groups)}",
            ref=call.ref, actor=decider.id, reason="not_a_decider",
            roles=sorted(roles), groups=sorted(groups))
    for person in (decider.id, decider.acting_for):  # a delegate, and whom they vote for
        if person is not None and normalise_id(person) in call.requesters():
            raise ForbiddenError(
                f"{person} {_asked(call, person)} of {call.ref}; someone else must decide it",
                ref=call.ref, actor=decider.id, reason="requester",
                **({"for_actor": decider.acting_for} if decider.acting_for else {}))
    check_policy_authors(call, decider)
    check_segregation(call, decider)
    earlier = call.approval.vote_of(decider.people(), sha256_hex(call.input))
    if earlier is not None:
        raise AlreadyVotedError(call.ref, earlier.actor, earlier.kind, earlier.at)


def check_policy_authors(call: ToolCall, decider: Decider) -> None:
    """Nobody decides a call whose policy they changed: who proposed or approved the data
    policy version it is held under may not vote on it, nor vote for or by delegation."""
    assert call.approval is not None
    ref = call.approval.terms.policy
    if ref is None:
        return
    authors = ref.authors()
    for person in (decider.id, decider.acting_for):
        if person is not None and normalise_id(person) in authors:
            raise PolicyAuthorError(call.ref, decider.id, person, authors[normalise_id(person)],
                                    ref.id, ref.version)


def check_segregation(call: ToolCall, decider: Decider) -> None:
    """Across stages and roles: nobody votes in two stages of one call (on its current
    input), and nobody holding both roles of a pair the policy says conflict votes."""
    assert call.approval is not None
    state = call.approval
    for pair in state.terms.conflicts or ():
        if set(pair) <= decider.roles | decider.holds:
            raise ConflictingRolesError(call.ref, decider.id, pair)
    other = state.voted_in(decider.people())
    if other is not None and state.terms.stages is not None and state.stage is not None:
        stages = state.terms.stages
        raise StageSegregationError(call.ref, decider.id, stages[other].name,
                                    stages[state.stage].name)


def vote_decision(entry: VoteEntry, call: ToolCall, tool: ToolSchema | None,
                  policy: Approval | None = None, decider: Decider | None = None) -> Decision:
    """The ApprovalVoted event's data, with the outcome this vote brings (and, for a
    staged policy, the stage it completes or, for an edit, the stages the new input
    goes through: by `policy`'s `when`s, or all when it is unknown or changed)."""
    assert call.approval is not None
    kind = KIND[type(entry)]
    data: dict[str, Any] = {"ref": entry.ref, "name": entry.name, "vote": kind,
                            "input_sha256": sha256_hex(call.input)}
    if isinstance(entry, EditEntry):
        data["edited_input"] = _edited(entry, tool)
        data["edited_input_sha256"] = sha256_hex(data["edited_input"])
    if isinstance(entry, RejectEntry | EditEntry):
        data["reason"] = entry.reason  # ApprovalVoted's reason is optional: old edits had none
    data["outcome"] = _outcome(kind, call)
    if decider is not None and decider.acting_for is not None:
        data |= {"for_actor": decider.acting_for, "delegation_id": decider.delegation}
    if call.approval.stage is not None:
        data.update(_staged(kind, data, call, tool, policy))
    return ApprovalVoted, data


def _staged(kind: VoteKind, data: dict[str, Any], call: ToolCall, tool: ToolSchema | None,
            policy: Approval | None) -> dict[str, Any]:
    """A staged call's vote: its stage; the next stage a completing approval opens (the
    call is approved only by its last applying stage); an edit's applying stages."""
    assert call.approval is not None
    staged: dict[str, Any] = {"stage": call.approval.stage}
    if kind == "edit":
        staged["stages_apply"] = _stages_apply(call, tool, policy, data["edited_input"])
    elif data["outcome"] == "approved":
        after = call.approval.next_stage()
        if after is not None:
            data["outcome"], staged["next_stage"] = "pending", after
    return staged


def _stages_apply(call: ToolCall, tool: ToolSchema | None, policy: Approval | None,
                  new_input: Any) -> list[bool]:
    """Which recorded stages an edited input goes through: the policy's `when`s when it
    still names the stages recorded; otherwise (or an input its tool refuses) all of them."""
    assert call.approval is not None and call.approval.terms.stages is not None
    recorded = [s.name for s in call.approval.terms.stages]
    if policy is None or tool is None or [s.name for s in policy.stages] != recorded:
        return [True] * len(recorded)
    try:
        return policy.stages_apply(tool.validate_input(new_input)) or [True] * len(recorded)
    except SchemaError:
        return [True] * len(recorded)


def _outcome(kind: VoteKind, call: ToolCall) -> Outcome:
    """An edit never resolves: its author became the requester of the new input."""
    assert call.approval is not None
    if kind == "reject":
        return "rejected" if call.approval.terms.reject_rejects else "pending"
    if kind == "edit":
        return "pending"
    count = len(call.approval.approvers(sha256_hex(call.input), call.requester)) + 1
    return "approved" if count >= call.approval.current().quorum else "pending"


def _edited(entry: EditEntry, tool: ToolSchema | None) -> Any:
    if tool is None:
        return entry.input
    try:
        return tool.input_json(entry.input, strict=True)
    except SchemaError as exc:
        raise InvalidToolInputError(entry.ref, entry.name, exc.errors) from None


def barred_voters(state: ApprovalState, requester: str | None) -> set[str]:
    """Who may not vote on a held call's current input (normalised): who asked for it (a
    fork's call: its source's requester and each forker too), who voted on it already,
    and who proposed or approved the data policy version it is held under. The inbox's
    `decidable` filter lists by this, `check_voter` refuses by the same rule (votes cast
    before the last edit no longer bar anyone)."""
    voted = {i for v in state.current_votes() for i in (v.actor, v.for_actor) if i}
    forked = state.forked_from.requesters() if state.forked_from is not None else set()
    authors = set(state.terms.policy.authors()) if state.terms.policy is not None else set()
    return {normalise_id(i) for i in (*voted, requester)} | forked | authors


def check_withdrawer(call: ToolCall, decider: Decider) -> None:
    """Only who asked (who sent the turn or last changed the input, a fork's forker) or an
    admin withdraws."""
    asked = {normalise_id(call.requested_by), normalise_id(call.input_by), *call.requesters()}
    if not decider.admin and normalise_id(decider.id) not in asked:
        raise ForbiddenError(
            f"{decider.id} did not ask for {call.ref}; only its requester or an admin withdraws",
            ref=call.ref, actor=decider.id, reason="not_the_requester")
