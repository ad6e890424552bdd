"""A stdio transport whose reader holds at most `cap` bytes of one message.

The SDK's `stdio_client` joins the server's output into a string until a newline comes:
a 50 MB answer costs hundreds of MB and minutes of copying. This one reads bytes and
drops a line past the cap unread, answering the request it belongs to with an error the
model sees; a line too large whose request cannot be told ends the session (its calls
fail, saying why). The process handling (spawn, the spec's shutdown) is the SDK's own.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import StdioServerParameters
from mcp.client import stdio as sdk
from mcp.shared.message import SessionMessage

HEAD = 512  # bytes kept of a line past the cap, to find the request it answers
ANSWER_TOO_LARGE = -32099  # the error code of an answer dropped for its size
_ID = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*'
                 rb'(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")\s*[,}]')


def too_large(cap: int) -> str:
    return (f"the server's answer is larger than {cap} bytes "
            "(INTERLOCK_MCP_MAX_ANSWER_BYTES): it was dropped unread")


@asynccontextmanager
async def bounded_stdio_client(server: StdioServerParameters, cap: int,
                               on_unattributed: Callable[[], None]) -> AsyncIterator[Any]:
    """Like the SDK's `stdio_client`, reading each message within `cap` bytes."""
    process = await sdk._create_platform_compatible_process(  # the SDK's own spawn
        command=server.command, args=server.args,
        env=sdk.get_default_environment() | (server.env or {}), errlog=sys.stderr,
        cwd=server.cwd)
    reader_out, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, writer_in = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout is not None
        try:
            async with reader_out:
                try:
                    await _read_lines(process.stdout, reader_out, cap, on_unattributed)
                finally:
                    await sdk._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # the session is gone, or our shutdown closed the pipe under the read

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with writer_in:
                async for message in writer_in:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await reader_out.aclose()
        finally:
            writer_done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(stdout_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(0.5):
                    await writer_done.wait()
                await sdk._stop_server_process(process)
                for stream in (read_stream, write_stream, reader_out, writer_in):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _read_lines(stdout: Any, out: Any, cap: int, on_unattributed: Callable[[], None]
                      ) -> None:
    line = bytearray()
    head = b""
    dropping = False
    while True:
        try:
            chunk: bytes = await stdout.receive()
        except anyio.EndOfStream:
            return
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = memoryview(chunk)[start:end if end >= 0 else len(chunk)]
            if not dropping and len(line) + len(piece) > cap:
                head = (bytes(line) + bytes(piece))[:HEAD]
                line.clear()
                dropping = True
            elif not dropping:
                line += piece
            if end < 0:
                break
            start = end + 1
            if dropping:
                dropping = False
                answer = _refusal(head, cap)
                if answer is None:
                    on_unattributed()
                    return  # the session ends: its calls fail, and say why
                await out.send(answer)
            else:
                text = line.decode("utf-8", errors="replace")
                line.clear()
                if text.strip():
                    await out.send(sdk._parse_line(text))


def _refusal(head: bytes, cap: int) -> SessionMessage | None:
    """An error answer to the request a dropped line answered, when its head names it."""
    found = _ID.match(head)
    if found is None:
        return None
    raw = found.group(1)
    request_id: int | str = json.loads(raw)
    error = types.ErrorData(code=ANSWER_TOO_LARGE, message=too_large(cap))
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
