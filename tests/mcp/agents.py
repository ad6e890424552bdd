"""An agent module as `interlock serve --agents tests.mcp.agents:AGENTS` loads it: the billing
server's tools, from the spec in BILLING_MCP (as a deployment would name its server)."""

from __future__ import annotations

import os

from interlock import Agent
from interlock.mcp import mcp_tools
from tests.kit import FunctionModel, say

AGENTS = [Agent(name="billing", system="You refund invoices.",
                tools=mcp_tools(os.environ["BILLING_MCP"]),
                model=FunctionModel(lambda _: say("ok")))]
