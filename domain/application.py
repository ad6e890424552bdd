"""The application service: one method per use case (load, decide, save, answer)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial, wraps
from typing import Any, ClassVar, Literal, ParamSpec, TypeVar
from uuid import UUID, uuid4

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.persistence import (
    IntegrityError,
    Mapper,
    Transcoder,
)

from interlock.domain.channels import (
    ChannelKind,
    Channels,
    EmailChannel,
    SlackChannel,
    channels_id,
)
from interlock.domain.channels import replay as replay_channels
from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.approval_events import ApprovalVoted
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.events import ChatEvent, TurnFinished, now
from interlock.domain.chat.fork_events import ChatForkedTo
from interlock.domain.chat.jsonsafe import check_json
from interlock.domain.chat.policies import Decider
from interlock.domain.chat.rules import (
    AWAITS_AGENT,
    RespondEntry,
    RestartEntry,
    VoteEntry,
    check_entries,
    held_call,
)
from interlock.domain.errors import (
    ChatErasedError,
    ChatNotFoundError,
    ConcurrencyError,
    ConfigurationError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    TurnInProgressError,
    UnavailableError,
    UnknownAgentError,
)
from interlock.domain.limits import Limits
from interlock.domain.links import Link, SlackLinkProposed, check_proposer, code_sha256, new_code
from interlock.domain.lost_answers import CutTurns
from interlock.domain.results import TurnResult
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.models import Model
from interlock.domain.runtime.tracing import Tracer
from interlock.domain.runtime.turns import Emit, TurnLoop
from interlock.domain.storage.cache import ChatCache
from interlock.domain.storage.erasure import FieldCipher
from interlock.domain.storage.keys import Keyring
from interlock.domain.storage.mapper import PydanticMapper, Sealer
from interlock.domain.storage.repository import ChatRepository, CommitListener
from interlock.domain.storage.snapshots import SnapshotStore
from interlock.domain.threads import Reservation, reservation_id
from interlock.domain.threads import replay as replay_reservation
from interlock.domain.webhooks import Webhook, replay

DEV_SECRET = b"interlock-dev-secret-change-me"
IN_MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
ABANDONED_AFTER = timedelta(minutes=2)
ModelResolver = Callable[[str], Model]
T = TypeVar("T")


P = ParamSpec("P")


def _counted(
    command: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Count the command as under way while it runs (the service is its first argument)."""

    @wraps(command)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        service: Interlock = args[0]  # type: ignore[assignment]
        with service.together():
            return await command(*args, **kwargs)

    return run



