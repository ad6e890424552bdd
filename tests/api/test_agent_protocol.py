"""LangGraph's own client (`langgraph-sdk`) drives Interlock through Agent Protocol: threads,
runs, interrupts and `Command(resume=...)`, under the same keys, tenants and rules as /v1."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from interlock.domain.limits import Limits
from tests.api.agents import PAID
from tests.api.conftest import ClientFor, Live

TRANSFER = {"messages": [{"role": "user", "content": "Transfer $500 to savings."}]}


Sdk = Callable[[str], SyncLangGraphClient]


@pytest.fixture
def sdk(live: Live) -> Iterator[Sdk]:
    """`sdk("dana")`: LangGraph's client with that principal's key, closed after the test."""
    made: list[SyncLangGraphClient] = []

    def make(who: str) -> SyncLangGraphClient:
        made.append(get_sync_client(url=f"{live.url}/agent-protocol", api_key=None,
                                    headers={"Authorization": f"Bearer key-{who}"}))
        return made[-1]

    yield make
    for client in made:
        client.close()


def _refused(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        call()
    response = caught.value.response
    return response.status_code, response.json()["error"]


def _asked(client: SyncLangGraphClient, agent: str, text: str) -> tuple[str, dict[str, Any]]:
    thread = client.threads.create(metadata={"graph_id": agent})
    out = client.runs.wait(thread["thread_id"], agent,
                           input={"messages": [{"role": "user", "content": text}]})
    return thread["thread_id"], out


def test_a_langgraph_client_runs_the_banking_agent_through_its_interrupt(
    sdk: Sdk, client_for: ClientFor
) -> None:
    dana = sdk("dana")
    [assistant] = dana.assistants.search(graph_id="bankingAgent")
    assert assistant["assistant_id"] == "bankingAgent" and assistant["metadata"]["fingerprint"]
    thread = dana.threads.create(metadata={"graph_id": "bankingAgent", "case": "c-1"})
    tid = thread["thread_id"]
    out = dana.runs.wait(tid, "bankingAgent", input=TRANSFER)
    [asked] = out["__interrupt__"]
    assert asked["value"]["action_request"] == {"action": "userApproval", "args": {
        "action": "transfer", "details": "Transfer $500 to savings"}}
    state = dana.threads.get_state(tid)
    assert state["next"] == ["tools"] and state["tasks"][0]["interrupts"][0]["id"] == asked["id"]
    assert dana.threads.get(tid)["status"] == "interrupted"

    done = dana.runs.wait(tid, "bankingAgent", command={"resume": {"approved": True}})
    assert "__interrupt__" not in done
    assert done["messages"][-1]["type"] == "ai"
    assert done["messages"][-1]["content"].startswith("Done. Your checking balance is now")
    assert [m["type"] for m in done["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert dana.threads.get(tid)["status"] == "idle"
    assert dana.threads.get(tid)["metadata"]["case"] == "c-1"

    history = dana.threads.get_history(tid)
    versions = [int(s["checkpoint"]["checkpoint_id"]) for s in history]
    assert versions == sorted(versions, reverse=True) and len(versions) == 2
    assert history[0]["next"] == [] and history[1]["interrupts"][0]["id"] == asked["id"]
    assert history[0]["parent_checkpoint"]["checkpoint_id"] == str(versions[1])
    # the same decision, recorded as /v1 records it: the audit does not know the protocol
    [decided] = client_for("carol").decisions(chat_id=tid)["items"]
    assert decided["actor"] == "dana" and decided["kind"] == "respond"


def test_another_tenant_sees_no_thread_and_runs_nothing(sdk: Sdk) -> None:
    tid, _ = _asked(sdk("dana"), "bankingAgent", "Transfer $5 to savings.")
    eve = sdk("eve")
    assert _refused(lambda: eve.threads.get(tid))[0] == 404
    status, error = _refused(lambda: eve.runs.wait(tid, "bankingAgent",
                                                   command={"resume": {"approved": True}}))
    assert (status, error["code"]) == (404, "chat_not_found")


def test_a_stale_resume_is_refused_and_says_who_decided(sdk: Sdk) -> None:
    dana = sdk("dana")
    tid, _ = _asked(dana, "bankingAgent", "Transfer $5 to savings.")
    dana.runs.wait(tid, "bankingAgent", command={"resume": {"approved": True}})
    status, error = _refused(
        lambda: dana.runs.wait(tid, "bankingAgent", command={"resume": {"approved": True}}))
    assert (status, error["code"]) == (409, "interrupt_not_pending")
    assert error["details"]["decided_by"] == "dana"


def test_four_eyes_holds_through_the_protocol(sdk: Sdk) -> None:
    dana = sdk("dana")
    tid, out = _asked(dana, "opsAgent", "deploy billing")
    assert out["__interrupt__"][0]["value"]["action_request"]["action"] == "deploy"
    status, error = _refused(lambda: dana.runs.wait(tid, "opsAgent",
                                                    command={"resume": {"status": "ok"}}))
    assert (status, error["code"]) == (403, "forbidden")
    done = sdk("bob").runs.wait(tid, "opsAgent", command={"resume": {"status": "ok"}})
    assert "__interrupt__" not in done


def test_a_held_call_takes_agent_inbox_answers_as_votes_of_its_quorum(sdk: Sdk) -> None:
    tid, out = _asked(sdk("alice"), "payAgent", "pay 500 bob-corp")
    [held] = out["__interrupt__"]
    assert held["value"]["config"]["allow_accept"] and held["value"]["interlock"]["approval"]
    sha = held["value"]["interlock"]["input_sha256"]
    first = sdk("tina").runs.wait(
        tid, "payAgent", command={"resume": {"type": "accept", "input_sha256": sha}})
    assert first["__interrupt__"] and [p for p in PAID if p["chat"] == tid] == []
    done = sdk("tom").runs.wait(
        tid, "payAgent", command={"resume": {held["id"]: {"type": "accept", "input_sha256": sha}}})
    assert "__interrupt__" not in done and len([p for p in PAID if p["chat"] == tid]) == 1
    status, error = _refused(lambda: sdk("tina").runs.wait(
        tid, "payAgent", command={"resume": {"type": "maybe"}}))
    assert status == 409 and error["code"] == "interrupt_not_pending"


def test_a_run_streams_its_metadata_and_values(sdk: Sdk) -> None:
    dana = sdk("dana")
    thread = dana.threads.create(metadata={"graph_id": "bankingAgent"})
    parts = list(dana.runs.stream(thread["thread_id"], "bankingAgent", input=TRANSFER))
    assert [p.event for p in parts] == ["metadata", "values"]
    assert parts[1].data["__interrupt__"][0]["value"]["action_request"]["action"] == "userApproval"
    run = dana.runs.get(thread["thread_id"], parts[0].data["run_id"])
    assert run["status"] == "interrupted" and run["thread_id"] == thread["thread_id"]


def test_what_interlock_does_not_do_is_refused_with_the_reason(sdk: Sdk) -> None:
    dana = sdk("dana")
    status, error = _refused(lambda: dana.threads.create(thread_id="mine"))
    assert status == 422 and "made by Interlock" in error["message"]
    status, error = _refused(lambda: dana.threads.create(metadata={"case": "c-9"}))
    assert status == 422 and "no agent keeps no metadata" in error["message"]
    tid, _ = _asked(dana, "bankingAgent", "hello")
    status, error = _refused(lambda: dana.runs.wait(tid, "opsAgent", input=TRANSFER))
    assert status == 422 and "one agent per chat" in error["message"]
    status, error = _refused(lambda: dana.runs.wait(tid, "bankingAgent", input={"x": 1}))
    assert status == 422 and "messages" in error["message"]
    assert _refused(lambda: dana.assistants.get("nobody"))[0] == 404
    assert _refused(lambda: sdk("carol").threads.create(
        metadata={"graph_id": "bankingAgent"}))[0] == 403


def test_the_sample_in_the_docs_runs(live: Live, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "agent-protocol.md").read_text()
    [sample] = re.findall(r"```python\n(.*?)```", text, re.S)
    monkeypatch.setenv("URL", live.url)  # as a reader runs it: the names it uses, it defines
    monkeypatch.setenv("API_KEY", "key-dana")
    exec(compile(sample, "docs/agent-protocol.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("{'action': 'userApproval'")
    assert printed[1].startswith("Done. Your checking balance is now $")
    assert printed[2:] == ["('tools',)", "2"]


def test_a_malformed_answer_to_a_held_call_is_refused_and_records_nothing(sdk: Sdk) -> None:
    tid, _ = _asked(sdk("alice"), "payAgent", "pay 500 bob-corp")
    tina = sdk("tina")
    for answer, says in (({"type": "accept", "input_sha256": "not-a-hash"}, "input_sha256"),
                         ({"type": "maybe"}, "accept"),
                         ({"type": "edit", "args": {"amount": 400, "to": "bob-corp"}}, "reason"),
                         ({"type": "edit", "args": {"amount": 400, "to": "bob-corp"},
                           "reason": "  "}, "reason")):
        status, error = _refused(lambda a=answer: tina.runs.wait(
            tid, "payAgent", command={"resume": a}))
        assert (status, error["code"]) == (422, "invalid_request") and says in error["message"]
    assert tina.threads.get_state(tid)["tasks"][0]["interrupts"][0]["value"][
        "interlock"]["approval"]["votes"] == []


def test_a_thread_made_with_no_agent_takes_the_agent_of_its_first_run_and_keeps_it(
    sdk: Sdk
) -> None:
    dana = sdk("dana")
    tid = dana.threads.create()["thread_id"]  # as LangGraph's clients make threads
    assert dana.threads.get(tid)["status"] == "idle"
    assert dana.threads.get_state(tid)["values"] == {"messages": []}
    assert dana.threads.get_history(tid) == []
    eve = sdk("eve")  # another tenant can neither see the thread nor begin its chat
    assert _refused(lambda: eve.threads.get(tid))[0] == 404
    status, error = _refused(lambda: eve.runs.wait(tid, "bankingAgent", input=TRANSFER))
    assert (status, error["code"]) == (404, "chat_not_found")
    status, error = _refused(lambda: dana.runs.wait(tid, "bankingAgent",
                                                    command={"resume": {"approved": True}}))
    assert status == 422 and "no run yet" in error["message"]

    out = dana.runs.wait(tid, "bankingAgent", input=TRANSFER)
    assert out["__interrupt__"][0]["value"]["action_request"]["action"] == "userApproval"
    assert dana.threads.get(tid)["metadata"]["graph_id"] == "bankingAgent"
    status, error = _refused(lambda: dana.runs.wait(tid, "opsAgent", input=TRANSFER))
    assert status == 422 and "one agent per chat" in error["message"]
    done = dana.runs.wait(tid, "bankingAgent", command={"resume": {"approved": True}})
    assert done["messages"][-1]["content"].startswith("Done. Your checking balance is now")


def test_four_eyes_holds_on_a_thread_whose_first_run_named_its_agent(sdk: Sdk) -> None:
    dana = sdk("dana")
    tid = dana.threads.create()["thread_id"]
    dana.runs.wait(tid, "opsAgent", input={"messages": [{"role": "user",
                                                         "content": "deploy billing"}]})
    status, error = _refused(lambda: dana.runs.wait(tid, "opsAgent",
                                                    command={"resume": {"status": "ok"}}))
    assert (status, error["code"]) == (403, "forbidden")
    assert "__interrupt__" not in sdk("bob").runs.wait(tid, "opsAgent",
                                                       command={"resume": {"status": "ok"}})


def test_a_run_without_a_thread_makes_one_for_the_run(sdk: Sdk) -> None:
    dana = sdk("dana")
    made: list[Any] = []
    out = dana.runs.wait(None, "bankingAgent", input=TRANSFER, on_run_created=made.append)
    [where] = made
    assert out["__interrupt__"][0]["value"]["action_request"]["action"] == "userApproval"
    tid = where["thread_id"]
    assert dana.threads.get(tid)["metadata"]["graph_id"] == "bankingAgent"
    assert _refused(lambda: sdk("eve").threads.get(tid))[0] == 404
    done = dana.runs.wait(tid, "bankingAgent", command={"resume": {"approved": True}})
    assert "__interrupt__" not in done

    run = dana.runs.create(None, "opsAgent", input={"messages": [
        {"role": "user", "content": "deploy billing"}]})
    assert run["status"] == "interrupted" and run["assistant_id"] == "opsAgent"
    parts = list(dana.runs.stream(None, "bankingAgent", input=TRANSFER))
    assert [p.event for p in parts] == ["metadata", "values"]
    assert dana.threads.get(parts[0].data["thread_id"])["status"] == "interrupted"

    status, error = _refused(lambda: dana.runs.wait(None, "bankingAgent",
                                                    command={"resume": {"approved": True}}))
    assert status == 422 and "resumes nothing" in error["message"]
    assert _refused(lambda: sdk("carol").runs.wait(None, "bankingAgent", input=TRANSFER))[0] == 403
    assert _refused(lambda: dana.runs.wait(None, "nobody", input=TRANSFER))[0] == 404


Remote = Callable[[str, str], RemoteGraph]


@pytest.fixture
def remote(live: Live) -> Iterator[Remote]:
    """`remote("dana", "bankingAgent")`: LangGraph's RemoteGraph of that agent, as `dana`."""
    made: list[RemoteGraph] = []

    def make(who: str, agent: str) -> RemoteGraph:
        made.append(RemoteGraph(agent, url=f"{live.url}/agent-protocol", api_key=None,
                                headers={"Authorization": f"Bearer key-{who}"}))
        return made[-1]

    yield make
    for graph in made:
        assert graph.sync_client is not None
        graph.sync_client.close()


