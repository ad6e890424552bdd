"""The seed's banking agent on a real model: `INTERLOCK_MODEL`, by default `ollama:llama3.1`.

    interlock serve --agents interlock.providers.banking_demo:AGENTS
"""

from __future__ import annotations

import os

from interlock.domain import Agent
from interlock.examples.banking import banking

DEFAULT_MODEL = "ollama:llama3.1"

# Small local models follow a spelled-out procedure better than a one-line rule.
SYSTEM = (
    f"{banking.system} "
    "Call userApproval first with action 'transfer' and the details of the transfer. "
    "Only if the approval says approved=true, call transferMoney with the amount as a number "
    "and to_account as the destination account name. Then tell the user the new balance."
)


def banking_on(model: str) -> Agent:
    """The banking agent with its tools, played by `model` ("provider:model")."""
    return Agent(name=banking.name, system=SYSTEM, tools=banking.tools, model=model,
                 description=banking.description)


AGENTS = [banking_on(os.environ.get("INTERLOCK_MODEL", DEFAULT_MODEL))]
