"""Chats and turns: start a chat, send, resume, retry, withdraw, expire what is due, and
continue the turn; each loads the chat, calls it, runs the turn loop, commits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Literal, Protocol, TypeVar
from uuid import UUID

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.approval_events import ApprovalVoted
from interlock.domain.chat.canonical import jcs
from interlock.domain.chat.events import TurnFinished, now
from interlock.domain.chat.policies import Approval, Decider
from interlock.domain.chat.rules import AWAITS_AGENT, SWEEPER, VoteEntry, held_call
from interlock.domain.delegations import delegations_id, replay
from interlock.domain.errors import (
    ChatNotFoundError,
    ConcurrencyError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    PolicyMovedError,
    TurnInProgressError,
    UnavailableError,
)
from interlock.domain.limits import Limits
from interlock.domain.lost_answers import CutTurns
from interlock.domain.policy_book import load as load_policies
from interlock.domain.results import TurnResult
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.gating import InForce
from interlock.domain.runtime.models import Model
from interlock.domain.runtime.tracing import Tracer
from interlock.domain.runtime.turns import Emit, TurnLoop
from interlock.domain.services.commands import (
    ABANDONED_AFTER,
    OpenChat,
    Resume,
    Retry,
    Send,
    StartChat,
    Withdraw,
    opened_id,
)
from interlock.domain.services.io import IoThreads, counted
from interlock.domain.services.policy_books import Guard, PolicyBooks
from interlock.domain.storage.repository import ChatRepository

T = TypeVar("T")
# How often a command whose hold a policy change refused is asked again before the client
# is answered 409 (each time, another process changed the tenant's policies in between).
ASKED_AGAIN = 3
_asked_again: ContextVar[int] = ContextVar("interlock_asked_again", default=0)


class Host(Protocol):
    """What turns need of the application: its agents and their models, the tracer the
    edge may set, its commit (the repository's), and itself as the runner sub-agents call;
    the bounds the edge configures, and the resumes a store failure cut off."""

    agents: dict[str, Agent]
    models: dict[str, Model]
    tracer: Tracer | None
    limits: Limits
    cut_turns: CutTurns

    def agent(self, name: str) -> Agent: ...

    def commit(self, chat: Chat) -> int | None: ...


class Turns:
    """The chat and turn use cases over the shared repository, their store work on `io`."""

    def __init__(self, host: Host, store: ChatRepository, io: IoThreads,
                 clock: Callable[[], datetime] = now) -> None:
        """`clock`: when a decision, a retry or an expiry is judged (the application's)."""
        self._host, self._store, self.io, self._clock = host, store, io, clock
        self._books = PolicyBooks(store.events, store.guards_supported)
        self._opening: set[UUID] = set()  # chats started under a key, their turn running here
        store.listeners.append(self._books.heard)

    def start(self, command: StartChat) -> Chat:
        """A new chat; with `chat_id` (a server-made id), ConcurrencyError if it exists."""
        self._host.agent(command.agent)
        self._host.limits.metadata(command.metadata)
        chat = Chat.start(command.agent, actor=command.actor, tenant=command.tenant,
                          metadata=command.metadata, chat_id=command.chat_id)
        self._store.commit(chat)
        self._store.checkin(chat)  # its first message need not load what was just written
        return chat

    @counted
    async def open(self, command: OpenChat, emit: Emit | None = None) -> Chat:
        """A new chat and its first message (`command.text`), and the turn it starts; the
        chat as that turn left it. The chat is recorded by the turn's first commit, with
        what the turn did up to then: one commit and one request fewer than `start` and
        `send`, and a turn that records nothing leaves no chat behind.

        Under an `idempotency_key` the chat's id is the key's (`opened_id`): sent again, the
        start answers that chat as its first turn left it (`_open_again`), and while this
        process runs it, 409. Two processes sent it before either recorded anything both
        run, and the second one's first commit is refused (409): one chat, one effect."""
        self._host.agent(command.agent)
        self._host.limits.metadata(command.metadata)
        key = command.idempotency_key
        if key is None:
            return await self._open(command, emit)
        chat_id = opened_id(command.tenant, command.actor, key)
        command = replace(command, chat_id=chat_id)
        if chat_id in self._opening:
            raise TurnInProgressError(chat_id)
        self._opening.add(chat_id)
        try:
            before = await self.io.off_loop(self._opened_before, command)
            if before is not None:
                return await self._open_again(before, command)
            return await self._open(command, emit)
        finally:
            self._opening.discard(chat_id)

    async def _open(self, command: OpenChat, emit: Emit | None) -> Chat:
        chat = Chat.start(command.agent, actor=command.actor, tenant=command.tenant,
                          metadata=command.metadata, chat_id=command.chat_id)
        loop = self._loop(chat, command.max_turns)
        chat.send_message(command.text, actor=command.actor, fingerprint=loop.agent.fingerprint)
        try:
            await self._cut_on_outage(chat, command.idempotency_key, 0,
                                      self._turn(chat, loop, emit))
        except PolicyMovedError as moved:
            if emit is not None:
                raise
            opened: list[Chat] = []

            async def again() -> TurnResult:  # nothing of it was recorded: open it anew
                opened.append(await self._open(command, None))
                return TurnResult.of(opened[-1], 0, None)

            await self._policy_moved(chat.id, command.tenant, 0, moved.stored, 0,
                                     command.actor, again)
            return opened[-1] if opened else await self.io.off_loop(self._store.get, chat.id)
        return chat

    def _opened_before(self, command: OpenChat) -> Chat | None:
        """The chat a start under this key opened before (None: none); an open with another
        agent, metadata or first message under the key is refused."""
        assert command.chat_id is not None and command.idempotency_key is not None
        try:
            chat = self._store.get(command.chat_id, tenant=command.tenant)
        except ChatNotFoundError:
            return None
        chat.check_not_erasing()  # its first answer is the erased data
        first = next((m for m in chat.state.messages if m.role == "user"), None)
        if (chat.state.agent, jcs(chat.state.metadata), first and first.text) != (
                command.agent, jcs(command.metadata or {}), command.text):  # JSON's equality
            raise IdempotencyKeyReusedError(command.idempotency_key)
        return chat

    async def _open_again(self, chat: Chat, command: OpenChat) -> Chat:
        """The first answer of the chat a start under this key opened: the chat as its first
        turn left it; that turn continued if a store failure cut it (as a resume's key does),
        409 while it may still run elsewhere."""
        assert command.idempotency_key is not None
        ended = await self.io.off_loop(self._first_turn_end, chat.id)
        if ended is not None:
            return chat if ended == chat.version else await self.io.off_loop(
                self._store.get, chat.id, version=ended)
        if not self._host.cut_turns.may_continue(chat, command.idempotency_key, self._clock(),
                                                 ABANDONED_AFTER):
            raise TurnInProgressError(chat.id)
        since = chat.version
        chat.retry(actor=command.actor, now=self._clock(), stale_after=timedelta(0))
        await self._cut_on_outage(chat, command.idempotency_key, since,
                                  self._turn(chat, self._loop(chat, command.max_turns), None))
        return chat

    async def _cut_on_outage(self, chat: Chat, key: str | None, since: int,
                             turn: Awaitable[T]) -> T:
        """`turn` of a command under `key`, its chat begun at version `since`; a store
        failure may follow a commit that landed: the chat's writes are kept for the key's
        retry, which continues the turn if they are still the chat's last (`CutTurns`)."""
        try:
            return await turn
        except UnavailableError:
            if key is not None:
                self._host.cut_turns.cut(chat, key, since)
            raise

    def _first_turn_end(self, chat_id: UUID) -> int | None:
        """The version at which the chat's first turn ended (None: it has not)."""
        return next((e.originator_version for e in self._store.events.get(chat_id)
                     if isinstance(e, TurnFinished)), None)

    @counted
    async def send(self, command: Send, emit: Emit | None = None) -> TurnResult:
        """Send a user message and run the turn."""
        chat = await self.io.off_loop(self._store.checkout, command.chat_id, command.tenant)
        loop = self._loop(chat, command.max_turns)
        since, version = len(chat.state.messages), chat.version
        chat.send_message(command.text, actor=command.actor, fingerprint=loop.agent.fingerprint)
        return await self._or_again(self._run(chat, loop, since, emit), command.chat_id,
                                    command.tenant, version, since, command.actor, emit,
                                    lambda: self.send(command))

    @counted
    async def resume(self, command: Resume, emit: Emit | None = None) -> TurnResult:
        """Decide pending interrupts and continue the turn with a fresh tool budget; while an
        approval waits for more votes, no turn runs."""
        try:
            return await self._resume(command, emit)
        except PolicyMovedError as moved:
            if emit is not None or moved.since is None:
                raise
            return await self._policy_moved(command.chat_id, command.tenant, moved.version,
                                            moved.stored, moved.since, command.actor,
                                            lambda: self.resume(command))
        except ConcurrencyError as lost:
            now_at = await self.io.off_loop(self._explain_lost_vote, command.chat_id,
                                            command.votes, command.decider)
            if lost.fenced_from is None or now_at != lost.fenced_from or emit is not None \
                    or _asked_again.get() >= ASKED_AGAIN:
                raise
            # The chat did not move: another delegated vote of the tenant took the version
            # of its delegations stream the fence wanted; the delegation is still in force.
            token = _asked_again.set(_asked_again.get() + 1)
            try:
                return await self.resume(command, emit)
            finally:
                _asked_again.reset(token)

    async def _resume(self, command: Resume, emit: Emit | None) -> TurnResult:
        chat = await self.io.off_loop(self._store.checkout, command.chat_id, command.tenant)
        chat.check_not_erasing()  # its first answer again too: it is the erased data
        loop = self._loop(chat, command.max_turns)
        key, body_sha = command.idempotency_key, None
        if key is not None:
            body_sha = command.body_sha256()
            if key in chat.state.resume_keys:
                return await self._answer_again(chat, loop, key, body_sha, command.actor, emit)
        since, version = len(chat.state.messages), chat.version
        at = self._clock()
        chat.resume(
            command.respond,
            command.restart,
            actor=command.actor,
            tools=loop.agent.tool_map,
            request_key=key,
            request_sha256=body_sha,
            metadata=command.metadata,
            votes=command.votes,
            decider=command.decider,
            now=at,
            policy=await self._policies_held(chat, loop.agent),
        )
        fenced = bool(command.votes) and command.decider is not None \
            and command.decider.delegation is not None
        if fenced:
            assert command.decider is not None
            await self.io.off_loop(self._fence, chat, command.decider, at,
                                   [v.ref for v in command.votes])
        chat.record_fingerprint(loop.agent.fingerprint)
        try:
            if chat.status == "interrupted":  # votes only, none resolved: record them alone
                position = await self._cut_on_outage(
                    chat, key, version, self.io.off_loop(self._host.commit, chat))
                return self._checkin(chat, await self._answer(chat, since, position, emit))
            return self._checkin(chat, await self._cut_on_outage(
                chat, key, version, loop.run(chat, since, emit)))
        except PolicyMovedError as moved:
            moved.since, moved.version = since, version
            raise
        except ConcurrencyError as lost:
            if fenced:
                lost.fenced_from = version  # the chat's version the fence's commit expected
            raise

    async def _run(self, chat: Chat, loop: TurnLoop, since: int,
                   emit: Emit | None) -> TurnResult:
        return self._checkin(chat, await loop.run(chat, since, emit))

    async def _turn(self, chat: Chat, loop: TurnLoop, emit: Emit | None) -> None:
        """A chat's first turn, answered as the chat: no turn result is made for it (its
        history and interrupts were made twice), unless a stream closes with its events."""
        if emit is not None:
            await self._run(chat, loop, 0, emit)
            return
        await loop.turn(chat, 0, None)
        self._store.checkin(chat)

    async def _or_again(self, turn: Awaitable[TurnResult], chat_id: UUID, tenant: str | None,
                        version: int, since: int, actor: str, emit: Emit | None,
                        again: Callable[[], Awaitable[TurnResult]]) -> TurnResult:
        """`turn`, judged again when a policy change refused one of its commits
        (`_policy_moved`); a stream, which has shown the reply, is refused: the client
        sends again."""
        try:
            return await turn
        except PolicyMovedError as moved:
            if emit is not None:
                raise
            return await self._policy_moved(chat_id, tenant, version, moved.stored, since,
                                            actor, again)

    async def _policy_moved(self, chat_id: UUID, tenant: str | None, version: int,
                            stored: int, since: int, actor: str,
                            again: Callable[[], Awaitable[TurnResult]] | None = None,
                            ) -> TurnResult:
        """A commit of this command was refused: a data policy changed since the book a hold
        was judged by (domain/services/policy_books.py). Nothing of that commit was written.
        If nothing of the command was (the chat is at `version`), it runs again; else, if
        nobody wrote since the refused commit (the chat is at `stored`), its turn goes on
        from there (as a retry would), its new calls held by the policy in force now. Asked
        again ASKED_AGAIN times and refused each time, it is the client's 409. Without
        `again` (the sweeper's expiry), a command that wrote nothing is refused as it was."""
        depth = _asked_again.get()
        if depth >= ASKED_AGAIN:
            raise PolicyMovedError(chat_id, stored)
        token = _asked_again.set(depth + 1)
        try:
            if stored == 0:  # a chat being opened (`open`): nothing of it was recorded
                if again is None:
                    raise PolicyMovedError(chat_id, stored)
                return await again()
            chat = await self.io.off_loop(self._store.checkout, chat_id, tenant)
            if chat.version == version:
                if again is None:
                    raise PolicyMovedError(chat_id, stored)
                return await again()
            if chat.version != stored:  # another request wrote since: it drives the chat
                raise PolicyMovedError(chat_id, stored)
            loop = self._loop(chat, None)
            chat.retry(actor=actor, now=self._clock(), stale_after=timedelta(0))
            return self._checkin(chat, await loop.run(chat, since, emit=None))
        finally:
            _asked_again.reset(token)

    @counted
    async def retry(self, command: Retry, emit: Emit | None = None) -> TurnResult:
        """Continue from the last recorded step; completed tools never run again (a crashed
        process's requested tools run again with the same idempotency key)."""
        chat = await self.io.off_loop(self._store.checkout, command.chat_id, command.tenant)
        loop = self._loop(chat, command.max_turns)
        since, version = len(chat.state.messages), chat.version
        chat.retry(actor=command.actor, now=self._clock(), stale_after=command.stale_after,
                   decider_only=command.decider_only)
        chat.record_fingerprint(loop.agent.fingerprint)
        return await self._or_again(self._run(chat, loop, since, emit), command.chat_id,
                                    command.tenant, version, since, command.actor, emit,
                                    lambda: self.retry(command))

    @counted
    async def withdraw(self, command: Withdraw, emit: Emit | None = None) -> TurnResult:
        """Take pending requests back; the model is told, and the chat goes on."""
        chat = await self.io.off_loop(self._store.get, command.chat_id, tenant=command.tenant)
        since, version = len(chat.state.messages), chat.version
        chat.withdraw(command.refs, decider=command.decider, reason=command.reason)
        return await self._or_again(self._continue(chat, since, emit), command.chat_id,
                                    command.tenant, version, since, command.decider.id, emit,
                                    lambda: self.withdraw(command))

    @counted
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
            chat = await self.io.off_loop(self._store.get, chat_id)
        chat.check_not_erasing()  # the turn would go on: the sweeper records an erased one's alone
        at = at or self._clock()  # `at`: a replay's clock (interlock.replay), where a deadline fell
        since, version = len(chat.state.messages), chat.version
        escalated, expired = chat.escalate(ref, at), chat.expire(ref, at)
        if not (escalated or expired):
            return ""
        try:
            await self._continue(chat)
        except PolicyMovedError as moved:
            # nothing written: due again at the next sweep; else the expiry and what acted
            # after it are recorded, and the turn goes on from there
            await self._policy_moved(chat_id, None, version, moved.stored, since, SWEEPER)
        return "expired" if expired else "escalated"

    async def expire_erased(self, chat_id: UUID, ref: str,
                            at: datetime) -> Literal["expired", ""]:
        """Record the expiry of an erased chat's call alone: its turn cannot go on (the
        model's answer has personal fields), and the expiry has none."""
        chat = await self.io.off_loop(self._store.get, chat_id)
        if not chat.expire(ref, at):
            return ""
        await self.io.off_loop(self._host.commit, chat)
        return "expired"

    async def read(self, chat_ids: Sequence[UUID]) -> dict[UUID, Chat]:
        """These chats as they are now, read together off the event loop."""
        return await self.io.off_loop(self._store.get_many, chat_ids)

    async def batch(self, commands: Awaitable[T]) -> T:
        """Run several commands (one gather) as under way together: their commits meet."""
        return await self.io.batch(commands)

    async def _continue(
        self, chat: Chat, since: int | None = None, emit: Emit | None = None
    ) -> TurnResult:
        """Run the turn on if nothing else is pending; a service without the agent only records."""
        since = len(chat.state.messages) if since is None else since
        if chat.status != "running":
            position = await self.io.off_loop(self._host.commit, chat)
            return await self._answer(chat, since, position, emit)
        if chat.state.agent not in self._host.agents:  # a sweeper without agents: retry goes on
            chat.finish_turn("failed", error=AWAITS_AGENT)
            position = await self.io.off_loop(self._host.commit, chat)
            return await self._answer(chat, since, position, emit)
        return await self._loop(chat, None).run(chat, since, emit)

    def _loop(self, chat: Chat, max_turns: int | None) -> TurnLoop:
        """The turn loop for this chat's agent, with this call's tool budget."""
        agent = self._host.agent(chat.state.agent)
        if max_turns is not None and max_turns < 1:
            raise InvalidRequestError("max_turns must be at least 1", max_turns=max_turns)
        return TurnLoop(
            agent, self._host.models[agent.name], self._commit_turn,
            max_turns or agent.max_turns, self._host.tracer, runner=self._host,
            policies=self._in_force, guards_hold=self._guards_hold,
            still_ours=self._still_ours,
        )

    async def _still_ours(self, chat: Chat, version: int) -> None:
        """ConcurrencyError if the store holds an event of the chat after `version`."""
        newer = await self.io.off_loop(
            lambda: list(self._store.events.get(chat.id, gt=version, limit=1)))
        if newer:
            raise ConcurrencyError(chat.id)

    async def _guards_hold(self, chat: Chat) -> None:
        """Before tools' outputs reach the stream or the model: the kept books their holds
        were judged by are still in force (read now), else nothing of this step is recorded
        and the command is judged again (PolicyMovedError), as a commit they refused would be."""
        if not await self.io.off_loop(self._books.current, list(chat.guards)):
            raise PolicyMovedError(chat.id, chat.version - len(chat.pending_events))

    async def _in_force(self, chat: Chat, agent: str, at: datetime) -> InForce:
        """The chat's tenant's data policies in force at `at` for `agent`'s tools: a kept
        book (its guard on the chat), else read off the loop."""
        tenant = chat.state.tenant
        kept = self._books.kept(tenant)
        book, guard = kept if kept is not None else await self.io.off_loop(
            self._books.book, tenant)
        if guard is not None and guard not in chat.guards:
            chat.guards.append(guard)
        return book.in_force(agent, at)

    async def _policies_held(self, chat: Chat, agent: Agent) -> Callable[[str], Approval | None]:
        """A tool's policy by name as its held calls were held under: the data policy
        version a call records (an edit's stages are judged by it), else the code's."""
        refs = {c.name: c.approval.terms.policy for c in chat.pending_interrupts()
                if c.approval is not None
                and c.approval.terms.policy is not None}
        if not refs:
            return agent.policy
        # A recorded version never changes: the kept book serves if it has them all (no read).
        kept = self._books.kept(chat.state.tenant)
        recorded = {name: kept[0].recorded(ref) for name, ref in refs.items()} if kept else {}
        if not kept or None in recorded.values():
            book = await self.io.off_loop(load_policies, self._store.events, chat.state.tenant)
            recorded = {name: book.recorded(ref) for name, ref in refs.items()}
        return lambda name: recorded[name] if name in recorded else agent.policy(name)

    async def _commit_turn(self, chat: Chat) -> int | None:
        """The loop's commit, off the event loop: concurrent turns' appends commit together.
        A refusal by a hold's guard is a PolicyMovedError (the chat itself did not move)."""
        # the commit takes the list away (a refused one does not give it back)
        guards, stored = chat.guards, chat.version - len(chat.pending_events)
        try:
            return await self.io.off_loop(self._host.commit, chat)
        except ConcurrencyError:
            if not guards:
                raise
            refused: bool = await self.io.off_loop(self._refused_by_guard, chat.id, stored,
                                                   guards)
            if refused:
                raise PolicyMovedError(chat.id, stored) from None
            raise

    def _refused_by_guard(self, chat_id: UUID, stored: int, guards: list[Guard]) -> bool:
        """Whether a refused commit of a chat stored at `stored` was refused by its guards
        alone: a guarded stream moved and the chat did not (else it lost a race: a 409)."""
        moved = self._books.moved(guards)
        return moved and not list(self._store.events.get(chat_id, gt=stored, limit=1))

    async def _answer(
        self, chat: Chat, since: int, position: int | None, emit: Emit | None
    ) -> TurnResult:
        result = TurnResult.of(chat, since, position)
        if emit is not None:
            for event in result.closing_events():
                await emit(event)
        return result

    async def _answer_again(self, chat: Chat, loop: TurnLoop, key: str, body_sha: str,
                            actor: str, emit: Emit | None) -> TurnResult:
        """The first answer under `key`; its turn continued if a store failure cut it."""
        try:
            return await self.io.off_loop(self._first_answer, chat, key, body_sha)
        except TurnInProgressError:
            if not self._host.cut_turns.may_continue(chat, key, self._clock(), ABANDONED_AFTER):
                raise
        since, version = chat.state.resume_keys[key].since, chat.version
        chat.retry(actor=actor, now=self._clock(), stale_after=timedelta(0))
        return self._checkin(chat, await self._cut_on_outage(chat, key, version,
                                                             loop.run(chat, since, emit)))

    def _first_answer(self, chat: Chat, key: str, body_sha: str) -> TurnResult:
        use = chat.state.resume_keys[key]
        if use.request_sha256 != body_sha:
            raise IdempotencyKeyReusedError(key)
        votes_only: int | None = None  # a request of votes that settled nothing ran no turn
        for event in self._store.events.get(chat.id, gt=use.version - 1):
            if isinstance(event, ApprovalVoted) and event.request_key == key:
                votes_only = event.originator_version if event.outcome == "pending" else None
                continue
            if votes_only is not None:
                break
            if isinstance(event, TurnFinished):
                then = self._store.get(chat.id, version=event.originator_version)
                return TurnResult.of(then, use.since, None)
        if votes_only is not None:
            return TurnResult.of(self._store.get(chat.id, version=votes_only), use.since, None)
        raise TurnInProgressError()

    def _fence(self, chat: Chat, decider: Decider, at: datetime, refs: list[str]) -> None:
        """A delegated vote commits with its delegation's use, at the next version of the
        tenant's delegations stream, checked in force again at the vote's time: a
        revocation racing it either commits first (the vote is then a conflict, refused)
        or after it (domain/delegations.py)."""
        delegations = replay(chat.state.tenant, self._store.stream(delegations_id(
            chat.state.tenant)))
        delegations.use(decider, at, chat.id, refs)
        chat.companions.extend(delegations.seal(self._store.sign))

    def _explain_lost_vote(self, chat_id: UUID, votes: Sequence[VoteEntry],
                           decider: Decider | None = None) -> int | None:
        """A vote that lost a race says what won (expiry, another decision, a revocation of
        its delegation) when it can; else the chat's version now (None: no votes)."""
        if not votes:
            return None
        chat = self._store.get(chat_id)
        if decider is not None and decider.delegation is not None:
            replay(chat.state.tenant, self._store.stream(delegations_id(chat.state.tenant))
                   ).in_force(UUID(decider.delegation), decider.id, self._clock())
        for entry in votes:
            held_call(chat.state.calls, entry, self._clock())  # raises the winner's story, if any
        return chat.version

    def _checkin(self, chat: Chat, result: TurnResult) -> TurnResult:
        """The command is over and all it recorded committed: later commands may reuse it."""
        self._store.checkin(chat)
        return result
