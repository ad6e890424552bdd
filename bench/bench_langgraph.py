"""The banking cycle over HTTP against LangGraph's own loop with its PostgreSQL checkpointer.

    .venv/bin/python -m bench.bench_langgraph [--cycles 200] [--rounds 4] [--baseline DIR]

Interlock: `interlock serve` on PostgreSQL (views, encryption, access log and sweeper on, as
users run it), one client over keep-alive HTTP: the chat started with its message, then
resumed, as LangGraph's loop below invokes, then resumes (the banking agent: an approval
interrupt, then the transfer, then the reply; three model calls). A baseline from before
Dec 2026 is sent three requests (create, send, resume).

LangGraph: the same conversation as a `StateGraph` in process (no HTTP at all): a model node
that plays the same script, `interrupt()` before the payment, the payment node, the reply;
`PostgresSaver` (langgraph-checkpoint-postgres) as its checkpointer on the same PostgreSQL,
a new thread a cycle, resumed with `Command(resume=...)`. This is LangGraph's cheapest form:
its server would add HTTP, its queue and its own store.

The loops are interleaved in rounds in one run (Interlock, LangGraph, Interlock, ...), so
whatever the machine does meanwhile falls on both; the ratio is Interlock's rate over
LangGraph's, per round and overall. `--baseline DIR` serves a second Interlock from an older
checkout in the same rounds (its ratio against LangGraph too).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from bench.bench_http import Figures, run_wire, serve
from bench.common import PG_URL, scratch_schema

TEXT = "Transfer $100 to savings."


class State(TypedDict, total=False):
    messages: list[dict[str, Any]]
    transfer: dict[str, Any]
    approved: bool
    balance: float


def model(state: State) -> State:
    """The banking script's first model call: the user asks, the model asks for approval."""
    text = state["messages"][-1]["content"]
    amount = float(text.split("$")[1].split()[0])
    call = {"action": "transfer", "amount": amount, "to_account": "savings"}
    return {"messages": [*state["messages"], {"role": "model", "tool_call": call}],
            "transfer": call}


def approval(state: State) -> State:
    """The interrupt before the payment: the human's answer comes back through `Command`."""
    answer = interrupt({"reason": "transfer", "details": state["transfer"]})
    return {"approved": bool(answer.get("approved")),
            "messages": [*state["messages"], {"role": "tool", "content": answer}]}


def pay(state: State) -> State:
    """The model's second call asks for the transfer; the payment runs."""
    call = state["transfer"]
    balance = 5000.0 - call["amount"] if state.get("approved") else 5000.0
    return {"balance": balance,
            "messages": [*state["messages"], {"role": "model", "tool_call": call},
                         {"role": "tool", "content": {"status": "done", "balance": balance}}]}


def reply(state: State) -> State:
    """The model's third call: the reply."""
    text = f"Done: checking holds ${state['balance']}."
    return {"messages": [*state["messages"], {"role": "model", "content": text}]}


def build_graph(saver: PostgresSaver) -> Any:
    graph = StateGraph(State)
    for name, node in (("model", model), ("approval", approval), ("pay", pay), ("reply", reply)):
        graph.add_node(name, node)
    graph.add_edge(START, "model")
    graph.add_edge("model", "approval")
    graph.add_edge("approval", "pay")
    graph.add_edge("pay", "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=saver)


def langgraph_cycles(app: Any, cycles: int) -> tuple[Figures, float]:
    figures = Figures()
    start = time.perf_counter()
    for _ in range(cycles):
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        t0 = time.perf_counter()
        held = app.invoke({"messages": [{"role": "user", "content": TEXT}]}, config)
        t1 = time.perf_counter()
        assert "__interrupt__" in held, held
        done = app.invoke(Command(resume={"approved": True}), config)
        assert done["balance"] == 4900.0, done
        figures.add(t1 - t0, time.perf_counter() - t1)
    return figures, time.perf_counter() - start


def langgraph_loop(schema_url: str) -> tuple[Callable[[int], tuple[Figures, float]], Any]:
    """LangGraph on its own schema of the same database (PostgresSaver creates its tables)."""
    url, schema = schema_url.split("?schema=")
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0,
                           options=f"-c search_path={schema}")
    saver = PostgresSaver(conn)  # type: ignore[arg-type]
    saver.setup()
    app = build_graph(saver)
    return (lambda n: langgraph_cycles(app, n)), conn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200, help="cycles a round and loop")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also serve Interlock from this older checkout in the same rounds")
    args = parser.parse_args()
    print(f"PostgreSQL: {PG_URL}; {args.rounds} rounds of {args.cycles} cycles a loop, one client")
    with scratch_schema() as ours, scratch_schema() as theirs, scratch_schema() as before:
        lg, conn = langgraph_loop(theirs)
        try:
            lg(10)  # warm
            with serve(ours, "interlock.examples.banking:AGENTS") as (url, _):
                loops: list[tuple[str, Callable[[int], tuple[Figures, float]]]] = [
                    ("interlock", lambda n: run_wire(url, 1, n)[:2]), ("langgraph", lg)]
                if args.baseline:
                    with serve(before, "interlock.examples.banking:AGENTS",
                               root=args.baseline) as (old, _):
                        loops.append(("interlock before", lambda n: run_wire(old, 1, n)[:2]))
                        report(loops, args)
                else:
                    report(loops, args)
        finally:
            conn.close()


def report(loops: list[tuple[str, Callable[[int], tuple[Figures, float]]]],
           args: argparse.Namespace) -> None:
    rates: dict[str, list[float]] = {name: [] for name, _ in loops}
    for _, loop in loops:
        loop(max(10, args.cycles // 10))  # warm each
    for r in range(args.rounds):
        line = []
        for name, loop in loops:
            figures, elapsed = loop(args.cycles)
            rates[name].append(len(figures.resume) / elapsed)
            line.append(f"{name} {rates[name][-1]:.1f}/s")
        print(f"round {r + 1}: " + ", ".join(line)
              + f"; ratio {rates['interlock'][-1] / rates['langgraph'][-1]:.2f}x", flush=True)
    lg = sum(rates["langgraph"]) / len(rates["langgraph"])
    for name, values in rates.items():
        mean = sum(values) / len(values)
        spread = statistics.pstdev(values)
        print(f"{name:<18} {mean:7.1f} cycles/s (±{spread:.1f})  {mean / lg:.2f}x LangGraph")


if __name__ == "__main__":
    main()