def _thread_of(sdk: Sdk, who: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": sdk(who).threads.create()["thread_id"]}}


def test_remote_graph_invokes_reads_its_state_and_resumes_with_a_command(
    remote: Remote, sdk: Sdk
) -> None:
    graph = remote("dana", "bankingAgent")
    config = _thread_of(sdk, "dana")
    out = graph.invoke(TRANSFER, config)
    [asked] = out["__interrupt__"]
    state = graph.get_state(config)  # POST /threads/{id}/state/checkpoint
    assert state.next == ("tools",) and [i.id for i in state.interrupts] == [asked["id"]]
    paused_at = state.config["configurable"]["checkpoint_id"]

    done = graph.invoke(Command(resume={"approved": True}), config)
    assert "__interrupt__" not in done
    assert done["messages"][-1]["content"].startswith("Done. Your checking balance is now")
    history = list(graph.get_state_history(config))
    assert [s.config["configurable"]["checkpoint_id"] for s in history][1] == paused_at
    assert history[0].next == () and history[0].parent_config == state.config | {
        "configurable": {**state.config["configurable"], "checkpoint_map": {}}}
    then = graph.get_state({"configurable": {**config["configurable"],
                                             "checkpoint_id": paused_at}})
    assert then.next == ("tools",) and then.values == state.values
    older = list(graph.get_state_history(config, before=history[0].config))
    assert [s.config["configurable"]["checkpoint_id"] for s in older] == [paused_at]

    stateless = graph.invoke(TRANSFER)  # no thread: /runs/stream makes one
    assert stateless["__interrupt__"][0]["value"]["action_request"]["action"] == "userApproval"


def test_remote_graph_streams_updates_messages_and_values(remote: Remote, sdk: Sdk) -> None:
    graph = remote("dana", "bankingAgent")
    config = _thread_of(sdk, "dana")
    parts = list(graph.stream(TRANSFER, config, stream_mode=["updates", "messages", "values"]))
    assert [p.event for p in parts] == ["messages", "updates", "updates", "values"]
    updates = [p.data for p in parts if p.event == "updates"]
    assert [list(u) for u in updates] == [["model"], ["__interrupt__"]]
    [(message, meta)] = [p.data for p in parts if p.event == "messages"]
    assert message["type"] == "ai" and meta["langgraph_node"] == "model"
    assert message["tool_calls"][0]["name"] == "userApproval"

    resumed = list(graph.stream(Command(resume={"approved": True}), config,
                                stream_mode="updates"))
    assert [next(iter(u)) for u in resumed] == ["tools", "model", "tools", "model"]
    assert resumed[-1]["model"]["messages"][0]["content"].startswith("Done.")


def test_remote_graph_is_refused_what_interlock_does_not_do_with_the_rule(
    remote: Remote, sdk: Sdk
) -> None:
    graph = remote("dana", "bankingAgent")
    config = _thread_of(sdk, "dana")
    graph.invoke(TRANSFER, config)
    for mode in ("debug", "custom", "checkpoints", "tasks"):
        status, error = _refused(lambda m=mode: list(graph.stream(TRANSFER, config,
                                                                   stream_mode=m)))
        assert status == 422 and f"stream_mode '{mode}' is not served" in error["message"]
    status, error = _refused(lambda: graph.update_state(config, {"messages": []}))
    assert status == 422 and error["details"]["rule"] == "state_is_the_event_log"
    status, error = _refused(lambda: graph.invoke(Command(update={"messages": []}), config))
    assert status == 422 and error["details"]["rule"] == "state_is_the_event_log"
    status, error = _refused(lambda: graph.invoke(TRANSFER, config, interrupt_before=["tools"]))
    assert status == 422 and "interrupt_before" in error["message"]
    status, error = _refused(lambda: graph.get_state(
        {"configurable": {**config["configurable"], "checkpoint_id": "not-a-version"}}))
    assert status == 422 and "chat version" in error["message"]
    assert sdk("dana").threads.get_state(config["configurable"]["thread_id"])["next"] == ["tools"]


def test_four_eyes_and_tenants_hold_through_remote_graph(remote: Remote, sdk: Sdk) -> None:
    config = _thread_of(sdk, "dana")
    remote("dana", "opsAgent").invoke({"messages": [{"role": "user",
                                                      "content": "deploy billing"}]}, config)
    status, error = _refused(lambda: remote("dana", "opsAgent").invoke(
        Command(resume={"status": "ok"}), config))
    assert (status, error["code"]) == (403, "forbidden")
    assert _refused(lambda: remote("eve", "opsAgent").get_state(config))[0] == 404
    done = remote("bob", "opsAgent").invoke(Command(resume={"status": "ok"}), config)
    assert "__interrupt__" not in done


def test_history_of_a_300_turn_thread_pages_under_the_byte_budget(
    live: Live, sdk: Sdk
) -> None:
    """Each page at most INTERLOCK_HISTORY_BYTES (whole states, at least one); `before` its
    last checkpoint asks on, and the pages together are every turn's state once."""
    dana = sdk("dana")
    tid = dana.threads.create(metadata={"graph_id": "bankingAgent"})["thread_id"]

    async def fill() -> None:
        for i in range(300):
            await live.service.send(UUID(tid), f"turn {i} " + "x" * 200, actor="dana",
                                    tenant="acme")

    asyncio.run(fill())
    budget = 1 << 20
    live.service.limits = Limits(history_bytes=budget)
    seen: list[int] = []
    before: dict[str, Any] | None = None
    while True:
        page = dana.threads.get_history(tid, limit=100, before=before)
        if not page:
            break
        assert len(json.dumps(page, separators=(",", ":"), ensure_ascii=False)) <= budget
        assert len(page) < 100 or not seen  # the budget, not the limit, ends the old pages
        seen += [int(s["checkpoint"]["checkpoint_id"]) for s in page]
        before = page[-1]["checkpoint"]
    assert seen == sorted(set(seen), reverse=True) and len(seen) == 300  # each turn's end
    assert len(seen) > 100  # more than one page
    assert len(dana.threads.get_history(tid, limit=5)) == 5  # a small page is still `limit`
