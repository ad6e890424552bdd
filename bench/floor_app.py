"""The served cycle's three requests answered by FastAPI alone: Interlock's own request and
response models, canned answers recorded from one real cycle, no store, auth, views or
middleware of ours. `bench_floor` counts what this server executes per cycle.

    .venv/bin/python -m bench.floor_app --port 0
"""

from __future__ import annotations

import argparse
import asyncio
from uuid import UUID

import uvicorn
from fastapi import FastAPI

from bench.bench_http import APPROVE, TEXT
from interlock.api.schemas import ChatCreate, ChatPublic, MessageCreate, ResumeRequest, TurnPublic
from interlock.bootstrap import build_service
from interlock.domain import RespondEntry
from interlock.examples.banking import AGENTS
from interlock.process import tune_gc


def recorded() -> tuple[ChatPublic, TurnPublic, TurnPublic]:
    """One real banking cycle on the memory store, as the API answers it."""
    service = build_service("memory://", AGENTS)

    async def cycle() -> tuple[ChatPublic, TurnPublic, TurnPublic]:
        chat = service.start_chat("bankingAgent", actor="bench")
        sent = await service.send(chat.id, TEXT, actor="bench")
        [i] = sent.interrupts
        done = await service.resume(
            chat.id, respond=[RespondEntry(ref=i.ref, name=i.name, output=APPROVE)],
            actor="bench")
        return ChatPublic.of(chat), TurnPublic.of(sent), TurnPublic.of(done)

    return asyncio.run(cycle())


def floor_app() -> FastAPI:
    created, sent, done = recorded()
    app = FastAPI()

    @app.post("/v1/chats", status_code=201, response_model=ChatPublic)
    async def create_chat(body: ChatCreate) -> ChatPublic:
        return created

    @app.post("/v1/chats/{chat_id}/messages", response_model=TurnPublic)
    async def send_message(chat_id: UUID, body: MessageCreate) -> TurnPublic:
        return sent

    @app.post("/v1/chats/{chat_id}/resume", response_model=TurnPublic)
    async def resume(chat_id: UUID, body: ResumeRequest) -> TurnPublic:
        return done

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    app = floor_app()
    tune_gc()  # as `interlock serve` does once loaded
    uvicorn.run(app, port=args.port, http="httptools", access_log=False,
                log_level="info")


if __name__ == "__main__":
    main()
