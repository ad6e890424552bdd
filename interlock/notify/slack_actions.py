"""Slack's interactive callbacks: a button or the reject modal of a held call's message. Each
is verified (Slack's signing secret, a five-minute window, never twice) before it is read;
the Slack user counts as the principal the tenant's admin mapped it to, and the vote is that
principal's, under the same rules as any other, with the channel named on the event."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs
from uuid import UUID

from pydantic import BaseModel, ValidationError
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError
from slack_sdk.signature import SignatureVerifier

from interlock.api.auth import AuthConfig, Principal
from interlock.domain import ApproveEntry, Chat, Interlock, RejectEntry
from interlock.domain.errors import InterlockError, InvalidRequestError, UnauthenticatedError
from interlock.notify import messages
from interlock.notify.routing import principals
from interlock.notify.store import NotifyStore


class Button(BaseModel):
    chat_id: UUID
    ref: str
    input_sha256: str


class SlackActions:
    def __init__(self, service: Interlock, auth: AuthConfig, signing_secret: str,
                 store: NotifyStore, slack: WebClient | None) -> None:
        self.service, self.auth, self.store, self.slack = service, auth, store, slack
        self.verifier = SignatureVerifier(signing_secret)

    def verify(self, body: bytes, timestamp: str | None, signature: str | None) -> dict[str, Any]:
        """The callback's payload, once Slack's signature says Slack sent it, just now, once."""
        if not timestamp or not signature:
            raise UnauthenticatedError("a Slack callback must be signed")
        if not self.verifier.is_valid(body, timestamp, signature):
            raise UnauthenticatedError("the Slack signature does not match, or is too old")
        if not self.store.first_sight(signature):
            raise UnauthenticatedError("this Slack callback was received already")
        try:
            payload: dict[str, Any] = json.loads(parse_qs(body.decode())["payload"][0])
        except (KeyError, IndexError, ValueError, UnicodeDecodeError):
            raise InvalidRequestError("a Slack callback carries a JSON payload field") from None
        return payload

    async def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Slack's answer: a message for the user (ephemeral), or the modal's errors."""
        user = str(payload.get("user", {}).get("id", ""))
        try:
            if payload.get("type") == "view_submission":
                return await self._submitted(payload, user)
            action = payload["actions"][0]
            button = Button.model_validate_json(action["value"])
        except (KeyError, IndexError, TypeError, ValidationError):
            return _say("this action is not one Interlock sent")
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

    def _principal(self, button: Button, user: str) -> tuple[Principal, Chat]:
        chat = self.service.get_chat(button.chat_id)
        tenant = chat.state.tenant
        slack = self.service.get_channels(tenant).slack()
        principal_id = slack.users.get(user) if slack is not None else None
        found = principals(self.auth, tenant).get(principal_id or "")
        if found is None:
            raise InvalidRequestError(
                f"your Slack user {user} is not mapped to a principal of this tenant; an "
                "admin maps it in the Slack channel's users", slack_user=user)
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
        await self.service.resume(
            button.chat_id, votes=[vote], actor=principal.id, tenant=tenant,
            decider=principal.decider(), metadata={"channel": "slack", "slack_user": user})
        return _say(f"Recorded: {principal.id} {'approved' if reason is None else 'rejected'}"
                    f" {call.name}.")


def _say(text: str) -> dict[str, Any]:
    return {"response_type": "ephemeral", "replace_original": False, "text": text}
