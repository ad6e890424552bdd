"""ToolMatch and None in Agent(approvals=...), and servers' JSON schemas as types (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from interlock import Agent, Approval, ToolContext, tool
from interlock.domain.runtime.tools import SchemaError, Tool
from interlock.mcp import McpConfigurationError, ToolMatch
from interlock.mcp.schema import json_schema_type

TREASURY = Approval(roles=["treasury"])
OPS = Approval(roles=["ops"])


class Invoice(BaseModel):
    invoice: str


def remote(name: str, server: str, **annotations: Any) -> Tool:
    """A tool as mcp_tools makes one, without a server behind it."""

    async def never(input: Any, ctx: ToolContext) -> Any:
        raise AssertionError("not called here")

    return Tool(name=name, description="", fn=never, input_type=Invoice, approval=OPS,
                annotations=annotations, provenance={"server": server, "tool": name})


@tool(name="local", approval=TREASURY)
async def local(input: Invoice, ctx: ToolContext) -> str:
    return input.invoice


def agent(approvals: dict[Any, Approval | None]) -> Agent:
    tools = [local, remote("refund", "billing", destructiveHint=True),
             remote("balance", "billing", readOnlyHint=True, destructiveHint=False),
             remote("refund_pay", "payroll", destructiveHint=True)]
    return Agent(name="a", system="", tools=tools, model="openai:gpt-4.1-mini",
                 approvals=approvals)


def test_a_name_wins_then_the_first_match_then_the_tool_s_own() -> None:
    a = agent({"refund": TREASURY, ToolMatch(server="billing"): None,
               ToolMatch(annotations={"destructiveHint": True}): OPS})
    assert a.policy("refund") is TREASURY
    assert a.policy("balance") is None  # the billing match says: unheld
    assert a.policy("refund_pay") is OPS
    assert a.policy("local") is TREASURY and a.policy("nope") is None


def test_none_by_name_runs_even_a_tool_that_declares_a_policy_unheld() -> None:
    assert agent({"local": None}).policy("local") is None
    assert agent({}).policy("local") is TREASURY  # as before ToolMatch existed


def test_a_match_names_the_server_s_own_tool_name_and_exact_annotation_values() -> None:
    assert ToolMatch(server="billing", name="refund").matches(
        "billing_refund", {"server": "billing", "tool": "refund"}, {})
    assert not ToolMatch(name="refund").matches("x", {"tool": "refund_v2"}, None)
    assert ToolMatch(name="local").matches("local", None, None)  # a local tool: its name
    destructive = ToolMatch(annotations={"destructiveHint": True})
    assert not destructive.matches("t", None, {})  # a missing hint matches nothing
    assert not destructive.matches("t", None, {"destructiveHint": "true"})


def test_matches_are_keys_described_by_value_and_must_name_something() -> None:
    one, same = ToolMatch(server="b", annotations={"x": True}), ToolMatch(server="b",
                                                                          annotations={"x": True})
    assert one == same and {one: 1}[same] == 1
    assert one.describe() == {"server": "b", "name": None, "annotations": {"x": True}}
    with pytest.raises(ValueError, match="name a server"):
        ToolMatch()
    with pytest.raises(ValueError, match="approvals match no tool"):
        agent({ToolMatch(server="crm"): OPS})
    with pytest.raises(ValueError, match="unknown tools"):
        agent({"refnud": OPS})


def test_policies_by_match_change_the_fingerprint() -> None:
    assert agent({}).fingerprint != agent({ToolMatch(server="billing"): None}).fingerprint
    [first, *_] = agent({}).described()["tools"]  # type: ignore[misc]
    assert first["name"] == "local" and "provenance" not in first


def test_a_server_schema_that_is_no_json_schema_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(McpConfigurationError) as bad:
        json_schema_type({"type": "invoice"}, "MCP server 'billing', tool 'refund'")
    assert str(bad.value).startswith("MCP server 'billing', tool 'refund' is not a valid JSON")


def test_a_server_schema_checks_values_and_is_shown_as_given() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
              "required": ["n"], "additionalProperties": False}
    checked = Tool(name="t", description="", fn=local.fn,
                   input_type=json_schema_type(schema, "t"))
    assert checked.definition.input_schema == schema
    assert checked.validate_input({"n": 2}) == {"n": 2}
    with pytest.raises(SchemaError) as bad:
        checked.validate_input({"n": 0, "extra": 1})
    message = bad.value.errors[0]["msg"]
    assert "n: 0 is less than the minimum of 1" in message and "'extra' was unexpected" in message
