"""Fake provider servers on 127.0.0.1 and real SDK clients pointed at them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest

from interlock.domain import Agent, Interlock
from interlock.examples.banking import banking
from interlock.providers import AnthropicModel, OpenAIModel, RetryPolicy
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.fakes import FakeProvider

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.005)
ProviderModel = OpenAIModel | AnthropicModel


@dataclass
class Wire:
    """One provider under test: its fake server and a real SDK-backed model pointed at it."""

    provider: str
    fake: FakeProvider
    model: ProviderModel

    def app(self) -> Interlock:
        """The real application service, in memory, with the banking agent on this model."""
        agent = Agent(name=banking.name, system=banking.system, tools=banking.tools,
                      model=self.model)
        return Interlock([agent])


def make_model(provider: str, fake: FakeProvider, retry: RetryPolicy = FAST,
               timeout: float = 5.0) -> ProviderModel:
    if provider == "openai":
        return OpenAIModel("gpt-4.1-mini", api_key="sk-test", base_url=f"{fake.base_url}/v1",
                           retry=retry, timeout=timeout)
    return AnthropicModel("claude-test-model", api_key="sk-ant-test", base_url=fake.base_url,
                          retry=retry, timeout=timeout)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic().start()
    yield fake
    fake.stop()


@pytest.fixture(params=["openai", "anthropic"])
async def wire(request: pytest.FixtureRequest, anyio_backend: str) -> AsyncIterator[Wire]:
    """Each provider test runs against both wire protocols."""
    fake: FakeProvider = request.getfixturevalue(f"fake_{request.param}")
    model = make_model(request.param, fake)
    yield Wire(request.param, fake, model)
    await model.aclose()
