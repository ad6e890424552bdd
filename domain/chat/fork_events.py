"""Forks: a new chat holding another's history up to a version, linked both ways.

`ChatForked` follows the fork's `ChatStarted` and carries the source's state at that
version (messages, calls, the pending ones still pending); `ChatForkedTo` is the link
recorded in the source. Both are stored under `interlock:<ClassName>` like every chat
event; the copied history is personal data, encrypted under the fork's own key.

A fork is a new request by the one who forks: a call that had not run at that version
begins asked afresh (`asked_afresh`), with no votes, its forker among its requesters and
the source call's idempotency key. Applying the event derives that from the recorded
history, the same way for every log, old ones too; the read sides take the fork's first
state from `ChatForked.begun` as the aggregate does.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from interlock.domain.chat.events import ChatEvent
from interlock.domain.chat.policies import ApprovalState, ApprovalTerms, ForkedCall
from interlock.domain.chat.state import RESOLVED, ChatState, ToolCall
from interlock.domain.storage.erasure import PERSONAL

# What a fork copies of its source's state; the rest (agent, tenant, who started it, its
# chain, its idempotency keys) is the fork's own.
COPIED = ("messages", "calls", "batch", "batch_closed", "turn", "turn_by", "status",
          "finish_reason", "error", "fingerprint")
# A call's decision in the source, which the fork's copy does not carry.
_UNDECIDED: dict[str, Any] = {"decision": None, "decided_by": None, "decided_at": None,
                              "resumed": None, "resume_metadata": None}


class ChatForked(ChatEvent):
    """This chat began as `source_id`'s history up to `source_version` (None once erased)."""

    source_id: UUID
    source_version: int
    actor: str
    history: ChatState | None = None

    def apply(self, state: ChatState) -> None:
        begun = self.begun()
        if begun is None:  # erased: the fork keeps nothing of it
            state.forgotten = True
            return
        for name in COPIED:
            setattr(state, name, getattr(begun, name))

    def begun(self) -> ChatState | None:
        """The history as the fork begins with it (a copy: the event stays as recorded),
        each call that had not run asked afresh; None once erased."""
        if self.history is None:
            return None
        state = self.history.model_copy(deep=True)
        fresh = [ref for ref in state.batch if state.calls[ref].status not in RESOLVED]
        for ref in fresh:
            state.calls[ref] = asked_afresh(state.calls[ref], self.source_id, self.actor,
                                            self.timestamp)
        if state.status == "failed" and any(state.calls[r].status == "interrupted"
                                            for r in fresh):
            state.status, state.finish_reason, state.error = "interrupted", "interrupted", None
        return state

    def asked(self) -> list[ToolCall]:
        """The fork's calls asked afresh, in request order (none once erased)."""
        return asked_in(self.begun())


def asked_in(begun: ChatState | None) -> list[ToolCall]:
    """The calls of a fork's first state (`ChatForked.begun`) asked afresh, in order."""
    if begun is None:
        return []
    return [c for c in (begun.calls[r] for r in begun.batch) if c.forked is not None]


def asked_afresh(call: ToolCall, source_id: UUID, forker: str, at: datetime) -> ToolCall:
    """`call`, not run in chat `source_id`, as a fork by `forker` at `at` asks it again.

    It keeps its input, its requester and its first source's idempotency key, and gains
    `forker` as a requester. Nothing decided on it in the source comes across: a held or
    approved call is held again with no votes (its deadlines as far from `at` as they
    were from its hold), a restart not yet run is an interrupt again at the attempt it
    was (so the fork's restart runs the source's attempt, under its key); a call not yet
    held stays requested, for the fork's turn to hold under its policy. A staged call
    starts over at the first stage its current input goes through (an edit in the source
    may have added a stage: the fork needs it too).
    """
    before = call.forked
    forked = ForkedCall(
        chat_id=source_id, ref=call.ref,
        key_chat_id=before.key_chat_id if before else source_id,
        requested_by=before.requested_by if before else call.requested_by,
        by=[*(before.by if before else ()), forker])
    if call.status == "requested":
        return call.model_copy(update={"forked": forked})
    update: dict[str, Any] = {**_UNDECIDED, "forked": forked, "status": "interrupted",
                              "interrupted_at": at}
    if call.status == "restarted":
        update["attempt"] = call.attempt - 1
    if call.approval is not None:
        terms = _retimed(call.approval.terms, at - (call.interrupted_at or at))
        if call.approval.stages_apply is not None:  # the stages its input now goes through
            terms = terms.model_copy(update={"stages_apply": list(call.approval.stages_apply)})
        state = ApprovalState.opened(terms, forked)
        if state.stage is not None:  # that stage's own roles and deadlines, from `at`
            state = state.model_copy(update={"stage_at": at})
        update["approval"] = state
        update["interrupt"] = {"approval": terms.model_dump(mode="json")}
    return call.model_copy(update=update)


def _retimed(terms: ApprovalTerms, shift: timedelta) -> ApprovalTerms:
    moved = {name: getattr(terms, name) + shift for name in ("expires_at", "escalate_at")
             if getattr(terms, name) is not None}
    return terms.model_copy(update=moved)


class ChatForkedTo(ChatEvent):
    """A fork `fork_id` was made of this chat's history up to `version`."""

    fork_id: UUID
    version: int
    actor: str


PERSONAL[ChatForked.TOPIC] = {"history": None}
