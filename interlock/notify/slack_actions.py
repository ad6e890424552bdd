"""Slack's interactive callbacks: a button or the reject modal of a held call's message, and
the `/interlock-link` command. Each is verified (Slack's signing secret, a five-minute window,
never twice) before it is read; the Slack user counts as the principal that confirmed its link
(domain/links.py), and the vote is that principal's, under the same rules as any other, with
the channel named on the event. An unlinked user is told how to link, and nothing is
recorded.

A button names no delegation: a linked user whose own roles may not decide the call's
current stage votes by the one delegation in force that lets them (for its delegator, as a
resume naming it would: the same rules, the same fence); two such delegations are refused
(vote in the console or by the API naming one). See `DelegationDesk.deciding`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs
from uuid import UUID

from pydantic import BaseModel, ValidationError
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError
from slack_sdk.signature import SignatureVerifier

from interlock.domain import ApproveEntry, Chat, Interlock, RejectEntry
from interlock.domain.delegations import DelegationDesk
from interlock.domain.errors import InterlockError, InvalidRequestError, UnauthenticatedError
from interlock.domain.links import SLACK_USER
from interlock.domain.principals import Directory, Principal, of_tenant
from interlock.notify import messages
from interlock.notify.store import NotifyStore

COMMAND = "/interlock-link"
TIMESTAMP = re.compile(r"[0-9]{1,12}")  # seconds since the epoch, as Slack sends them
TIMESTAMP_HEADER, SIGNATURE_HEADER = "X-Slack-Request-Timestamp", "X-Slack-Signature"


class Button(BaseModel):
    chat_id: UUID
    ref: str
    input_sha256: str


class SlackActions:
    def __init__(self, service: Interlock, auth: Directory, signing_secret: str,
                 store: NotifyStore, slack: WebClient | None, console_url: str = "") -> None:
        self.service, self.auth, self.store, self.slack = service, auth, store, slack
        self.verifier = SignatureVerifier(signing_secret)
        self.console_url = console_url.rstrip("/")

    def verify(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """The callback's payload, once Slack's signature says Slack sent it, just now, once."""
        timestamp, signature = headers.get(TIMESTAMP_HEADER), headers.get(SIGNATURE_HEADER)
        if not timestamp or not signature:
            raise UnauthenticatedError("a Slack callback must be signed")
        if not TIMESTAMP.fullmatch(timestamp) or not signature.isascii():
            raise UnauthenticatedError(
                "X-Slack-Request-Timestamp must be seconds since the epoch and X-Slack-Signature"
                " Slack's v0= signature")
        if not self.verifier.is_valid(body, timestamp, signature):
            raise UnauthenticatedError("the Slack signature does not match, or is too old")
        if not self.store.first_sight(signature):
            raise UnauthenticatedError("this Slack callback was received already")
        return _payload(body)

    async def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Slack's answer: a message for the user (ephemeral), or the modal's errors."""
        user = str(payload["user"].get("id", "")) if isinstance(payload.get("user"), dict) else ""
        try:
            if payload.get("type") == "slash_command":
                return self._link(user, str(payload.get("text", "")))
            if payload.get("type") == "view_submission":
                return await self._submitted(payload, user)
            action = payload["actions"][0]
            button = Button.model_validate_json(action["value"])
        except (KeyError, IndexError, TypeError, AttributeError, ValidationError):
            return _say("this action is not one Interlock sent")
        except InterlockError as exc:
            return _say(f"Nothing was recorded: {exc.message}")
        try:
            if action.get("action_id") == messages.REJECT:
                return self._ask_reason(payload, button, user)
            return await self._vote(button, user, None)
        except InterlockError as exc:
            return _say(f"Nothing was recorded: {exc.message}")

    async def _submitted(self, payload: dict[str, Any], user: str) -> dict[str, Any]:
        view = payload["view"]
        button = Button.model_validate_json(view["private_metadata"])
        reason = str(view["state"]["values"]["reason"]["reason"].get("value") or "").strip()
        if not reason:
            return {"response_action": "errors", "errors": {"reason": "Say why."}}
        try:
            await self._vote(button, user, reason)
        except InterlockError as exc:
            return {"response_action": "errors", "errors": {"reason": exc.message}}
        return {"response_action": "clear"}

    def _ask_reason(self, payload: dict[str, Any], button: Button, user: str) -> dict[str, Any]:
        self._principal(button, user)  # an unmapped user is told now, not after typing
        if self.slack is None:
            return _say("Slack is not configured to open a form: reject in the console")
        try:
            self.slack.views_open(trigger_id=payload["trigger_id"],
                                  view=messages.reject_modal(button.model_dump_json()))
        except SlackClientError:
            return _say("Slack did not open the form: reject in the console")
        return {}

    def _link(self, user: str, text: str) -> dict[str, Any]:
        """`/interlock-link [tenant]`: a one-time code for this Slack user, told to it alone;
        the principal it is confirms it signed in as itself."""
        tenant = text.strip() or self._only_tenant()
        if not re.fullmatch(SLACK_USER, user) or not of_tenant(self.auth, tenant):
            return _say(f"Nothing was recorded: say which tenant: {COMMAND} <tenant>")
        code, proposal = self.service.channels.propose_link(tenant, user, principal=None,
                                                   proposer=f"slack:{user}")
        return _say(
            f"Your link code is {code} (tenant {tenant}, until {proposal.expires_at:%H:%M} "
            f"UTC). Sign in to Interlock as yourself and confirm it: {self.console_url}"
            "/ui/slack-link (or POST /v1/channels/slack/links/confirm). Never give it to "
            "anyone: whoever confirms it receives your Slack votes.")

    def _only_tenant(self) -> str:
        tenants = {p.tenant for p in (self.auth.keys or {}).values()}
        return tenants.pop() if len(tenants) == 1 else ""

    def _principal(self, button: Button, user: str) -> tuple[Principal, Chat]:
        chat = self.service.get_chat(button.chat_id)
        tenant = chat.state.tenant
        channels = self.service.channels.get(tenant)
        principal_id = channels.principal_of(user) if channels.slack() is not None else None
        found = of_tenant(self.auth, tenant).get(principal_id or "")
        if found is None:
            old = (" (an admin's mapping no longer counts: its principal confirms a link)"
                   if user in channels.unconfirmed else "")
            raise InvalidRequestError(
                f"your Slack user {user} is not linked to a principal of this tenant{old}; "
                f"type {COMMAND} {tenant} and confirm the code signed in as yourself",
                slack_user=user)
        return found, chat

    async def _vote(self, button: Button, user: str, reason: str | None) -> dict[str, Any]:
        principal, chat = self._principal(button, user)
        tenant, calls = chat.state.tenant, chat.state.calls
        if button.ref not in calls:
            raise InvalidRequestError(f"no call {button.ref} in this chat", ref=button.ref)
        call = calls[button.ref]
        vote: ApproveEntry | RejectEntry = (
            ApproveEntry(ref=button.ref, name=call.name, input_sha256=button.input_sha256)
            if reason is None else RejectEntry(ref=button.ref, name=call.name, reason=reason,
                                               input_sha256=button.input_sha256))
        decider = principal.decider()
        if call.approval is not None and call.status == "interrupted":
            roles, groups = call.approval.deciders()
            decider = await self.service.off_loop(DelegationDesk(self.service).deciding,
                                                  tenant, decider, roles, groups)
        await self.service.resume(
            button.chat_id, votes=[vote], actor=principal.id, tenant=tenant,
            decider=decider, metadata={"channel": "slack", "slack_user": user})
        by = (f" for {decider.acting_for} (delegation {decider.delegation})"
              if decider.acting_for else "")
        return _say(f"Recorded: {principal.id} {'approved' if reason is None else 'rejected'}"
                    f" {call.name}{by}.")


def _payload(body: bytes) -> dict[str, Any]:
    """A button's or a form's JSON `payload`, or a slash command's fields as one."""
    try:
        form = parse_qs(body.decode(), strict_parsing=False)
        if "command" in form and "payload" not in form:
            return {"type": "slash_command", "user": {"id": form.get("user_id", [""])[0]},
                    "command": form["command"][0], "text": form.get("text", [""])[0]}
        payload = json.loads(form["payload"][0])
    except (KeyError, IndexError, ValueError, UnicodeDecodeError):
        raise InvalidRequestError("a Slack callback carries a JSON payload field") from None
    if not isinstance(payload, dict):
        raise InvalidRequestError("a Slack callback's payload is a JSON object")
    return payload


def _say(text: str) -> dict[str, Any]:
    return {"response_type": "ephemeral", "replace_original": False, "text": text}
