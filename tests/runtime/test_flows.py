"""The seed's three flows, on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

from interlock.bootstrap import build_service
from interlock.domain import Interlock, RespondEntry, RestartEntry
from interlock.domain.chat.approval_events import AgentFingerprinted
from interlock.domain.chat.events import UserMessageSent
from interlock.examples.banking import AGENTS, LEDGER
from tests.kit import call, make_app, run, say


def event_types(app: Interlock, chat_id: object) -> list[str]:
    return [type(e).__name__ for e in app.chat_events(chat_id)]  # type: ignore[arg-type]


def test_respond_flow_banking(store: str) -> None:
    app = build_service(store, AGENTS)
    chat = app.start_chat("bankingAgent", actor="alice")
    before = LEDGER.transfers

    sent = run(app.send(chat.id, "Transfer $500 to savings.", actor="alice"))
    assert sent.finish_reason == "interrupted"
    [interrupt] = sent.interrupts
    assert (interrupt.name, interrupt.input["details"]) == (
        "userApproval",
        "Transfer $500 to savings",
    )
    assert app.get_chat(chat.id).status == "interrupted"

    done = run(
        app.resume(
            chat.id,
            actor="bob",
            respond=[
                RespondEntry(ref=interrupt.ref, name="userApproval", output={"approved": True})
            ],
        )
    )
    assert done.finish_reason == "stop"
    assert done.text.startswith("Done. Your checking balance is now")
    assert LEDGER.transfers == before + 1
    assert [m.role for m in done.messages] == ["tool", "model", "tool", "model"]
    assert event_types(app, chat.id) == [
        "ChatStarted",
        "UserMessageSent",  # with the fingerprint of the agent definition that runs the turn
        "ModelResponded",
        "ToolRequested",  # one per request of the reply before it
        "Interrupted",
        "TurnFinished",
        "Responded",
        "ModelResponded",
        "ToolRequested",
        "ToolCompleted",
        "ModelResponded",
        "TurnFinished",
    ]
    responded = app.chat_events(chat.id)[6]
    assert responded.actor == "bob"  # type: ignore[attr-defined]
    banking = app.agent("bankingAgent")
    sent_event = app.chat_events(chat.id)[1]
    assert sent_event.fingerprint == banking.fingerprint  # type: ignore[attr-defined]
    assert app.get_chat(chat.id).state.fingerprint == banking.fingerprint


def test_a_changed_agent_is_recorded_with_the_next_message_only(store: str) -> None:
    """The first message records the agent's fingerprint, later ones under the same agent
    record none, a message after the definition changed records the new one; a resume that
    finds it changed records it as an AgentFingerprinted event of its own."""
    app = build_service(store, AGENTS)
    first = app.agent("bankingAgent")
    chat = app.start_chat("bankingAgent", actor="alice")
    run(app.send(chat.id, "hello", actor="alice"))
    run(app.send(chat.id, "hello again", actor="alice"))
    terse = replace(first, system="Be terse.")
    app.agents["bankingAgent"] = terse
    [ask] = run(app.send(chat.id, "Transfer $500 to savings.", actor="alice")).interrupts
    sent = [e for e in app.chat_events(chat.id) if isinstance(e, UserMessageSent)]
    assert [e.fingerprint for e in sent] == [first.fingerprint, None, terse.fingerprint]
    assert "AgentFingerprinted" not in event_types(app, chat.id)
    app.agents["bankingAgent"] = first
    run(app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name="userApproval", output={"approved": False})]))
    printed = [e for e in app.chat_events(chat.id) if isinstance(e, AgentFingerprinted)]
    assert [e.fingerprint for e in printed] == [first.fingerprint]
    assert app.get_chat(chat.id).state.fingerprint == first.fingerprint


def test_restart_with_original_input_runs_tool_again_with_resumed(store: str) -> None:
    app, _, effects = make_app(store, [call(("deploy", {"env": "prod"})), say("deployed")])
    chat = app.start_chat("ops", actor="alice")
    [interrupt] = run(app.send(chat.id, "ship it", actor="alice")).interrupts
    assert interrupt.metadata == {"needs": "ok"} and effects.deploys == []

    done = run(
        app.resume(
            chat.id,
            actor="bob",
            restart=[RestartEntry(ref=interrupt.ref, name="deploy", resumed_metadata={"ok": True})],
        )
    )
    assert done.finish_reason == "stop" and done.text == "deployed"
    assert effects.deploys == [
        {"env": "prod", "version": "1.0", "key": f"{chat.id}:{interrupt.ref}:2"}
    ]
    restarted_ctx = effects.contexts[-1]
    assert restarted_ctx.resumed == {"ok": True} and restarted_ctx.original_input is None
    assert restarted_ctx.attempt == 2


def test_restart_with_replaced_input_keeps_both(store: str) -> None:
    app, script, effects = make_app(store, [call(("deploy", {"env": "prod"})), say("staged")])
    chat = app.start_chat("ops", actor="alice")
    [interrupt] = run(app.send(chat.id, "ship it", actor="alice")).interrupts

    run(
        app.resume(
            chat.id,
            actor="bob",
            restart=[
                RestartEntry(
                    ref=interrupt.ref,
                    name="deploy",
                    replace_input={"env": "staging", "version": "2.0"},
                )
            ],
        )
    )
    assert effects.deploys[-1]["env"] == "staging"
    assert effects.contexts[-1].original_input == {"env": "prod"}
    restarted = next(e for e in app.chat_events(chat.id) if type(e).__name__ == "Restarted")
    assert restarted.original_input == {"env": "prod"}  # type: ignore[attr-defined]
    assert restarted.replace_input == {"env": "staging", "version": "2.0"}  # type: ignore[attr-defined]
    assert restarted.replaced_input_sha256 and restarted.input_sha256  # type: ignore[attr-defined]
    tool_message = script.requests[-1].messages[-1]
    assert tool_message.content[0].tool_response.output == {"deployed": "staging", "version": "2.0"}  # type: ignore[union-attr]


def test_parallel_requests_only_some_interrupt_others_run_once(store: str) -> None:
    app, script, effects = make_app(
        store,
        [
            call(
                ("lookup", {"key": "a"}),
                ("approve", {"action": "x"}),
                ("deploy", {"env": "staging"}),
                ("approve", {"action": "y"}),
            ),
            say("all done"),
        ],
    )
    chat = app.start_chat("ops", actor="alice")
    sent = run(app.send(chat.id, "do four things", actor="alice"))
    assert [i.input for i in sent.interrupts] == [{"action": "x"}, {"action": "y"}]
    assert effects.lookups == ["a"] and len(effects.deploys) == 1

    first, second = sent.interrupts
    partial = run(
        app.resume(
            chat.id,
            actor="bob",
            respond=[RespondEntry(ref=first.ref, name="approve", output={"approved": True})],
        )
    )
    assert partial.finish_reason == "interrupted"
    assert [i.ref for i in partial.interrupts] == [second.ref]
    assert len(script.requests) == 1  # the model is not called while one is pending

    done = run(
        app.resume(
            chat.id,
            actor="bob",
            respond=[
                RespondEntry(
                    ref=second.ref, name="approve", output={"approved": False, "note": "no"}
                )
            ],
        )
    )
    assert done.finish_reason == "stop"
    assert effects.lookups == ["a"] and len(effects.deploys) == 1  # nothing re-ran
    tool_message = script.requests[-1].messages[-1]
    assert [p.tool_response.name for p in tool_message.content] == [  # type: ignore[union-attr]
        "lookup",
        "approve",
        "deploy",
        "approve",
    ]  # request order, not decision order
    assert tool_message.content[3].tool_response.output == {"approved": False, "note": "no"}  # type: ignore[union-attr]


def test_restarted_tool_may_interrupt_again_on_the_same_ref(store: str) -> None:
    app, _, effects = make_app(store, [call(("deploy", {"env": "prod"})), say("ok")])
    chat = app.start_chat("ops", actor="alice")
    [interrupt] = run(app.send(chat.id, "ship", actor="alice")).interrupts
    again = run(
        app.resume(
            chat.id,
            actor="bob",
            restart=[
                RestartEntry(ref=interrupt.ref, name="deploy", resumed_metadata={"ok": False})
            ],
        )
    )
    assert again.finish_reason == "interrupted"
    assert [i.ref for i in again.interrupts] == [interrupt.ref]
    done = run(
        app.resume(
            chat.id,
            actor="bob",
            restart=[RestartEntry(ref=interrupt.ref, name="deploy", resumed_metadata={"ok": True})],
        )
    )
    assert done.finish_reason == "stop" and len(effects.deploys) == 1


def test_model_refs_repeated_or_missing_are_made_unique(store: str) -> None:
    app, _, _ = make_app(
        store,
        [
            call(
                ("approve", {"action": "a"}, "r1"),
                ("approve", {"action": "b"}, "r1"),
                ("approve", {"action": "c"}),
            ),
        ],
    )
    chat = app.start_chat("ops", actor="alice")
    refs = [i.ref for i in run(app.send(chat.id, "go", actor="alice")).interrupts]
    assert refs[0] == "r1" and len(set(refs)) == 3