class Interlock(Application[UUID]):
    """Chats with agents whose tools may interrupt; every step is an event."""

    name = "Interlock"
    # No snapshots: they sat outside the chain, grew quadratically and were taken on the
    # request path; the mapper refuses to read one (docs/audit.md, "Snapshots").
    snapshotting_intervals: ClassVar[dict[Any, int]] = {}
    tracer: Tracer | None = None  # the edge sets one when tracing is configured
    mapper: PydanticMapper
    limits = Limits()  # the edge sets the configured ones (domain/limits.py)

    def __init__(
        self,
        agents: Sequence[Agent] = (),
        *,
        env: Mapping[str, str] | None = None,
        secret: bytes | Keyring | None = None,
        resolve_model: ModelResolver | None = None,
        io_threads: int = 64,
        cache: ChatCache | None = None,
    ) -> None:
        """`env` is eventsourcing's (the edge builds it from a store URL; memory if none).

        `secret` keys the event chain (a Keyring names the active key and older ones that
        still verify); without it the chain is keyed with the public DEV_SECRET.
        """
        super().__init__(dict(env or IN_MEMORY))
        self.agents = {a.name: a for a in agents}
        self.sealer = Sealer(secret or DEV_SECRET)
        self.mapper.keys = self.sealer.keys  # loads refuse a retired key's late seals
        self.models = {a.name: _model(a, resolve_model) for a in agents}
        # Blocking store work of turns runs here; sized so that concurrent turns' commits
        # meet in one group commit instead of queueing for a thread.
        self._io = ThreadPoolExecutor(io_threads, thread_name_prefix="interlock-io")
        self.store = ChatRepository(self, self.mapper, self.sealer, cache)
        self.chats = self.store.cache
        self._active = 0  # commands under way on this event loop (see off_loop)
        self._active_lock = threading.Lock()
        self.cut_turns = CutTurns()  # resumes a store failure stopped (their key's retry goes on)

    def construct_mapper(self) -> Mapper[UUID]:
        return PydanticMapper(
            transcoder=_NoTranscoder(),
            compressor=self.factory.compressor(),
            cipher=self.factory.cipher(),
        )

    def protect_personal_data(self, cipher: FieldCipher) -> None:
        """Store personal fields encrypted under erasable per-chat keys, and read them back."""
        assert isinstance(self.mapper, PydanticMapper)
        self.mapper.personal = cipher
        self.sealer.body = self.mapper.event_body

    # -- commands ----------------------------------------------------------------------------

    def start_chat(
        self,
        agent: str,
        *,
        actor: str,
        tenant: str = "default",
        metadata: dict[str, Any] | None = None,
        chat_id: UUID | None = None,
    ) -> Chat:
        """A new chat; with `chat_id` (a server-made id), ConcurrencyError if it exists."""
        self.agent(agent)
        self.limits.metadata(metadata)
        chat = Chat.start(agent, actor=actor, tenant=tenant, metadata=metadata, chat_id=chat_id)
        self.store.commit(chat)
        self.store.checkin(chat)  # its first message need not load what was just written
        return chat

    def reserve_thread(self, *, actor: str, tenant: str) -> Reservation:
        """A thread id for a chat whose agent its first run names (domain/threads.py)."""
        reservation = Reservation.reserve(uuid4(), tenant=tenant, actor=actor)
        self.save_stream(reservation_id(reservation.thread_id),
                         reservation.seal(self.sealer.sign))
        return reservation

    def get_reservation(self, thread_id: UUID, *, tenant: str) -> Reservation | None:
        """The tenant's reservation of `thread_id`; None if there is none (or another's)."""
        found = replay_reservation(thread_id, self.events.get(reservation_id(thread_id)))
        return found if found is not None and found.tenant == tenant else None

    def start_reserved_chat(self, thread_id: UUID, agent: str, *, actor: str,
                            tenant: str) -> Chat:
        """Begin the chat of a reserved thread with `agent` (its first run names it); the chat
        another run began first, if one did. ChatNotFoundError if the tenant reserved no
        such thread."""
        if self.get_reservation(thread_id, tenant=tenant) is None:
            raise ChatNotFoundError(thread_id)
        try:
            return self.start_chat(agent, actor=actor, tenant=tenant, chat_id=thread_id)
        except ConcurrencyError:  # a racing first run began it: one chat, one agent
            return self.get_chat(thread_id, tenant=tenant)

    @_counted
    async def send(
        self,
        chat_id: UUID,
        text: str,
        *,
        actor: str,
        tenant: str | None = None,
        emit: Emit | None = None,
        max_turns: int | None = None,
    ) -> TurnResult:
        """Send a user message and run the turn; `max_turns` overrides the agent's budget."""
        chat = await self.off_loop(self.store.checkout, chat_id, tenant)
        loop = self._loop(chat, max_turns)
        since = len(chat.state.messages)
        chat.send_message(text, actor=actor, fingerprint=loop.agent.fingerprint)
        return self._checkin(chat, await loop.run(chat, since, emit))

    @_counted
    async def resume(
        self,
        chat_id: UUID,
        *,
        respond: Sequence[RespondEntry] = (),
        restart: Sequence[RestartEntry] = (),
        actor: str,
        tenant: str | None = None,
        emit: Emit | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        max_turns: int | None = None,
        votes: Sequence[VoteEntry] = (),
        decider: Decider | None = None,
    ) -> TurnResult:
        """Decide pending interrupts and continue the turn with a fresh tool budget.

        With `idempotency_key`, a repeat of the same body answers the first result.
        `metadata` is the resume's own (recorded on each decision, seen by restarted tools).
        `votes` decide calls held for approval (each its own event); while an approval
        waits for more votes, no turn runs. `decider` says who votes (HTTP callers).
        """
        try:
            return await self._resume(
                chat_id, respond, restart, actor=actor, tenant=tenant, emit=emit,
                idempotency_key=idempotency_key, metadata=metadata, max_turns=max_turns,
                votes=votes, decider=decider)
        except ConcurrencyError:
            await self.off_loop(self._explain_lost_vote, chat_id, votes)
            raise
        except UnavailableError:  # it may have committed: the key's retry continues it
            if idempotency_key is not None:
                self.cut_turns.cut(chat_id, idempotency_key)
            raise

    async def _resume(
        self,
        chat_id: UUID,
        respond: Sequence[RespondEntry],
        restart: Sequence[RestartEntry],
        *,
        actor: str,
        tenant: str | None,
        emit: Emit | None,
        idempotency_key: str | None,
        metadata: dict[str, Any] | None,
        max_turns: int | None,
        votes: Sequence[VoteEntry],
        decider: Decider | None,
    ) -> TurnResult:
        chat = await self.off_loop(self.store.checkout, chat_id, tenant)
        loop = self._loop(chat, max_turns)
        body_sha = None
        if idempotency_key is not None:
            check_entries(respond, restart, metadata)  # before hashing: must be encodable
            body_sha = _body_sha256(respond, restart, metadata, max_turns, votes)
            if idempotency_key in chat.state.resume_keys:
                return await self._answer_again(chat, loop, idempotency_key, body_sha, actor, emit)
        since = len(chat.state.messages)
        chat.resume(
            respond,
            restart,
            actor=actor,
            tools=loop.agent.tool_map,
            request_key=idempotency_key,
            request_sha256=body_sha,
            metadata=metadata,
            votes=votes,
            decider=decider,
            now=now(),
        )
        chat.record_fingerprint(loop.agent.fingerprint)
        if chat.status == "interrupted":  # votes only, none resolved: record them, run nothing
            position = await self.off_loop(self.commit, chat)
            return self._checkin(chat, await self._answer(chat, since, position, emit))
        return self._checkin(chat, await loop.run(chat, since, emit))

    async def _answer(
        self, chat: Chat, since: int, position: int | None, emit: Emit | None
    ) -> TurnResult:
        result = TurnResult.of(chat, since, position)
        if emit is not None:
            for event in result.closing_events():
                await emit(event)
        return result

    def _explain_lost_vote(self, chat_id: UUID, votes: Sequence[VoteEntry]) -> None:
        """A vote that lost a race says what won (expiry, another decision) when it can."""
        if not votes:
            return
        chat = self.get_chat(chat_id)
        for entry in votes:
            held_call(chat.state.calls, entry, now())  # raises the winner's story, if any

    @_counted
    async def expire_due(
        self, chat_id: UUID, ref: str, chat: Chat | None = None, *, at: datetime | None = None
    ) -> Literal["expired", "escalated", ""]:
        """Escalate or expire one held call if due (the sweeper's command): which it did
        ("expired" when both were due), "" when nothing was due.

        An expiry is told to the model as the tool's response and the turn goes on. `chat`:
        the chat as just loaded (the sweeper reads a page's chats together); a write since
        then makes the commit a conflict, and nothing is written.
        """
        if chat is None:
            chat = await self.off_loop(self.get_chat, chat_id)
        at = at or now()  # `at`: a replay's clock (interlock.replay), where a deadline fell
        escalated, expired = chat.escalate(ref, at), chat.expire(ref, at)
        if not (escalated or expired):
            return ""
        await self._continue(chat)
        return "expired" if expired else "escalated"

    @_counted
    async def withdraw(
        self,
        chat_id: UUID,
        refs: Sequence[str],
        *,
        reason: str,
        decider: Decider,
        tenant: str | None = None,
        emit: Emit | None = None,
    ) -> TurnResult:
        """Take pending requests back; the model is told, and the chat goes on."""
        chat = await self.off_loop(self.get_chat, chat_id, tenant=tenant)
        since = len(chat.state.messages)
        chat.withdraw(refs, decider=decider, reason=reason)
        return await self._continue(chat, since, emit)

    async def _continue(
        self, chat: Chat, since: int | None = None, emit: Emit | None = None
    ) -> TurnResult:
        """Run the turn on if nothing else is pending; a service without the agent only records."""
        since = len(chat.state.messages) if since is None else since
        if chat.status != "running":
            return await self._answer(chat, since, await self.off_loop(self.commit, chat), emit)
        if chat.state.agent not in self.agents:  # a sweeper without agents: retry continues it
            chat.finish_turn("failed", error=AWAITS_AGENT)
            return await self._answer(chat, since, await self.off_loop(self.commit, chat), emit)
        return await self._loop(chat, None).run(chat, since, emit)

    async def _answer_again(self, chat: Chat, loop: TurnLoop, key: str, body_sha: str,
                            actor: str, emit: Emit | None) -> TurnResult:
        """The first answer under `key`; its turn continued if a store failure cut it."""
        try:
            return await self.off_loop(self._first_answer, chat, key, body_sha)
        except TurnInProgressError:
            if not self.cut_turns.may_continue(chat, key, now(), ABANDONED_AFTER):
                raise
        since = chat.state.resume_keys[key].since
        chat.retry(actor=actor, now=now(), stale_after=timedelta(0))
        return self._checkin(chat, await loop.run(chat, since, emit))

    def _first_answer(self, chat: Chat, key: str, body_sha: str) -> TurnResult:
        use = chat.state.resume_keys[key]
        if use.request_sha256 != body_sha:
            raise IdempotencyKeyReusedError(key)
        votes_only: int | None = None  # a request of votes that settled nothing ran no turn
        for event in self.events.get(chat.id, gt=use.version - 1):
            if isinstance(event, ApprovalVoted) and event.request_key == key:
                votes_only = event.originator_version if event.outcome == "pending" else None
                continue
            if votes_only is not None:
                break
            if isinstance(event, TurnFinished):
                then = self.get_chat(chat.id, version=event.originator_version)
                return TurnResult.of(then, use.since, None)
        if votes_only is not None:
            return TurnResult.of(self.get_chat(chat.id, version=votes_only), use.since, None)
        raise TurnInProgressError()

    def fork(
        self, chat_id: UUID, version: int, *, actor: str, tenant: str | None = None,
        agent: str | None = None,
    ) -> Chat:
        """A new chat holding the chat's history up to `version` (its pending interrupts
        pending), linked both ways in one commit; it goes on under the chat's agent as it
        is now, or under `agent`."""
        if version < 1:
            raise InvalidRequestError(f"there is no version {version}", version=version)
        source = self.get_chat(chat_id, tenant=tenant)
        self._check_not_erased(source)
        self.limits.fork(chat_id)
        at = self.get_chat(chat_id, version=version, tenant=tenant)
        fork = Chat.fork(at, agent=self.agent(agent or source.state.agent).name, actor=actor)
        source.record_fork(fork.id, version, actor=actor)
        self._commit_together([fork, source])
        return fork

    def _check_not_erased(self, chat: Chat) -> None:
        """A chat whose erasure began, or whose key the store says is gone (an erasure
        recorded before chats recorded its beginning), is not forked."""
        cipher = getattr(self.mapper, "personal", None)
        if chat.state.erasing or (cipher is not None and cipher.erased_at(chat.id) is not None):
            raise ChatErasedError(chat.id)

    def begin_erasure(self, chat_id: UUID, *, actor: str, attempts: int = 50) -> list[UUID]:
        """Record that the chat's erasure begins, before its key is destroyed; its forks
        (their copied history is the same person's data, to erase with it). From that
        commit on no fork of it is recorded: a fork racing it loses on the version."""
        for _ in range(attempts):
            chat = self.get_chat(chat_id)
            if not chat.begin_erasure(actor=actor):
                break
            try:
                self.commit(chat)
                break
            except ConcurrencyError:
                continue  # a fork (or a turn) got in first: its link is read below
        else:
            raise ConcurrencyError(chat_id)
        return [e.fork_id for e in self.events.get(chat_id) if isinstance(e, ChatForkedTo)]

    def _commit_together(self, chats: Sequence[Chat]) -> None:
        """Seal each chat's new events in its chain and append them all in one transaction."""
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        for chat in chats:
            chat.seal(self.sealer.sign)
            processing.events.extend(chat.collect_events())
            processing.aggregates[chat.id] = chat
        try:
            recordings = self._record(processing)
        except IntegrityError:
            raise ConcurrencyError(chats[-1].id) from None
        for listener in self.commit_listeners:
            listener(recordings)

    @_counted
    async def retry(
        self,
        chat_id: UUID,
        *,
        actor: str,
        tenant: str | None = None,
        emit: Emit | None = None,
        stale_after: timedelta = ABANDONED_AFTER,
        max_turns: int | None = None,
        decider_only: bool = False,
    ) -> TurnResult:
        """Continue from the last recorded step; completed tools never run again.

        A turn still `running` with no event (heartbeats included) for `stale_after` was
        left by a crashed process: its requested tools run again with the same
        idempotency key. `decider_only`: the actor may retry only a turn their decision
        started (an approver without the requester role).
        """
        chat = await self.off_loop(self.store.checkout, chat_id, tenant)
        loop = self._loop(chat, max_turns)
        since = len(chat.state.messages)
        chat.retry(actor=actor, now=now(), stale_after=stale_after, decider_only=decider_only)
        chat.record_fingerprint(loop.agent.fingerprint)
        return self._checkin(chat, await loop.run(chat, since, emit))

    def _loop(self, chat: Chat, max_turns: int | None) -> TurnLoop:
        """The turn loop for this chat's agent, with this call's tool budget."""
        agent = self.agent(chat.state.agent)
        if max_turns is not None and max_turns < 1:
            raise InvalidRequestError("max_turns must be at least 1", max_turns=max_turns)
        return TurnLoop(
            agent, self.models[agent.name], self._commit_turn, max_turns or agent.max_turns,
            self.tracer, runner=self,
        )

    async def _commit_turn(self, chat: Chat) -> int | None:
        """The loop's commit, off the event loop: concurrent turns' appends commit together."""
        return await self.off_loop(self.commit, chat)

    @contextmanager
    def together(self) -> Iterator[None]:
        """Count one more command under way: commands started inside offload their store work."""
        # The sweeper's thread counts too: a lost update would leave the count wrong for good.
        with self._active_lock:
            self._active += 1
        try:
            yield
        finally:
            with self._active_lock:
                self._active -= 1

    async def off_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking store work on the I/O threads, so no chat waits on another's disk.

        A lone command runs it in place: a thread hop costs it more than anyone waits.
        """
        if self._active <= 1:
            return fn(*args, **kwargs)
        running = asyncio.get_running_loop()
        return await running.run_in_executor(self._io, partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._io.shutdown(wait=False)
        super().close()

    # -- webhook subscriptions ---------------------------------------------------------------

    def subscribe_webhook(self, webhook_id: UUID, *, tenant: str, url: str,
                          events: Sequence[str], actor: str, secret_sha256: str) -> Webhook:
        """Record a subscription (`position` says where). ConcurrencyError if the id is taken."""
        hook = Webhook.subscribe(webhook_id, tenant=tenant, url=url, events=events,
                                 actor=actor, secret_sha256=secret_sha256)
        hook.position = self._save_webhook(hook)
        return hook

    def unsubscribe_webhook(self, webhook_id: UUID, *, tenant: str, actor: str) -> int | None:
        """Record the removal; its position, None if the tenant has no such subscription."""
        hook = self.get_webhook(webhook_id, tenant=tenant)
        if hook is None or hook.removed is not None:
            return None
        hook.unsubscribe(actor=actor)
        return self._save_webhook(hook)

    def get_webhook(self, webhook_id: UUID, *, tenant: str | None = None) -> Webhook | None:
        """The subscription as recorded; None if there is none (or another tenant's)."""
        hook = replay(self.events.get(webhook_id))
        return hook if hook is not None and tenant in (None, hook.tenant) else None

    def _save_webhook(self, hook: Webhook) -> int:
        return self.save_stream(hook.id, hook.seal(self.sealer.sign))

    def save_stream(self, stream_id: UUID, events: list[ChatEvent]) -> int:
        """Append a stream that is no chat (a subscription, a tenant's channels, a call's
        view receipts): its position; ConcurrencyError if another write took its version
        first."""
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        processing.events.extend(events)
        try:
            recordings = self._record(processing)
        except IntegrityError:
            raise ConcurrencyError(stream_id) from None
        for listener in self.commit_listeners:
            listener(recordings)
        return recordings[-1].notification.id

    # -- notification channels ---------------------------------------------------------------

    def set_channel(self, tenant: str, kind: ChannelKind, config: EmailChannel | SlackChannel,
                    *, actor: str) -> Channels:
        """Record the tenant's `kind` channel (replacing any); ConcurrencyError on a race."""
        channels = self.get_channels(tenant)
        channels.set(kind, config, actor)
        self.save_stream(channels.id, channels.seal(self.sealer.sign))
        return channels

    def remove_channel(self, tenant: str, kind: ChannelKind, *, actor: str) -> bool:
        """Record the removal; False when the tenant had no such channel."""
        channels = self.get_channels(tenant)
        if not channels.remove(kind, actor):
            return False
        self.save_stream(channels.id, channels.seal(self.sealer.sign))
        return True

    def get_channels(self, tenant: str) -> Channels:
        return replay_channels(tenant, self.events.get(channels_id(tenant)))

    # -- Slack identity links (domain/links.py) ----------------------------------------------

    def propose_link(self, tenant: str, slack_user: str, *, principal: str | None,
                     proposer: Decider | str) -> tuple[str, SlackLinkProposed]:
        """Record that `slack_user` may become `principal` once it confirms; the one-time code
        (shown once, the log keeps its hash) and the proposal. A Slack user asking from Slack
        is the proposer `"slack:<user>"` and names no principal."""
        if isinstance(proposer, Decider):
            principal, proposed_by = check_proposer(proposer, principal), proposer.id
        else:
            principal, proposed_by = None, proposer
        code, channels = new_code(), self.get_channels(tenant)
        proposal = channels.propose_link(slack_user, principal=principal, at=now(),
                                         proposed_by=proposed_by,
                                         code_sha256=code_sha256(tenant, code))
        self.save_stream(channels.id, channels.seal(self.sealer.sign))
        return code, proposal

    def confirm_link(self, tenant: str, code: str, *, confirmer: str) -> Link:
        """`confirmer`, signed in as itself, confirms a proposal with its code: the link.
        A wrong, expired or used code is refused and writes nothing; of two racing
        confirmations one wins (ConcurrencyError for the other)."""
        channels = self.get_channels(tenant)
        link = channels.confirm_link(code_sha256(tenant, code), confirmer=confirmer, at=now())
        self.save_stream(channels.id, channels.seal(self.sealer.sign))
        return link

    def unlink(self, tenant: str, slack_user: str, *, who: Decider) -> bool:
        """Remove a link (an admin, or its principal); False when there was none."""
        channels = self.get_channels(tenant)
        if not channels.unlink(slack_user, who=who):
            return False
        self.save_stream(channels.id, channels.seal(self.sealer.sign))
        return True


    # -- queries -----------------------------------------------------------------------------

    def agent(self, name: str) -> Agent:
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownAgentError(name) from None

    def get_chat(
        self, chat_id: UUID, *, version: int | None = None, tenant: str | None = None
    ) -> Chat:
        """The chat now, or as of event `version`; another tenant's chat does not exist."""
        return self.store.get(chat_id, version=version, tenant=tenant)

    def get_chats(self, chat_ids: Sequence[UUID]) -> dict[UUID, Chat]:
        """These chats as they are now, read together (an id that does not load is left out)."""
        return self.store.get_many(chat_ids)

    def chat_events(
        self, chat_id: UUID, *, tenant: str | None = None, after: int = 0,
        limit: int | None = None,
    ) -> list[ChatEvent]:
        """The chat's events after version `after` (at most `limit`), oldest first."""
        return self.store.events_of(chat_id, tenant=tenant, after=after, limit=limit)

    def commit(self, chat: Chat) -> int | None:
        """Seal and append the chat's new events at the expected version; the position."""
        return self.store.commit(chat)

    @property
    def snapshot_store(self) -> SnapshotStore | None:
        return self.store.snapshots

    @snapshot_store.setter
    def snapshot_store(self, snapshots: SnapshotStore | None) -> None:
        self.store.snapshots = snapshots

    @property
    def commit_listeners(self) -> list[CommitListener]:
        """Called after each commit: in-process read models catch up there (read-your-writes)."""
        return self.store.listeners

    def _checkin(self, chat: Chat, result: TurnResult) -> TurnResult:
        """The command is over and all it recorded committed: later commands may reuse it."""
        self.store.checkin(chat)
        return result


def _body_sha256(
    respond: Sequence[RespondEntry],
    restart: Sequence[RestartEntry],
    metadata: dict[str, Any] | None,
    max_turns: int | None,
    votes: Sequence[VoteEntry] = (),
) -> str:
    body: dict[str, Any] = {
        "respond": [e.model_dump(mode="json") for e in respond],
        "restart": [e.model_dump(mode="json") for e in restart],
    }
    if metadata is not None or max_turns is not None:  # old keys keep their old hashes
        body.update(metadata=metadata, max_turns=max_turns)
    if votes:  # so do keys of requests without votes
        body["votes"] = [[type(v).__name__, v.model_dump(mode="json")] for v in votes]
        check_json(body["votes"], "votes")
    return sha256_hex(body)


def _model(agent: Agent, resolve: ModelResolver | None) -> Model:
    if not isinstance(agent.model, str):
        return agent.model
    if resolve is None:
        raise ConfigurationError(
            f"agent {agent.name} names model {agent.model!r} but no provider resolver is set"
            " (pip install -e '.[providers]')"
        )
    return resolve(agent.model)


class _NoTranscoder(Transcoder):
    """The pydantic mapper serialises by itself; the library still wants a transcoder."""

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

