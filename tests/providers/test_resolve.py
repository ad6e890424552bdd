"""Choosing a provider by string, configured from the environment."""

from __future__ import annotations

import pytest

from interlock.domain import Agent, Interlock
from interlock.domain.runtime.models import Model
from interlock.examples.banking import banking
from interlock.providers import (
    OLLAMA_BASE_URL,
    AnthropicModel,
    OpenAIModel,
    ProviderConfigError,
    banking_demo,
    resolve_model,
)
from tests.providers.conftest import FAST
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.fakes import Reply

pytestmark = pytest.mark.anyio


async def _base_url(model: Model) -> str:
    assert isinstance(model, OpenAIModel | AnthropicModel)
    url = str(model.client.base_url)
    await model.aclose()
    return url


async def test_openai_takes_its_key_and_base_url_from_the_environment() -> None:
    model = resolve_model("openai:gpt-4.1-mini", env={
        "OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": "http://vllm.local:8000/v1"})
    assert isinstance(model, OpenAIModel)
    assert (model.name, model.model) == ("openai:gpt-4.1-mini", "gpt-4.1-mini")
    assert model.client.api_key == "sk-1"
    assert await _base_url(model) == "http://vllm.local:8000/v1/"


async def test_anthropic_takes_its_key_and_base_url_from_the_environment() -> None:
    model = resolve_model("anthropic:claude-sonnet-4-5", env={
        "ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_BASE_URL": "http://proxy.local"})
    assert isinstance(model, AnthropicModel)
    assert model.name == "anthropic:claude-sonnet-4-5"
    assert await _base_url(model) == "http://proxy.local"


async def test_ollama_needs_no_key_and_defaults_to_the_local_server() -> None:
    model = resolve_model("ollama:llama3.1", env={})
    assert isinstance(model, OpenAIModel) and model.name == "ollama:llama3.1"
    assert await _base_url(model) == f"{OLLAMA_BASE_URL}/"
    elsewhere = resolve_model("ollama:qwen2.5:7b", env={"OLLAMA_BASE_URL": "http://gpu:11434/v1"})
    assert isinstance(elsewhere, OpenAIModel) and elsewhere.model == "qwen2.5:7b"
    assert await _base_url(elsewhere) == "http://gpu:11434/v1/"


@pytest.mark.parametrize(("spec", "env", "says"), [
    ("openai:gpt-4.1-mini", {}, "OPENAI_API_KEY is not set"),
    ("anthropic:claude-sonnet-4-5", {}, "ANTHROPIC_API_KEY is not set"),
    ("mistral:large", {}, "unknown model provider 'mistral'"),
    ("gpt-4.1-mini", {}, "must look like 'provider:model'"),
])
def test_a_bad_spec_or_missing_key_is_a_config_error(
    spec: str, env: dict[str, str], says: str
) -> None:
    with pytest.raises(ProviderConfigError, match=says):
        resolve_model(spec, env=env)


async def test_an_agent_naming_a_provider_string_runs_through_the_resolver(
    fake_openai: FakeOpenAI,
) -> None:
    env = {"OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": f"{fake_openai.base_url}/v1"}
    models: list[Model] = []

    def resolve(spec: str) -> Model:
        models.append(resolve_model(spec, env=env, retry=FAST))
        return models[-1]

    agent = Agent(name="bankingAgent", system=banking.system, tools=banking.tools,
                  model="openai:gpt-4.1-mini")
    app = Interlock([agent], resolve_model=resolve)
    chat = app.start_chat("bankingAgent", actor="alice")
    fake_openai.queue(Reply(text="Hello from the fake."))

    try:
        result = await app.send(chat.id, "hi", actor="alice")
    finally:
        await _base_url(models[0])

    assert result.text == "Hello from the fake."
    assert fake_openai.body()["model"] == "gpt-4.1-mini"
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sk-1"


async def test_the_banking_demo_runs_on_ollama_through_the_openai_wire(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", f"{fake_openai.base_url}/v1")
    models: list[Model] = []

    def resolve(spec: str) -> Model:
        models.append(resolve_model(spec, retry=FAST))
        return models[-1]

    agent = banking_demo.banking_on(banking_demo.DEFAULT_MODEL)
    app = Interlock([agent], resolve_model=resolve)
    chat = app.start_chat("bankingAgent", actor="alice")
    fake_openai.queue(Reply(text="What should I transfer?"))
    try:
        result = await app.send(chat.id, "hello", actor="alice")
    finally:
        await _base_url(models[0])

    assert models[0].name == banking_demo.DEFAULT_MODEL
    assert result.text == "What should I transfer?"
    assert fake_openai.body()["model"] == "llama3.1"
    assert fake_openai.system() == banking_demo.SYSTEM
