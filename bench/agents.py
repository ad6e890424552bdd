"""The banking agent behind a model that takes a while to answer, as a remote LLM does.

    interlock serve --agents bench.agents:AGENTS   (BENCH_MODEL_LATENCY_MS, default 100)
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

from interlock import FunctionModel, ModelRequest, ModelResponse
from interlock.examples.banking import banking, banking_script

LATENCY = float(os.environ.get("BENCH_MODEL_LATENCY_MS", "100")) / 1000


async def slow_script(request: ModelRequest) -> ModelResponse:
    await asyncio.sleep(LATENCY)
    return banking_script(request)


AGENTS = [replace(banking, model=FunctionModel(slow_script, name="slow-banking-script"))]
