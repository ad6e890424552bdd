"""View receipts: who opened which pending call's page in the console, when, and the
SHA-256 of the input the page showed. One stream per call, sealed into its own chain like
the chats', so `verify`, checkpoints and the reviews view cover it.

A receipt is recorded once per opening: once per (principal, console session, input hash).
A reload in the same session finds its receipt in the stream and records nothing; a new
sign-in, or an input changed by an edit, records a new one. The stream is the rule's
memory, so it holds across server processes: two that race append at the same version,
one wins, and the other reads the winner's receipt (or appends after it) on its retry.

A receipt holds a principal id, an opaque session hash and the input's hash, never the
input itself: no field of it is personal data under docs/audit.md's erasure (decision
events keep their actor and `input_sha256` after an erasure too), so erasing a chat leaves
its receipts as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import NAMESPACE_URL, UUID, uuid5

from interlock.domain.application import Interlock
from interlock.domain.chat.events import now
from interlock.domain.errors import ConcurrencyError, UnknownInterruptError
from interlock.domain.streams import Stream, StreamEvent

MAX_TRIES = 16  # each lost race means another receipt of the call was appended


class CallViewed(StreamEvent):
    """`principal` opened the console page of pending call `ref` of `chat_id`, and the page
    showed the input whose SHA-256 (RFC 8785, as decisions record it) is `input_sha256`."""

    tenant: str
    chat_id: UUID
    ref: str
    principal: str
    session: str  # names the console session (a hash), never its cookie
    input_sha256: str


def receipts_id(chat_id: UUID, ref: str) -> UUID:
    """The call's receipt stream: one per call, found without an index."""
    return uuid5(NAMESPACE_URL, f"interlock:receipts:{chat_id}:{ref}")


class CallReceipts(Stream):
    """The receipts of one call, replayed from their stream."""

    def __init__(self, chat_id: UUID, ref: str) -> None:
        super().__init__()
        self.chat_id, self.ref, self.id = chat_id, ref, receipts_id(chat_id, ref)
        self.receipts: list[CallViewed] = []

    def has(self, principal: str, session: str, input_sha256: str) -> bool:
        """Whether this opening (principal, session, input) has its receipt already."""
        return any((r.principal, r.session, r.input_sha256) == (principal, session, input_sha256)
                   for r in self.receipts)

    def record(self, *, tenant: str, principal: str, session: str,
               input_sha256: str) -> CallViewed:
        """A new receipt (pending until saved)."""
        event = CallViewed(originator_id=self.id, originator_version=self.version + 1,
                           timestamp=now(), tenant=tenant, chat_id=self.chat_id, ref=self.ref,
                           principal=principal, session=session, input_sha256=input_sha256)
        self.apply(event)
        self.pending_events.append(event)
        return event

    def apply(self, event: CallViewed) -> None:
        self.receipts.append(event)
        self._followed(event)


def replay(chat_id: UUID, ref: str, events: Iterable[object]) -> CallReceipts:
    """The call's receipts as recorded (none when the stream is empty)."""
    receipts = CallReceipts(chat_id, ref)
    for event in events:
        if isinstance(event, CallViewed) and (event.chat_id, event.ref) == (chat_id, ref):
            receipts.apply(event)
    return receipts


class Receipts:
    """Records and reads view receipts in the chats' event store, sealed with its keys."""

    def __init__(self, app: Interlock) -> None:
        self.app = app

    def viewed(self, *, tenant: str, chat_id: UUID, ref: str, principal: str, session: str,
               input_sha256: str) -> CallViewed | None:
        """Record that `principal` was shown the call's input in console `session`; None
        when this opening has its receipt already (a reload). The caller has checked that
        the chat is `tenant`'s and the call pending."""
        for _ in range(MAX_TRIES):
            receipts = self.of_call(chat_id, ref)
            if receipts.has(principal, session, input_sha256):
                return None
            receipts.record(tenant=tenant, principal=principal, session=session,
                            input_sha256=input_sha256)
            sealed = receipts.seal(self.app.sealer.sign)
            try:
                self.app.save_stream(receipts.id, sealed)
            except ConcurrencyError:
                continue  # another opening of this call was appended first: read it, again
            event = sealed[-1]
            assert isinstance(event, CallViewed)
            return event
        raise ConcurrencyError(receipts_id(chat_id, ref))

    def of_call(self, chat_id: UUID, ref: str) -> CallReceipts:
        """The call's receipts, oldest first."""
        return replay(chat_id, ref, self.app.events.get(receipts_id(chat_id, ref)))

    def of_tenant_call(self, chat_id: UUID, ref: str, *, tenant: str) -> list[CallViewed]:
        """The receipts of a call of `tenant`'s (another tenant's chat is not found; a ref
        that never interrupted is an UnknownInterruptError), oldest first."""
        call = self.app.get_chat(chat_id, tenant=tenant).state.calls.get(ref)
        if call is None or call.interrupted_at is None:
            raise UnknownInterruptError(ref)
        return self.of_call(chat_id, ref).receipts
