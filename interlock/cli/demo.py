"""`interlock demo`: a command-line conversation with an agent, through the real service."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

from interlock.bootstrap import service_from
from interlock.domain import Interlock, RespondEntry, RestartEntry, TurnResult
from interlock.domain.errors import InterlockError
from interlock.domain.results import Interrupt
from interlock.settings import flag_help as _help
from interlock.settings import load_settings

Ask = Callable[[str], str]


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "demo",
        help="chat with an agent in the terminal (no HTTP)",
        description="Chat with an agent in the terminal. Interrupts ask you to approve "
        "(respond) or rerun (restart) the tool. Messages given with --say run "
        "unattended and approve every interrupt.",
    )
    parser.add_argument(
        "--agents", help=_help("module:attribute holding a list of Agent", "agents")
    )
    parser.add_argument("--agent", default=None, help="agent name (default: the first one)")
    parser.add_argument(
        "--store", help=_help("memory://, sqlite:///file.db or postgresql://...", "store")
    )
    parser.add_argument(
        "--say",
        action="append",
        default=[],
        metavar="TEXT",
        help="send TEXT and approve interrupts automatically (repeatable)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(agents=args.agents, store=args.store)
    app = service_from(settings)
    name = args.agent or next(iter(app.agents))
    scripted = list(args.say)
    ask: Ask = _scripted_answers if scripted else input
    chat = app.start_chat(name, actor="cli")
    print(f"chat {chat.id} with {name} (store {settings.store}); empty line or Ctrl-D ends")
    try:
        for text in scripted or _typed_lines():
            _show(asyncio.run(app.send(chat.id, text, actor="cli")))
            if not _settle(app, chat.id, ask):
                print(f"\nno decision: chat {chat.id} keeps its call pending; bye")
                break
    except InterlockError as exc:
        print(f"error [{exc.code}]: {exc.message}")
        return 1
    finally:
        app.close()
    return 0


def _typed_lines() -> Any:
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            return
        if not line:
            return
        yield line


def _scripted_answers(prompt: str) -> str:
    print(prompt + "y")
    return "y"


ANSWERS = {"y": "y", "yes": "y", "n": "n", "no": "n", "r": "r", "restart": "r"}


def _settle(app: Interlock, chat_id: Any, ask: Ask) -> bool:
    """Decide interrupts until the turn ends; False if the user left (Ctrl-D) instead."""
    pending = app.get_chat(chat_id).pending_interrupts()
    while pending:
        call = pending[0]
        interrupt = Interrupt.of(app.get_chat(chat_id), call)
        print(
            f"  interrupt {interrupt.ref}: {interrupt.name} {json.dumps(interrupt.input)} "
            f"{json.dumps(interrupt.metadata)}"
        )
        answer = _answer(ask)
        if answer is None:
            return False
        result = asyncio.run(app.resume(chat_id, actor="cli", **_decision(interrupt, answer)))
        _show(result)
        pending = app.get_chat(chat_id).pending_interrupts()
    return True


def _answer(ask: Ask) -> str | None:
    """y, n or r, asked again until it is one of them; None at the end of input."""
    while True:
        try:
            said = ask("  approve? [y]es / [n]o / [r]estart with override: ").strip().lower()
        except EOFError:
            return None
        if said in ANSWERS:
            return ANSWERS[said]
        print(f"  {said!r} is not an answer: type y, n or r (Ctrl-D leaves it pending)")


def _decision(interrupt: Interrupt, answer: str) -> dict[str, Any]:
    """An approval tool gets the answer as its output; any other tool is rerun on yes."""
    wants_output = "approv" in interrupt.name.lower()
    if answer.startswith("r") or (answer.startswith("y") and not wants_output):
        return {
            "restart": [
                RestartEntry(
                    ref=interrupt.ref, name=interrupt.name, resumed_metadata={"override": True}
                )
            ]
        }
    output = {"approved": answer.startswith("y")}
    return {"respond": [RespondEntry(ref=interrupt.ref, name=interrupt.name, output=output)]}


def _show(result: TurnResult) -> None:
    for message in result.messages:
        for part in message.content:
            if part.tool_request is not None:
                print(f"  -> {part.tool_request.name}({json.dumps(part.tool_request.input)})")
            elif part.tool_response is not None:
                print(f"  <- {part.tool_response.name}: {json.dumps(part.tool_response.output)}")
        if message.role == "model" and message.text:
            print(f"agent> {message.text}")
    print(f"  [{result.finish_reason}, version {result.version}]")
