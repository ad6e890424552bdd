"""The API tests' agents, and a payments agent whose approvals are due at once."""

from __future__ import annotations

from datetime import timedelta

from interlock.domain import Agent, Approval, FunctionModel
from tests.api.agents import AGENTS as API_AGENTS
from tests.api.agents import pay, pay_script

# Its approval expires 1 ms after the request: the next sweep expires it.
HASTY = Agent(name="hastyPayAgent", system="Pays, if someone approves in time.", tools=[pay],
              approvals={"pay": Approval(roles=["treasury"],
                                         expires_in=timedelta(milliseconds=1))},
              model=FunctionModel(pay_script, name="pay-script"))

AGENTS = [*API_AGENTS, HASTY]
